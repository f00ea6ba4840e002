"""No host-side read of a path the candidate owns (issue 37, item 1): its output log is read
through the descriptor opened before it ran, whatever it left at the log's name; other files
it could have touched are opened without following links and only when regular."""

from __future__ import annotations

import os
import re
import secrets
import socket
import threading
from pathlib import Path

import pytest

from htam.evaluate import Evaluator
from htam.evaluate.logs import NotRegular, open_regular, printable, read_file_tail, read_tail
from tests.evaluate.cases import FIXTURES, RELU
from tests.evaluate.conftest import fast_config, task_for

SWAPS = ("environ", "secret", "fifo", "folder", "device")
# variants refused by name too: a chain of links, a link to a folder, a socket
NAMED_VARIANTS = ("chain", "folder_link", "socket")
# a hard link is a regular file of its own: only the descriptor opened before tells it from the
# log (and a job directory is a filesystem of its own, where a link to a host file fails: EXDEV)
VARIANTS = (*NAMED_VARIANTS, "hardlink")


# --------------------------------------------------------------------------- the readers


def _swap(folder: Path, kind: str, secret: Path) -> Path:
    log = folder / "output.log"
    log.unlink()
    if kind == "environ":
        log.symlink_to("/proc/self/environ")
    elif kind == "secret":
        log.symlink_to(secret)
    elif kind == "fifo":
        os.mkfifo(log)
    elif kind == "folder":
        log.mkdir()
    elif kind == "chain":
        (folder / "hop2").symlink_to("/proc/self/environ")
        (folder / "hop1").symlink_to(folder / "hop2")
        log.symlink_to(folder / "hop1")
    elif kind == "folder_link":
        log.symlink_to(folder)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(log))
        server.listen(1)
        _SOCKETS.append(server)  # listening while the reader tries it
    elif kind == "hardlink":
        os.link(secret, log)
    else:
        log.symlink_to("/dev/zero")
    return log


_SOCKETS: list[socket.socket] = []


@pytest.mark.parametrize("kind", SWAPS + NAMED_VARIANTS)
def test_reader_by_name_refuses_a_swapped_log(tmp_path, kind):
    secret = tmp_path / "secret.key"
    secret.write_text("sk-" + secrets.token_hex(8))
    (tmp_path / "output.log").write_text("its own words\n")
    log = _swap(tmp_path, kind, secret)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(read_file_tail(log, 4096)), daemon=True)
    reader.start()
    reader.join(10.0)
    assert not reader.is_alive(), f"reading a {kind} in the log's place hung"
    assert got == [""]
    with pytest.raises(NotRegular):
        os.close(open_regular(log))


@pytest.mark.parametrize("kind", SWAPS + VARIANTS)
def test_descriptor_opened_before_reads_the_log_itself(tmp_path, kind):
    secret = tmp_path / "secret.key"
    secret.write_text("sk-" + secrets.token_hex(8))
    (tmp_path / "output.log").write_text("x" * 5000 + "its own words\n")
    fd = os.open(tmp_path / "output.log", os.O_RDONLY)
    try:
        _swap(tmp_path, kind, secret)
        tail = read_tail(fd, 100)
    finally:
        os.close(fd)
    assert tail.endswith("its own words\n") and len(tail) == 100


# --------------------------------------------------------------------------- through the evaluator


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """An API key in this process's environment and a root-only secret file a link can name."""
    key = "sk-planted-" + secrets.token_hex(12)
    folder = Path(tmp_path_factory.mktemp("owned"))
    secret_file = folder / "secret.key"
    secret_file.write_text("sk-file-" + secrets.token_hex(12))
    secret_file.chmod(0o600)
    saved = os.environ.get("HTAM_API_KEY")
    os.environ["HTAM_API_KEY"] = key
    try:
        with Evaluator("cpu", fast_config()) as evaluator:
            yield evaluator, key, secret_file
    finally:
        if saved is None:
            os.environ.pop("HTAM_API_KEY", None)
        else:
            os.environ["HTAM_API_KEY"] = saved


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", SWAPS)
def test_swapped_log_reaches_no_result(planted, kind):
    evaluator, key, secret_file = planted
    target = f"secret:{secret_file}" if kind == "secret" else kind
    code = (FIXTURES / "attack_swap_log.py").read_text().replace("SWAP_TARGET", target)
    result = evaluator.evaluate(task_for(RELU), code, "triton")
    text = result.log + " | ".join(result.messages) + " | ".join(result.flags)
    assert key not in text and "HTAM_API_KEY" not in text, "the host's environment came back"
    # /proc/self/environ is this process's environment as it started
    started = Path("/proc/self/environ").read_bytes().decode(errors="replace").split("\0")
    leaked = [e for e in started if len(e) > 16 and "=" in e and e in text]
    assert not leaked, f"the host's environment came back: {leaked[:3]}"
    assert secret_file.read_text() not in text, "the secret file came back"
    assert result.status == "runtime_error", (result.status, result.messages)
    assert any("replaced its output log" in m for m in result.messages), result.messages
    assert "htam-swap honest line before the swap" in result.log


def test_printable_shows_control_characters():
    assert printable("a\x1b[2Jb\x07c\x9b31m\td\ne\r") == "a?[2Jb?c?31m\td\ne?"


def test_printable_shows_format_characters():
    # a right-to-left override, an isolate, zero-width characters, a line separator and tag
    # characters (invisible, read as letters by a language model); other text kept as it is
    tags = "".join(chr(0xE0000 + ord(c)) for c in "hi")
    text = "ok \u202ex\u2066\u200b\ufeff\u2028" + tags + " é ü 中 × ∑\t\n"
    assert printable(text) == "ok ?x?????? é ü 中 × ∑\t\n"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_terminal_escapes_reach_no_result(planted):
    evaluator, _, _ = planted
    code = (FIXTURES / "attack_terminal_escapes.py").read_text()
    result = evaluator.evaluate(task_for(RELU), code, "triton")
    text = result.log + " | ".join(result.messages)
    assert "htam-escapes" in result.log and "htam-escapes" in text.split(" | ", 1)[-1], text
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", text), repr(text[-400:])
