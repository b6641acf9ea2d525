"""Fault injection for the crash tests: the process kills itself at a named step.

Set ``ACKER_CRASH_AT=step`` (or ``step@id`` to pick one batch id or tick epoch) and the
process dies with SIGKILL on reaching that step, as a power cut would stop it: no cleanup,
no ``finally`` blocks, no Spark shutdown. The steps are listed in :data:`CRASH_POINTS`.
Set ``ACKER_PAUSE_AT=step@id`` instead and the process stops its process group with SIGSTOP
there, as a machine paused or cut off would stop, until the test sends SIGCONT.
Set ``ACKER_CRASH_LOG=file`` and each step reached is appended to that file as ``step@id``,
so an uninterrupted run shows the tests every step they can crash at. Both unset (always,
outside the tests) it does nothing.
"""

from __future__ import annotations

import os
import signal

__all__ = ["CRASH_ENV", "CRASH_LOG_ENV", "CRASH_POINTS", "PAUSE_ENV", "crash_point"]

CRASH_ENV = "ACKER_CRASH_AT"
PAUSE_ENV = "ACKER_PAUSE_AT"
CRASH_LOG_ENV = "ACKER_CRASH_LOG"

CRASH_POINTS = (
    "ingest:ack_events",
    "stage:kept",
    "stage:appended",
    "batch:aggregated",
    "batch:completed",
    "batch:failed",
    "batch:late_events",
    "batch:quarantine",
    "batch:merged",
    "batch:committed",
    "tick:expired",
    "tick:deleted",
    "tick:committed",
)


def _names(wanted: str | None, step: str, ident: int) -> bool:
    """Whether ``wanted`` (``step`` or ``step@id``) names this step."""
    if not wanted:
        return False
    name, _, at = wanted.partition("@")
    return name == step and (not at or int(at) == ident)


def crash_point(step: str, ident: int) -> None:
    """Die here if ``ACKER_CRASH_AT`` names this step (and this batch id or epoch; for
    ``stage:`` steps, the stream's batch id; for ``ingest:`` steps, the file's number from 1),
    or stop if ``ACKER_PAUSE_AT`` does; note it in ``ACKER_CRASH_LOG``'s file, if set."""
    log = os.environ.get(CRASH_LOG_ENV)
    if log:
        with open(log, "a", encoding="utf-8") as reached:
            reached.write(f"{step}@{ident}\n")
    if _names(os.environ.get(PAUSE_ENV), step, ident):
        os.killpg(os.getpgrp(), signal.SIGSTOP)
    if not _names(os.environ.get(CRASH_ENV), step, ident):
        return
    # A process started as a session leader takes its JVM down with it, as a crash would.
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
