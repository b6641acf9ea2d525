"""Fault injection for the crash tests: the process kills itself at a named step.

Set ``ACKER_CRASH_AT=step`` (or ``step@id`` to pick one batch id or tick epoch) and the
process dies with SIGKILL on reaching that step, as a power cut would stop it: no cleanup,
no ``finally`` blocks, no Spark shutdown. The steps are listed in :data:`CRASH_POINTS`.
Set ``ACKER_CRASH_LOG=file`` and each step reached is appended to that file as ``step@id``,
so an uninterrupted run shows the tests every step they can crash at. Both unset (always,
outside the tests) it does nothing.
"""

from __future__ import annotations

import os
import signal

__all__ = ["CRASH_ENV", "CRASH_LOG_ENV", "CRASH_POINTS", "crash_point"]

CRASH_ENV = "ACKER_CRASH_AT"
CRASH_LOG_ENV = "ACKER_CRASH_LOG"

CRASH_POINTS = (
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


def crash_point(step: str, ident: int) -> None:
    """Die here if ``ACKER_CRASH_AT`` names this step (and this batch id or epoch; for
    ``stage:`` steps, the stream's batch id); note it in ``ACKER_CRASH_LOG``'s file, if set."""
    log = os.environ.get(CRASH_LOG_ENV)
    if log:
        with open(log, "a", encoding="utf-8") as reached:
            reached.write(f"{step}@{ident}\n")
    wanted = os.environ.get(CRASH_ENV)
    if not wanted:
        return
    name, _, at = wanted.partition("@")
    if name != step or (at and int(at) != ident):
        return
    # A process started as a session leader takes its JVM down with it, as a crash would.
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
