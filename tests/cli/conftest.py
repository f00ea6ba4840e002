import pytest


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A command's environment for CliRunner: run from tmp_path, with a cache of its own."""
    monkeypatch.chdir(tmp_path)
    return {"HTAM_CACHE_DIR": str(tmp_path / "cache")}
