"""An independent, deliberately simple model of the acker's semantics (SPEC items 1-8).

Plain dicts, one event at a time, resolution at the end of each micro-batch. It shares no code
with the pipeline: the differential tests compare the pipeline's tables with what this produces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pipelines.workload import Event

CHECKSUM_TYPES = ("init", "ack", "anchor")
KNOWN_TYPES = ("init", "ack", "anchor", "fail", "reset")
_MS = timedelta(milliseconds=1)


@dataclass
class Entry:
    checksum: int = 0
    has_init: bool = False
    failed: bool = False
    spout_task: int | None = None
    source_msg_id: str | None = None
    init_time: datetime | None = None
    first_time: datetime | None = None
    last_time: datetime | None = None
    event_count: int = 0
    epoch: int = 0
    applied: set[tuple[str, int]] = field(default_factory=set)
    events: list[Event] = field(default_factory=list)


@dataclass(frozen=True)
class Outcome:
    anchor_id: int
    spout_task: int | None
    source_msg_id: str | None
    reason: str
    init_time: datetime | None
    first_event_time: datetime | None
    last_event_time: datetime | None
    latency_ms: int | None
    event_count: int
    batch_id: int
    epoch: int


def _init_order(e: Event) -> tuple[Any, ...]:
    """Which of a batch's inits of one tree gives it its spout task and message id: the latest,
    then the greatest message id (by its UTF-8 bytes), then spout task, a null below any
    value."""
    msg = e.source_msg_id
    task = e.spout_task
    return (e.event_time, msg is not None, (msg or "").encode(), task is not None, task or 0)


def _xor64(a: int, b: int) -> int:
    value = (a ^ b) & ((1 << 64) - 1)
    return value - (1 << 64) if value >= 1 << 63 else value


def quarantine_reason(e: Event) -> str | None:
    if e.anchor_id is None:
        return "null_anchor_id"
    if e.anchor_id == 0:
        return "zero_anchor_id"
    if e.event_type not in KNOWN_TYPES:
        return "unknown_event_type"
    if e.event_type in CHECKSUM_TYPES and e.xor_value is None:
        return "null_xor_value"
    if e.event_type in ("ack", "anchor") and e.xor_value == 0:
        return "zero_xor_value"
    if e.event_type == "init" and e.spout_task is None:
        return "init_without_spout_task"
    if e.event_time is None:
        return "null_event_time"
    return None


class AckerModel:
    """Feed it batches and ticks; read ``completed``, ``failed``, ``expired``, ``pending``."""

    def __init__(
        self,
        buckets: int = 3,
        refresh: str = "reset",
        protocol: str = "storm",
        max_pending: int = 10_000_000,
    ) -> None:
        self.buckets = buckets
        self.refresh = refresh
        self.protocol = protocol
        self.max_pending = max_pending
        self.epoch = 0
        self.last_batch_id = -1
        self.pending: dict[int, Entry] = {}
        self.outcomes: dict[str, list[Outcome]] = {"completed": [], "failed": [], "expired": []}
        # anchor -> (outcome, reason, batch_id, epoch) of its latest resolution
        self.resolved: dict[int, tuple[str, str, int, int]] = {}
        self.late: list[tuple[Event, str]] = []
        self.quarantined: list[tuple[Event, str]] = []
        self.duplicates = 0
        self.most_pending = 0  # the most trees pending at the end of any micro-batch
        # one row per tick: (epoch, expired_timeout, expired_no_init, late_no_init)
        self.ticks: list[tuple[int, int, int, int]] = []

    def _outcome(self, anchor: int, e: Entry, reason: str, batch_id: int) -> Outcome:
        latency = None
        if e.first_time is not None and e.last_time is not None:
            latency = (e.last_time - e.first_time) // _MS
        return Outcome(
            anchor,
            e.spout_task,
            e.source_msg_id,
            reason,
            e.init_time,
            e.first_time,
            e.last_time,
            latency,
            e.event_count,
            batch_id,
            self.epoch,
        )

    def _resolve(self, kind: str, outcome: Outcome) -> None:
        self.outcomes[kind].append(outcome)
        self.resolved[outcome.anchor_id] = (kind, outcome.reason, outcome.batch_id, self.epoch)
        del self.pending[outcome.anchor_id]

    def _balanced(self, entry: Entry) -> bool:
        """FsShelter's Track carries 0: its tree completes only once an Ok brings it back to 0."""
        return self.protocol == "storm" or entry.applied != {("init", 0)}

    def _is_late(self, anchor: int, batch_id: int) -> tuple[str, str] | None:
        """An anchor gets one outcome: every later event of it is late, however much later."""
        if anchor in self.pending or anchor not in self.resolved:
            return None
        kind, reason, resolved_batch, _ = self.resolved[anchor]
        return (kind, reason) if resolved_batch < batch_id else None

    def batch(self, batch_id: int, events: list[Event]) -> None:
        live_at_start = set(self.pending)
        late_anchors = {}
        for e in events:
            if quarantine_reason(e) is None and e.anchor_id not in late_anchors:
                late = self._is_late(e.anchor_id, batch_id)  # type: ignore[arg-type]
                if late is not None:
                    late_anchors[e.anchor_id] = late
        touched: dict[int, Entry] = {}
        seen_in_batch: set[tuple[int, str, int | None]] = set()
        new_anchors: set[int] = set()
        # a later batch's init overrides an earlier one's; within a batch, the latest copy
        latest_init: dict[int, tuple[Any, ...]] = {}

        def take_init(anchor: int, entry: Entry, e: Event) -> None:
            order = _init_order(e)
            if anchor not in latest_init or order > latest_init[anchor]:
                latest_init[anchor] = order
                entry.spout_task = e.spout_task
                entry.source_msg_id = e.source_msg_id

        for e in events:
            reason = quarantine_reason(e)
            if reason is not None:
                self.quarantined.append((e, reason))
                continue
            anchor = e.anchor_id
            assert anchor is not None and e.event_type is not None and e.event_time is not None
            if anchor in late_anchors:
                self.late.append((e, late_anchors[anchor][0]))
                continue
            value = e.xor_value if e.event_type in CHECKSUM_TYPES else None
            if anchor not in self.pending:
                self.pending[anchor] = Entry(epoch=self.epoch)
                new_anchors.add(anchor)
            entry = self.pending[anchor]
            entry.events.append(e)
            touched[anchor] = entry
            key = (anchor, e.event_type, value)
            # fail and reset carry no value: every one is applied, none is a re-delivery
            if value is not None and key in seen_in_batch:
                self.duplicates += 1
                if e.event_type == "init":
                    take_init(anchor, entry, e)
                entry.first_time = min(entry.first_time or e.event_time, e.event_time)
                entry.last_time = max(entry.last_time or e.event_time, e.event_time)
                continue
            if value is not None and (e.event_type, value) in entry.applied:
                self.duplicates += 1
                continue
            seen_in_batch.add(key)
            entry.event_count += 1
            entry.first_time = min(entry.first_time or e.event_time, e.event_time)
            entry.last_time = max(entry.last_time or e.event_time, e.event_time)
            if value is not None:
                entry.applied.add((e.event_type, value))
                entry.checksum = _xor64(entry.checksum, value)
            if e.event_type == "init":
                entry.has_init = True
                take_init(anchor, entry, e)
                entry.init_time = min(entry.init_time or e.event_time, e.event_time)
            elif e.event_type == "fail":
                entry.failed = True
            if e.event_type in ("reset", "fail") or self.refresh == "activity":
                entry.epoch = self.epoch
        resolutions = []
        for anchor, entry in touched.items():
            if entry.has_init and entry.failed:
                resolutions.append(("failed", self._outcome(anchor, entry, "fail", batch_id)))
            elif entry.has_init and entry.checksum == 0 and self._balanced(entry):
                resolutions.append(("completed", self._outcome(anchor, entry, "acked", batch_id)))
        resolved_ids = {o.anchor_id for _, o in resolutions}
        removed = len(resolved_ids & live_at_start)
        candidates = sorted(
            (a for a in new_anchors if a not in resolved_ids and self.pending[a].has_init),
            key=lambda a: (self.pending[a].first_time, a),
            reverse=True,
        )
        waiting = len(new_anchors - resolved_ids) - len(candidates)  # no init: never failed
        excess = len(live_at_start) - removed + waiting + len(candidates) - self.max_pending
        for anchor in candidates[: max(0, excess)]:
            entry = self.pending[anchor]
            resolutions.append(("failed", self._outcome(anchor, entry, "overflow", batch_id)))
        for kind, outcome in resolutions:
            self._resolve(kind, outcome)
        self.most_pending = max(self.most_pending, len(self.pending))
        self.last_batch_id = batch_id

    def tick(self, count: int = 1) -> None:
        for _ in range(count):
            self.epoch += 1
            expired = {"timeout": 0, "no_init": 0}
            for anchor, entry in list(self.pending.items()):
                if entry.epoch + self.buckets > self.epoch:
                    continue
                reason = "timeout" if entry.has_init else "no_init"
                expired[reason] += 1
                self._resolve("expired", self._outcome(anchor, entry, reason, self.last_batch_id))
            # no entry is ever opened for an anchor with an outcome: none is late at a tick
            self.ticks.append((self.epoch, expired["timeout"], expired["no_init"], 0))


class EventTimeModel:
    """The event_time clock over :class:`AckerModel`: each run adds a stream batch to what is
    held, and applies held events epoch by epoch up to the watermark (the latest held event
    time less the allowed lateness), each in its own epoch, or in the current epoch if that
    is already later; a tick between epochs, straight to the next epoch holding events."""

    def __init__(self, interval_s: float, allowed_lateness_s: float, **semantics: object) -> None:
        self.acker = AckerModel(**semantics)  # type: ignore[arg-type]
        self.interval_us = round(interval_s * 1_000_000)
        self.lateness_us = round(allowed_lateness_s * 1_000_000)
        self.origin_us: int | None = None
        self.held: list[Event] = []
        self.batches = 0

    def _epoch_of(self, micros: int) -> int:
        assert self.origin_us is not None
        return (micros - self.origin_us) // self.interval_us

    def run(self, events: list[Event]) -> None:
        self.held += events
        while self.held:
            times = [_micros(e.event_time) for e in self.held if e.event_time is not None]
            if self.origin_us is None:
                if not times:
                    return
                self.origin_us = (min(times) // self.interval_us) * self.interval_us
            current = self.acker.epoch
            watermark = self._epoch_of(max(times) - self.lateness_us) if times else current
            due = [
                e
                for e in self.held
                if e.event_time is None or self._epoch_of(_micros(e.event_time)) <= current
            ]
            applied = {id(e) for e in due}
            self.held = [e for e in self.held if id(e) not in applied]
            if due:
                self.acker.batch(self.batches, due)
                self.batches += 1
            if current >= watermark:
                return
            later = [self._epoch_of(_micros(e.event_time)) for e in self.held if e.event_time]
            target = min(watermark, max(current + 1, min(later))) if later else watermark
            self.acker.tick(target - current)


def _micros(moment: datetime) -> int:
    return (moment - datetime(1970, 1, 1)) // timedelta(microseconds=1)
