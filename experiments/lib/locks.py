"""One writer per folder: an exclusive, non-blocking ``fcntl.flock`` on ``<folder>/.lock``.

Every writer of a workdir (``study.run_units`` / ``train_and_evaluate``, the suite, the
training binaries) and every orbax ``Checkpointer`` that saves holds the lock of its folder
while it writes, so two processes can never interleave unit files, summaries or orbax
temporary step folders (``*.orbax-checkpoint-tmp``). A second writer fails at once with
``Busy``, one line naming the folder and the holder's pid; it never waits.

The kernel drops the lock when the holder exits, however it exits (``kill -9`` included),
so a crashed run leaves no stale lock. The lock file holds the holder's pid and is removed
on release. Locks are re-entrant within a process (a study run that saves checkpoints
inside its own workdir takes the same lock twice). In a multi-host run only the main
process locks (the other processes write nothing but their own checkpoint shards).

``flock`` is honoured across processes of one machine and, on Linux, on NFS (emulated
with POSIX locks); hosts that share a folder over a file system without lock support are
not protected from each other.
"""

import contextlib
import errno
import fcntl
import os
import threading

from jaxlab.core import sharding

LOCK_NAME = ".lock"

_HELD: dict[str, list] = {}  # lock file path -> [fd, depth]
_GUARD = threading.Lock()


class Busy(RuntimeError):
    """Another process holds the folder's lock."""


def _holder_pid(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        pid = os.read(fd, 32).decode(errors="replace").strip()
    except OSError:
        pid = ""
    return pid if pid.isdigit() else "unknown"


def _acquire(path: str, folder: str, what: str) -> int:
    """Opens and flocks ``path``; returns the fd. Retries when the file was removed by a
    releasing holder between our open and our lock (the lock would be on a dead inode)."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            pid = _holder_pid(fd)
            os.close(fd)
            if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            raise Busy(f"{what} {folder} is in use by another process (pid {pid}, lock "
                       f"{path}); wait for it to finish or use another {what}.") from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)


@contextlib.contextmanager
def hold(folder: str | os.PathLike, what: str = "workdir"):
    """Holds the exclusive lock of ``folder`` (created if missing) for the ``with`` body.

    Args:
      folder: the folder to lock.
      what: how the error names the folder ("workdir", "checkpoint folder").

    Raises:
      Busy: another process holds it (one line: folder, holder's pid, lock file).
    """
    release = acquire(folder, what)
    try:
        yield
    finally:
        release()


def acquire(folder: str | os.PathLike, what: str = "workdir"):
    """``hold`` without the ``with``: takes the lock, returns the function that releases it
    (call it once). In a multi-host run the non-main processes get a no-op."""
    if not sharding.is_main_process():
        return lambda: None
    folder = os.path.abspath(os.fspath(folder))
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(os.path.realpath(folder), LOCK_NAME)
    with _GUARD:
        if path in _HELD:
            _HELD[path][1] += 1
        else:
            _HELD[path] = [_acquire(path, folder, what), 1]
    done = []

    def release() -> None:
        if done:
            return
        done.append(True)
        with _GUARD:
            entry = _HELD[path]
            entry[1] -= 1
            if entry[1]:
                return
            del _HELD[path]
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # still locked: nobody else can hold this inode
            os.close(entry[0])

    return release


def held(folder: str | os.PathLike) -> bool:
    """Whether this process holds the lock of ``folder``."""
    path = os.path.join(os.path.realpath(os.path.abspath(os.fspath(folder))), LOCK_NAME)
    with _GUARD:
        return path in _HELD
