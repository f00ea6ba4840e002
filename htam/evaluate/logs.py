"""Reading what a candidate wrote, on the host, without following anything it planted.

A candidate owns its job directory and may replace any name in it between two reads: by a link
to ``/proc/self/environ`` or a secret file (a privileged reader that follows it hands the host's
environment or the file back as the candidate's log), by a FIFO (an ``open`` that never
returns), a folder or a device. So its output log is read only through the descriptor the fork
server opened before the candidate existed, and any other file is opened with ``O_NOFOLLOW |
O_NONBLOCK`` and read only when it is a regular file, a bounded number of bytes.
"""

from __future__ import annotations

import functools
import os
import re
import stat
import unicodedata

# C0 controls but tab and newline, DEL, C1 controls: what a terminal acts on rather than shows
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Beyond ASCII, by Unicode category: controls, format characters (bidirectional overrides and
# isolates, zero-width characters, the invisible "tag" letters U+E0020-E007F), line and
# paragraph separators, and surrogates.
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


@functools.lru_cache(maxsize=4096)
def _shown(char: str) -> str:
    if char in "\t\n" or unicodedata.category(char) not in _HIDDEN:
        return char
    return "?"


def printable(text: str) -> str:
    """``text`` with every control and format character but tab and newline shown as "?". A
    candidate's log and messages end up on the operator's terminal (``htam eval --log``), where
    an escape sequence is acted on, not shown: it can clear the screen and print a forged
    verdict, set the clipboard (OSC 52) or the window title. Format characters are not acted on
    but change what is seen: a right-to-left override shows a line reordered (a forged verdict
    once rendered), and tag characters are invisible on screen yet read as text by the LLM the
    log is quoted to (instructions no reviewer sees). Line separators split a line for some
    readers and not others."""
    if text.isascii():
        return _CONTROL.sub("?", text)
    return "".join(map(_shown, text))


class NotRegular(OSError):
    """The name is not (or no longer) a regular file of its own."""


def read_tail(fd: int, limit: int) -> str:
    """The last ``limit`` bytes of the regular file open on ``fd``, as printable text; "" if it
    is not one. Reads by offset: the descriptor's own position (shared with a writer) is not
    moved."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return ""
        start = max(0, st.st_size - limit)
        chunks, got = [], 0
        while got < limit:
            chunk = os.pread(fd, limit - got, start + got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError:
        return ""
    return printable(b"".join(chunks).decode(errors="replace"))


def open_regular(path: str | os.PathLike, dir_fd: int | None = None) -> int:
    """A read-only descriptor of ``path`` if its last component is a regular file (no link
    followed, no FIFO or device opened in a way that could block); raises NotRegular otherwise."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as exc:
        raise NotRegular(exc.errno, f"{path}: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotRegular(0, f"{path}: not a regular file")
    return fd


def read_file_tail(path: str | os.PathLike, limit: int) -> str:
    """``read_tail`` of a file named by path, opened by ``open_regular``; "" for anything else."""
    try:
        fd = open_regular(path)
    except NotRegular:
        return ""
    try:
        return read_tail(fd, limit)
    finally:
        os.close(fd)
