"""Every file minigraph writes is written whole or not at all.

A plan, a CSV, a trace, a results table or a notebook is written to a temporary file in the
same folder and renamed over the old one when it is complete (`os.replace`, atomic on POSIX
and Windows when both names are on one file system). A process killed mid-write (Ctrl-C,
SIGKILL, a full disk) leaves the old file as it was and at most a stray `.NAME.*.tmp` beside
it, never half a plan that a later `--check` would read as a smaller valid one.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8",
                newline: str | None = None) -> Iterator[IO]:
    """`open(path, mode)` for writing, but into a temporary file beside `path` that takes
    `path`'s name only once the block ends without an error (flushed and synced first);
    on an error the temporary file is removed and `path` is untouched. `mode`: "w" or
    "wb"."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open: mode must be 'w' or 'wb', not {mode!r}")
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:        # name the file asked for, not the temporary one
        raise type(e)(e.errno, e.strerror, str(path)) from None
    try:
        binary = mode == "wb"
        with os.fdopen(fd, mode, encoding=None if binary else encoding,
                       newline=None if binary else newline) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if path.exists():           # keep the old file's permissions (mkstemp gives 0600)
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8",
               newline: str | None = None) -> None:
    """`Path(path).write_text(text)`, atomically (`atomic_open`)."""
    with atomic_open(path, "w", encoding=encoding, newline=newline) as f:
        f.write(text)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """`Path(path).write_bytes(data)`, atomically (`atomic_open`)."""
    with atomic_open(path, "wb") as f:
        f.write(data)
