"""The candidate's syscall filter (syscall_filter.restrict_syscalls), in a throwaway child: no new
namespace, no 32-bit or x32 syscall (red team 6 went round the filter through ``int $0x80``),
while what torch, Triton and compilers do (threads, fork, exec) still works."""

import ctypes
import errno
import os
import shutil
import signal
import subprocess
import threading

import pytest

from htam.evaluate.sandbox import isolation, syscall_filter

CLONE_NEWUSER, CLONE_NEWNS, SIGCHLD = 0x10000000, 0x00020000, 17
libc = ctypes.CDLL(None, use_errno=True)

# getpid through the i386 ABI (its number 20), then exit 0 through it (1): run to the end only
# when the filter lets 32-bit syscalls through
INT80 = r"""
int main(void) {
    long ret;
    __asm__ volatile ("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
    __asm__ volatile ("int $0x80" : : "a"(1L), "b"(0L) : "memory");
    return 3;
}
"""


def _filtered(body) -> int:
    """Exit status of a child that installs the filter and runs ``body`` (its exit code)."""
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            isolation.prctl(isolation.PR_SET_NO_NEW_PRIVS, 1)
            syscall_filter.restrict_syscalls()
            code = body()
        finally:
            os._exit(code)
    return os.waitpid(pid, 0)[1]


def _refused(nr: int, *args: int) -> int:
    ret = libc.syscall(nr, *args)
    if ret == 0:  # a clone that went through: this is the new child
        os._exit(7)
    return ctypes.get_errno() if ret == -1 else -ret


def test_new_namespaces_are_refused_and_clone3_falls_back():
    def body() -> int:
        if _refused(272, CLONE_NEWUSER) != errno.EACCES:  # unshare
            return 1
        if _refused(272, CLONE_NEWNS) != errno.EACCES:
            return 2
        if _refused(56, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0) != errno.EACCES:  # clone
            return 3
        if _refused(435, 0, 0) != errno.ENOSYS:  # clone3: the C library falls back to clone
            return 4
        return 0

    status = _filtered(body)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_threads_fork_and_exec_still_work():
    def body() -> int:
        seen = []
        t = threading.Thread(target=seen.append, args=(1,))
        t.start()
        t.join()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        forked = os.waitpid(pid, 0)[1]
        ran = subprocess.run(["true"], check=False).returncode
        return 0 if seen == [1] and forked == 0 and ran == 0 else 5

    status = _filtered(body)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_a_32_bit_syscall_kills_the_process(tmp_path):
    (tmp_path / "int80.c").write_text(INT80)
    exe = tmp_path / "int80"
    subprocess.run(["cc", "-O0", "-o", str(exe), str(tmp_path / "int80.c")], check=True)
    unfiltered = subprocess.run([str(exe)], check=False).returncode
    if unfiltered != 0:
        pytest.skip("this kernel has no 32-bit syscalls (no IA32 emulation)")

    status = _filtered(lambda: subprocess.run([str(exe)], check=False).returncode)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 256 - signal.SIGSYS, status


def test_vmsplice_and_other_unneeded_calls_are_refused():
    """vmsplice made a pipe pin a process's (huge) pages after it unmapped them: 3 GB held under
    a 1 GiB limit that counted what processes map (issue 37)."""
    names = {
        278: "vmsplice",
        323: "userfaultfd",
        298: "perf_event_open",
        321: "bpf",
        310: "process_vm_readv",
        304: "open_by_handle_at",
        165: "mount",
        430: "fsopen",
    }

    def body() -> int:
        for nr in names:
            if _refused(nr, 0, 0, 0) != errno.EACCES:
                return 10 + list(names).index(nr)
        return 0

    status = _filtered(body)
    assert os.waitstatus_to_exitcode(status) == 0, (
        f"{list(names.values())[os.waitstatus_to_exitcode(status) - 10]} went through"
    )
