"""Red-team fixtures (issue 16, item 5): each attack gets its asserted outcome, does no harm
outside its job (no process left, nothing written outside job directories, no secret in what
comes back, no connection out, the fork server untouched), and the next honest candidate still
evaluates the same. Table: tests/evaluate/attacks.py."""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import secrets
import shutil
import socket
import tempfile
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from htam.evaluate import Evaluator
from htam.evaluate.host import inline_calls
from tests.evaluate.attacks import ATTACKS_CPU, ATTACKS_GPU, Attack
from tests.evaluate.cases import FIXTURES, RELU
from tests.evaluate.conftest import fast_config, gpu_config, task_for

# Each attack is a whole sandboxed evaluation, several a minute on 2 cores: the full suite runs
# them (`pytest`); the fast tier (`-m "not slow"`) leaves them out.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PORT = 47391  # the fixtures connect here
MARKER = "htam-redteam-marker"
PROC_MARKERS = (b"htam-redteam", b"3171.5", b"3172.5", b"3173.5", b"3174.5")


@dataclass
class Arena:
    """What the attacks aim at, planted by the test: a cache folder a candidate can see (as a
    cache in a world-readable home would be), an API key in this process's environment, a
    private folder in the home, and listeners on the loopback and on Unix sockets."""

    base: Path
    cache: Path
    key: str
    home_secret: str
    private: Path
    listeners: list = field(default_factory=list)
    evaluator: Evaluator | None = None
    honest: object = None

    @property
    def secrets(self) -> list[str]:
        return [self.key, self.home_secret]


def _listen(family, address) -> socket.socket:
    s = socket.socket(family, socket.SOCK_STREAM)
    s.bind(address)
    s.listen(16)
    s.setblocking(False)
    return s


@pytest.fixture(scope="module")
def arena():
    saved = {k: os.environ.get(k) for k in ("HTAM_CACHE_DIR", "OPENAI_API_KEY", "DATABASE_URL")}
    base = Path(tempfile.mkdtemp(prefix="htam-redteam-", dir="/var/cache"))
    base.chmod(0o755)
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    private = home / ".htam-redteam"
    a = Arena(
        base=base,
        cache=base / "cache",
        key="sk-redteam-" + secrets.token_hex(12),
        home_secret="sk-redteam-home-" + secrets.token_hex(12),
        private=private,
    )
    private.mkdir(mode=0o700, exist_ok=True)
    (private / "secret.txt").write_text(a.home_secret)
    (private / "secret.txt").chmod(0o600)
    os.environ["HTAM_CACHE_DIR"] = str(a.cache)
    os.environ["OPENAI_API_KEY"] = a.key
    os.environ["DATABASE_URL"] = f"postgres://app:{a.key}@db/prod"  # a secret by no marker
    try:
        a.listeners.append(_listen(socket.AF_INET, ("127.0.0.1", PORT)))
        a.listeners.append(_listen(socket.AF_UNIX, "\0htam-redteam"))
        a.listeners.append(_listen(socket.AF_UNIX, str(base / "redteam.sock")))
        (base / "redteam.sock").chmod(0o777)
        a.evaluator = Evaluator("cpu", fast_config(cache_dir=a.cache))
        a.honest = _honest(a.evaluator)
        yield a
    finally:
        if a.evaluator is not None:
            a.evaluator.close()
        for s in a.listeners:
            s.close()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(private, ignore_errors=True)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _evaluate(evaluator, solution: str, language: str, task=RELU):
    return evaluator.evaluate(task_for(task), (FIXTURES / solution).read_text(), language)


def _honest(evaluator):
    result = _evaluate(evaluator, "honest_relu_triton.py", "triton")
    assert result.status == "ok", f"honest: {result.messages}\n{result.log[-2000:]}"
    return result


# --------------------------------------------------------------------------- harm checks


def _marker_places(a: Arena) -> list[Path]:
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    places = [Path(p) for p in ("/", "/tmp", "/var/tmp", "/dev/shm", "/var/cache", "/run", "/etc")]
    places += [home, home / ".cache", home / ".triton" / "cache", REPO, REPO / "htam", a.base]
    # (not inside cache/builds/<digest>/: a candidate's own build folders are promoted there by
    # design, for its own code only; changes to anything else in the cache are checked by hash)
    builds = a.cache / "builds"
    places += [p for p in a.base.rglob("*") if p.is_dir() and builds not in p.parents]
    return places


def _markers(a: Arena) -> list[str]:
    return sorted(str(p) for d in _marker_places(a) for p in d.glob(f"{MARKER}*"))


def _redteam_processes() -> list[str]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            with contextlib.suppress(OSError):
                cmd = Path(f"/proc/{name}/cmdline").read_bytes()
                if any(m in cmd for m in PROC_MARKERS):
                    found.append(f"{name}: {cmd[:120]!r}")
    return found


def _cache_files(a: Arena) -> dict[str, str]:
    out = {}
    for p in a.cache.rglob("*"):
        if p.relative_to(a.cache).parts[0] == "pch":
            # the host's precompiled headers (host/pch.py; 0.8 GB each) and its count of their
            # builds: shown to a candidate read-only (tests/evaluate/test_pch.py)
            continue
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(a.cache))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _connections(a: Arena) -> list[str]:
    got = []
    for s in a.listeners:
        with contextlib.suppress(BlockingIOError):
            while True:
                conn, _ = s.accept()
                conn.settimeout(0.5)
                with contextlib.suppress(OSError):
                    got.append(f"{s.getsockname()!r}: {conn.recv(100)!r}")
                conn.close()
    return got


# What a result may not carry (a terminal acts on it, or it hides or reorders text on display):
# controls but tab and newline, format characters, line and paragraph separators, surrogates
_HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Cs"}


def _hidden_characters(text: str) -> list[str]:
    return sorted(
        {f"U+{ord(c):04X}" for c in text if c not in "\t\n" and unicodedata.category(c) in _HIDDEN}
    )


@dataclass
class Before:
    cache: dict
    server_pid: int


def _before(a: Arena) -> Before:
    assert not _markers(a), "a marker was left by an earlier test"
    assert not _connections(a)
    return Before(_cache_files(a), a.evaluator.server.process.pid)


def _no_harm(a: Arena, before: Before, result) -> None:
    deadline = time.monotonic() + 3.0
    while _redteam_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _redteam_processes(), (
        f"processes of the candidate outlived it: {_redteam_processes()}"
    )
    assert not _markers(a), f"written outside the job directory: {_markers(a)}"
    assert not _connections(a), f"the candidate connected out: {_connections(a)}"
    text = result.log + " | ".join(result.messages) + " | ".join(result.flags)
    for secret in a.secrets:
        assert secret not in text, "a planted secret came back in the result"
    hidden = _hidden_characters(text)
    assert not hidden, f"characters a reader does not see as written came back: {hidden}"
    after = _cache_files(a)
    changed = [k for k, v in before.cache.items() if after.get(k) != v]
    assert not changed, f"cache files changed: {changed}"
    server = a.evaluator.server.process
    assert server.pid == before.server_pid and server.poll() is None
    state = Path(f"/proc/{server.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    assert state != "T", "the fork server was left stopped"


def _still_honest(a: Arena) -> None:
    # Interpreted Triton on a shared 2-core machine moves by 4x between runs unprovoked, and by
    # 14x once in a clean-clone CI; a sabotaged evaluator moves it by orders of magnitude on
    # every run, so three tries tell the two apart.
    ratios = []
    for _ in range(3):
        ratios.append(_honest(a.evaluator).speedup / a.honest.speedup)
        if 1 / 10 < ratios[-1] < 10:
            return
    raise AssertionError(f"the honest candidate's speedup moved: {ratios}")


def _outcome(attack: Attack, result, a: Arena) -> None:
    text = " | ".join(result.messages)
    where = f"{attack.fixture}: {result.status} ({text})\n{result.log[-1500:]}"
    assert any(result.status == s and sub in text for s, sub in attack.expect), where
    if result.status == "ok" and attack.max_speedup_vs_honest:
        limit = attack.max_speedup_vs_honest * a.honest.speedup
        assert result.speedup <= limit, f"unearned speedup {result.speedup:.3f} > {limit:.3f}"
    if result.status == "ok" and attack.max_speedup:
        # Below the judge's clock resolution on this machine (a loaded 2-core CPU) the result
        # must say that its time rests on the candidate's own events; above it, the time holds.
        unbounded = any("clock resolution" in f for f in result.flags)
        assert unbounded or result.speedup <= attack.max_speedup, (
            f"unearned speedup {result.speedup:.1f} without a resolution flag"
        )


def _marks(attack: Attack):
    if attack.hole:
        return [pytest.mark.xfail(strict=True, reason=f"HOLE: {attack.hole}")]
    return []


@pytest.mark.parametrize(
    "attack",
    [pytest.param(x, id=x.fixture, marks=_marks(x)) for x in ATTACKS_CPU],
)
def test_attack_cpu(arena, attack):
    before, builds = _before(arena), set((arena.cache / "builds").glob("*"))
    result = _evaluate(arena.evaluator, attack.fixture, attack.language, attack.task)
    print(f"OUTCOME {attack.fixture}: {result.status} {result.speedup} {result.messages}")
    try:
        _no_harm(arena, before, result)
        if result.status != "ok":  # a failed candidate keeps nothing in the cache (red team)
            # but the builds the evaluator made ahead, itself, of the solution's plain
            # load_inline calls (sealed by it; the same sources give the same build to anyone)
            ahead = {
                arena.cache / "builds" / f"ext-{inline_calls.key(c)}"
                for c in inline_calls.calls((FIXTURES / attack.fixture).read_text())
            }
            assert set((arena.cache / "builds").glob("*")) <= builds | ahead, attack.fixture
        _outcome(attack, result, arena)
        if attack.cls == "slowing the reference" and result.status == "ok":
            ratio = result.ref_runtime_ms / arena.honest.ref_runtime_ms
            if ratio >= 2.0:  # or the machine's load moved: against the reference's time now
                ratio = result.ref_runtime_ms / _honest(arena.evaluator).ref_runtime_ms
            if ratio >= 2.0:  # a slowing attack slows it again; a load spike passes (CI, once)
                again = _evaluate(arena.evaluator, attack.fixture, attack.language, attack.task)
                ratio = again.ref_runtime_ms / _honest(arena.evaluator).ref_runtime_ms
            assert ratio < 2.0, f"the reference ran {ratio:.1f}x slower beside this candidate"
    finally:
        _cleanup_markers(arena)
        _still_honest(arena)


def _cleanup_markers(a: Arena) -> None:
    for m in _markers(a):
        with contextlib.suppress(OSError):
            os.unlink(m)
    _connections(a)


def test_symlinked_build_folder_reads_nothing(arena):
    before = _before(arena)
    first = _evaluate(arena.evaluator, "attack_symlink_build_cache.py", "triton")
    second = _evaluate(arena.evaluator, "attack_symlink_build_cache.py", "triton")
    try:
        for result in (first, second):
            _no_harm(arena, before, result)
            assert result.status == "ok", result.messages
        for p in arena.cache.rglob("*"):
            if p.is_file() and not p.is_symlink():
                assert arena.home_secret.encode() not in p.read_bytes(), f"copied into {p}"
    finally:
        _still_honest(arena)


# --------------------------------------------------------------------------- GPU (the lead's H200)


@pytest.fixture(scope="module")
def gpu_arena():
    saved = os.environ.get("OPENAI_API_KEY")
    key = "sk-redteam-" + secrets.token_hex(12)
    os.environ["OPENAI_API_KEY"] = key
    ev = Evaluator("cuda", gpu_config())
    try:
        yield ev, key
    finally:
        ev.close()
        if saved is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = saved


@pytest.mark.gpu
@pytest.mark.parametrize("attack", [pytest.param(x, id=x.fixture) for x in ATTACKS_GPU])
def test_attack_gpu(gpu_arena, attack):
    ev, key = gpu_arena
    result = _evaluate(ev, attack.fixture, attack.language, attack.task)
    text = " | ".join(result.messages)
    assert any(result.status == s and sub in text for s, sub in attack.expect), (
        f"{attack.fixture}: {result.status} ({text})\n{result.log[-1500:]}"
    )
    assert key not in result.log + text
    assert not _hidden_characters(result.log + text)
    time.sleep(1.0)
    assert not _redteam_processes()
    honest = _evaluate(ev, "honest_relu_cuda.py", "cuda")
    assert honest.status == "ok", honest.messages


def test_a_solution_that_is_not_valid_text_is_refused(arena):
    # A lone surrogate (json.loads takes "\ud83d" from a proposer's reply): the static check's
    # ast.parse raised UnicodeEncodeError out of Evaluator.evaluate, which ended the run.
    code = (FIXTURES / "honest_relu_triton.py").read_text() + "\n# \ud83d\n"
    result = arena.evaluator.evaluate(task_for(RELU), code, "triton")
    assert result.status == "compile_error", result.messages
    assert "lone surrogate" in result.messages[0]
    assert not _hidden_characters(" | ".join(result.messages))
