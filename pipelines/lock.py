"""One writer per acker: an exclusive lock held for the whole of a job that writes.

``run``, ``tick``, ``init`` and ``demo`` hold an advisory ``flock`` on
``<warehouse>/_locks/<schema>.lock`` while they work. A second writer started meanwhile is
refused at once with a message naming the holder (process id, host, verb, start time). The
operating system releases the lock when its holder exits, however it exits, so a crashed run
never leaves a stale lock behind. ``ingest`` takes no lock: appending to ``ack_events`` is
what any producer does, and Delta serialises appends.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from pipelines.config import Config
from pipelines.errors import WriterBusy

__all__ = ["lock_path", "writer_lock"]

_held: set[Path] = set()


def lock_path(config: Config) -> Path:
    """The lock file of the acker ``config`` names: in ``writer.lock_dir`` if set, else in the
    local warehouse, or for a warehouse on an object store in this user's cache, one file per
    warehouse URI (the writer lease, not this lock, keeps writers on other machines apart)."""
    if config.writer.lock_dir:
        folder = Path(config.writer.lock_dir).expanduser().resolve()
    elif config.warehouse_is_local:
        folder = config.warehouse_path / "_locks"
    else:
        digest = hashlib.sha256(config.warehouse_uri.encode()).hexdigest()[:16]
        folder = Path.home() / ".cache" / "batch-acker" / "locks" / digest
    return folder / f"{config.qualified_schema}.lock"


@contextmanager
def writer_lock(config: Config, verb: str) -> Iterator[None]:
    """Hold the acker's writer lock for the ``with`` block, or raise if another process has it.

    Re-entrant within one process, so ``demo`` can call ``run`` and ``tick``.
    """
    path = lock_path(config)
    if path in _held:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode(errors="replace").strip() or "unknown"
            raise WriterBusy(
                f"another acker writer holds {path} ({holder}); "
                "wait for it to finish, one writer at a time"
            ) from None
        started = datetime.now(UTC).isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}, {verb}, {started}".encode(), 0)
        _held.add(path)
        try:
            yield
        finally:
            _held.discard(path)
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
