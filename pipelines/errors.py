"""The refusals a job raises when it cannot go on, one class per kind, so that a caller (a
scheduler's task, a notebook) catches what it can act on by class: for example retry later on
:class:`WriterBusy`, page someone on :class:`CheckpointMismatch`. Each message is one line
that says why and what to run."""

from __future__ import annotations

__all__ = [
    "REFUSALS",
    "AckerError",
    "CheckpointMismatch",
    "ClockMismatch",
    "InterruptedWork",
    "NotInitialised",
    "ReplayConflict",
    "StreamBatchTooWide",
    "StreamFailed",
    "UnreadableInput",
    "UnsupportedSession",
    "WriterBusy",
    "WriterFenced",
]


class AckerError(RuntimeError):
    """A job cannot go on; the message says why in one line. Every refusal is one of these."""


class WriterBusy(AckerError):
    """Another process holds the writer lock or lease: try again once it has finished."""


class WriterFenced(AckerError):
    """This writer lost its lease (it stopped renewing it, and another writer may have taken
    over): it writes nothing more. Run again."""


class NotInitialised(AckerError):
    """The warehouse has no acker tables, or tables an older acker made that lack a column this
    one reads: run ``acker init``."""


class InterruptedWork(AckerError):
    """A micro-batch or tick was interrupted, and must be finished before other work."""


class CheckpointMismatch(AckerError):
    """The stream's checkpoint does not belong to these tables (rolled back, replaced, or
    another warehouse's): applying its batches would apply events twice or skip them."""


class ReplayConflict(AckerError):
    """A committed micro-batch came back with other content after a tick had followed it."""


class ClockMismatch(AckerError):
    """The configured clock cannot follow what the tables were run under."""


class StreamBatchTooWide(AckerError):
    """One stream batch spans more epochs than its slices can number."""


class UnsupportedSession(AckerError):
    """The Spark session cannot run this job (continuous mode over Spark Connect)."""


class StreamFailed(AckerError):
    """The stream over ``ack_events`` failed for a reason of Spark's own."""


class UnreadableInput(AckerError):
    """An input path or format that ``acker ingest`` cannot read."""


REFUSALS: dict[str, type[AckerError]] = {
    cls.__name__: cls
    for cls in (
        AckerError,
        WriterBusy,
        WriterFenced,
        NotInitialised,
        InterruptedWork,
        CheckpointMismatch,
        ReplayConflict,
        ClockMismatch,
        StreamBatchTooWide,
        UnsupportedSession,
        StreamFailed,
        UnreadableInput,
    )
}
"""Every refusal class by name: a refusal raised on a Spark Connect server reaches the client
as text only, and is raised again there as its own class."""
