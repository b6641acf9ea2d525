"""When epochs happen: every clock's ticks, and for the clocks that follow time, event_time and
processing_time, the *drain* that applies staged events epoch by epoch, each in the epoch its
time gives.

- ``manual``: an epoch passes when ``acker tick`` says so; a run never ticks.
- ``event_time``: an event's time is its ``event_time``, so a backfill of last week's events
  gives the same outcomes as processing them live. The first drain fixes the scale: the tick
  interval (counted from 1970) that holds its earliest event is the current epoch, 0 on a new
  warehouse; rows without an event time wait in ``held_events`` until then (they are
  quarantined by the slice that takes them).
- ``processing_time``: an event's time is when its row arrived, the commit that appended it to
  ``ack_events`` (the stream reads Delta's change data feed, whose rows carry their commit's
  timestamp), so a scheduled run applies each event in the epoch it arrived in, not in the
  epoch of the run. The scale is the wall clock's, anchored at the latest tick: each tick of
  this clock is dated at the start of its epoch, so ticks never move the grid, and a run ticks
  what the wall clock owes after its drain (:func:`tick_due`).

The stream over ``ack_events`` stages its micro-batches in ``held_events`` (one idempotent
append per stream batch), and the drain then applies what is staged in time order. Where a run
under event_time reads one stream batch and ``held_events`` holds nothing, that batch is drained
as it arrives, from memory, inside the stream's batch (:class:`Arrivals`), and only what the
watermark leaves is staged: the rows are not written to ``held_events``, read back and deleted
again. The drain:

1. the watermark is the latest staged time, minus ``allowed_lateness_s`` under event_time;
2. at the current epoch ``e``, every staged event of epoch ``e`` or earlier is applied as one
   micro-batch of the engine (a *slice*), and leaves ``held_events`` once it has committed;
3. while the watermark lies in a later epoch, the drain ticks, in one pass, to the next epoch
   that holds staged events (or the watermark's, if sooner), and goes back to 2.

Events of later epochs stay staged until the watermark reaches them. An event is on time when
its time is no older than the watermark of the stream batches before it; a later one is applied
in the current epoch, as the manual clock would apply it.

Exactly once: a slice's batch id is at least ``S * 2**20``, where ``S`` is the newest staged
stream batch, and the slice holds exactly the staged rows of stream batches up to ``S`` in
epochs up to its own. So a drain first applies again a slice a crash interrupted (the same
rows under the same id) and removes the rows of the last committed slice if a crash came
between its commit and their removal. A stream batch drained as it arrives is committed by the
stream only after its drain and its staging of what is left: a crash before that has the next
run read it again, with the same rows, of which the drain leaves out those of the epochs its
committed slices applied, or, where what was left is staged already, stage nothing and drain
``held_events`` as usual.
"""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines import engine
from pipelines.config import Config
from pipelines.engine import (
    BatchResult,
    EpochScale,
    PassTooWide,
    Position,
    Progress,
    TickResult,
    position_after,
    position_after_ticks,
    process_batch,
)
from pipelines.errors import CheckpointMismatch, ClockMismatch, StreamBatchTooWide
from pipelines.faults import crash_point
from pipelines.lease import check_lease, dml_fence
from pipelines.sql import compiled_for_events, row_as, run_sql
from pipelines.tables import log_heads, table_property
from pipelines.warehouse_files import table_log, warehouse_files

__all__ = [
    "CHANGE_FEED_COLUMNS",
    "MEDIAN_BUCKETS_PER_SKEW",
    "SLICE_SPAN",
    "STAGED_CLOCKS",
    "Arrivals",
    "Stager",
    "drain",
    "drain_arriving",
    "due_ticks",
    "event_time_started",
    "median_event_time_us",
    "owed_ticks",
    "processing_clock",
    "staged_rows",
    "tick_due",
    "tick_on_clock",
    "wall_clock",
]

STAGED_CLOCKS = ("event_time", "processing_time")
"""The clocks whose stream stages events for a drain."""

SLICE_SPAN = 2**20
"""Batch ids per stream batch: slice ids of stream batch ``S`` lie in ``[S, S + 1) * 2**20``."""

CHANGE_FEED_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")
"""What Delta's change data feed adds to each row of ``ack_events``."""

_ORIGIN_PROPERTY = "batch_acker.event_time_origin_us"

MEDIAN_BUCKETS_PER_SKEW = 1000
"""A stream batch's median event time is read from a histogram of buckets this many to
``max_event_skew_s``: one aggregation whose few rows the driver sums, where Spark's
``percentile_approx`` took 0.55-0.6 s of a 5-minute cycle and 1.6-4.1 s of an hour's stream
batch (the histogram 0.2-0.3 s and 0.4-1.1 s, 29 Nov)."""


class Stager:
    """Stages the stream's micro-batches in ``held_events``: the staged clocks' part of the
    stream. A stream batch staged before is skipped by Delta (idempotent append). Staging does
    not move the acker: ``position`` is where it stands, for the drain after the stream."""

    def __init__(self, config: Config, position: Position) -> None:
        self.config = config
        self.position = position

    def apply(self, batch: DataFrame, batch_id: int) -> None:
        self.stage(staged_rows(batch, batch_id, self.config), batch_id)

    def stage(self, staged: DataFrame, batch_id: int) -> None:
        """Append ``staged`` (:func:`staged_rows` of stream batch ``batch_id``) to
        ``held_events``, once."""
        spark = staged.sparkSession
        # Delta skips the append of a stream batch staged before: a crash's replay of the last
        # one, or an older one from a checkpoint rolled back. Where the log's head shows whether
        # it skipped, only a skipped append is checked (two statements of a new process).
        before = log_heads(self.config, ("held_events",))
        if before is None:
            self._check_not_older(spark, batch_id)
        with compiled_for_events(spark):
            engine.append_idempotent(staged, self.config, "held_events", "stage", batch_id)
        if before is not None and log_heads(self.config, ("held_events",), before) == before:
            self._check_not_older(spark, batch_id)
        crash_point("stage:appended", batch_id)

    def _check_not_older(self, spark: SparkSession, batch_id: int) -> None:
        _check_not_older(self.config, batch_id, _newest_staged(spark, self.config))


def _check_not_older(config: Config, batch_id: int, newest: int) -> None:
    """Refuse stream batch ``batch_id`` if it is older than ``newest``, the newest staged."""
    if batch_id < newest:
        raise CheckpointMismatch(
            f"micro-batch {batch_id} is older than the last staged batch {newest}: the "
            f"checkpoint {config.checkpoint_uri} was rolled back or replaced; its "
            "events would be applied twice"
        )


class Arrivals:
    """The event_time clock's part of a run's stream: each stream batch drained as it arrives
    (:func:`drain_arriving`), its rows kept in memory rather than staged and read back, where
    ``held_events`` holds no row of an earlier stream batch; else staged, as :class:`Stager`
    does, for the drain after the stream. ``position`` is where the acker stands; ``ticks``
    the drains' ticks."""

    def __init__(
        self, config: Config, position: Position, progress: Progress | None, settled: bool
    ) -> None:
        self.config = config
        self.position = position
        self.progress = progress
        self.settled = settled
        self.ticks: list[TickResult] = []
        self.drained = False
        """Whether a stream batch was drained as it arrived."""
        self.staged = False
        """Whether a stream batch was staged for the drain after the stream."""
        self._held = False

    def apply(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        if self._held or not _holds_nothing(spark, self.config):
            with compiled_for_events(spark):
                rows = staged_rows(batch, batch_id, self.config)
            Stager(self.config, self.position).stage(rows, batch_id)
            self._held = self.staged = True
            return
        # Nothing is held: the newest staged stream batch is the newest slice's.
        newest = max(self.position.last_batch_id, self.position.started_batch_id or -1)
        _check_not_older(self.config, batch_id, newest // SLICE_SPAN)
        # Kept before staged_rows takes their median event time from them: the stream batch's
        # files are read once, not once for the median and again to keep the rows.
        with compiled_for_events(spark):
            rows = staged_rows(batch.localCheckpoint(), batch_id, self.config)
        crash_point("stage:kept", batch_id)
        ticks, self.position, self._held = drain_arriving(
            spark, self.config, self.position, self.progress, self.settled, rows, batch_id
        )
        self.ticks += ticks
        self.settled = self.drained = True


def _holds_nothing(spark: SparkSession, config: Config) -> bool:
    """Whether ``held_events`` holds no row: from the checksum file of its newest commit where
    this process reads its log and that file says it holds no file, else by Delta's count."""
    files = warehouse_files(config)
    if files is not None:
        log = table_log(config, "held_events")
        with contextlib.suppress(OSError):
            checksum = files.newest_checksum(log)
            if checksum is not None and checksum.get("numFiles") == 0:
                return True
    return spark.table(config.qualified("held_events")).count() == 0


def staged_rows(batch: DataFrame, batch_id: int, config: Config) -> DataFrame:
    """Stream batch ``batch_id``'s rows as ``held_events`` holds them: with their stream batch,
    under event_time the reason a time must not move the clock, under processing_time when
    each row arrived."""
    if "_change_type" in batch.columns:  # an append-only table's feed holds only inserts
        batch = batch.where(F.col("_change_type") == "insert")
    staged = batch.withColumn("stream_batch_id", F.lit(batch_id).cast("bigint"))
    if config.acker.clock == "event_time":
        staged = staged.withColumn("quarantine_reason", _implausible(batch, config))
        staged = staged.withColumn("arrived_at", F.lit(None).cast("timestamp"))
    else:
        staged = staged.withColumn("quarantine_reason", F.lit(None).cast("string"))
        staged = staged.withColumn("arrived_at", _arrival(batch))
    return staged.drop(*CHANGE_FEED_COLUMNS)


def _implausible(batch: DataFrame, config: Config) -> Column:
    """Why a row of ``batch`` must not move the clock (null for most): an event time more than
    ``max_event_skew_s`` ahead of now (``event_time_in_future``), or that far from the stream
    batch's median event time (``event_time_far_from_batch``: a stray among its neighbours,
    which would otherwise set the first run's origin or drag the watermark)."""
    skew_us = round(config.acker.max_event_skew_s * 1_000_000)
    now_us = _now_us()
    micros = F.unix_micros("event_time")
    median_us = median_event_time_us(batch, max(1, skew_us // MEDIAN_BUCKETS_PER_SKEW))
    reason = F.when(micros > now_us + skew_us, "event_time_in_future")
    if median_us is not None:
        reason = reason.when(F.abs(micros - median_us) > skew_us, "event_time_far_from_batch")
    return reason


def median_event_time_us(batch: DataFrame, width_us: int) -> int | None:
    """The median event time of ``batch``'s rows that have one, in microseconds since 1970, to
    within ``width_us`` / 2: the middle of the ``width_us`` bucket that holds it; ``None``
    without such rows."""
    micros = F.unix_micros("event_time")
    buckets = (
        batch.where(micros.isNotNull())
        .groupBy(F.floor(micros / width_us).alias("bucket"))
        .count()
        .collect()
    )
    half = sum(count for _, count in buckets) / 2
    seen = 0
    for bucket, count in sorted(tuple(row) for row in buckets):
        seen += count
        if seen >= half:
            return int(bucket) * width_us + width_us // 2
    return None


def _arrival(batch: DataFrame) -> Column:
    """When each row of ``batch`` arrived: its commit's timestamp from the change data feed, or,
    for a stream batch read without it (events appended before the feed was enabled), now, as
    the clock would have taken them."""
    if "_commit_timestamp" in batch.columns:
        return F.col("_commit_timestamp")
    return F.current_timestamp()


def _newest_staged(spark: SparkSession, config: Config) -> int:
    """The newest stream batch staged so far (-1 if none): from the rows still held, or from
    the id of the newest slice, whose rows may all be applied."""
    held = spark.table(config.qualified("held_events")).agg(F.max("stream_batch_id")).first()
    logged = spark.table(config.qualified("batches")).agg(F.max("batch_id")).first()
    newest_slice = -1 if logged is None or logged[0] is None else logged[0] // SLICE_SPAN
    return max(-1 if held is None or held[0] is None else held[0], newest_slice)


def _read_scale(spark: SparkSession, config: Config) -> EpochScale | None:
    origin = table_property(spark, config, "held_events", _ORIGIN_PROPERTY)
    return None if origin is None else EpochScale(int(origin), _interval_us(config))


def wall_clock(spark: SparkSession, config: Config) -> tuple[int, EpochScale] | None:
    """The processing_time clock: the current epoch and its time grid, anchored at the latest
    tick (its epoch starts at its ``ticked_at``) or, before the first tick, at the first
    micro-batch's start (epoch 0); ``None`` before either, when no tick is owed yet."""
    interval_us = _interval_us(config)
    latest = (
        spark.table(config.qualified("ticks"))
        .orderBy(F.col("epoch").desc())
        .select("epoch", F.unix_micros("ticked_at").alias("at_us"))
        .first()
    )
    if latest is not None:
        epoch, at_us = int(latest["epoch"]), int(latest["at_us"])
    else:
        batches = spark.table(config.qualified("batches"))
        first = batches.agg(F.min(F.unix_micros("started_at"))).first()
        if first is None or first[0] is None:
            return None
        epoch, at_us = 0, int(first[0])
    return epoch, EpochScale(at_us - epoch * interval_us, interval_us)


def processing_clock(spark: SparkSession, config: Config) -> tuple[int, EpochScale] | None:
    """The processing_time clock's current epoch and grid (:func:`wall_clock`); ``None`` under
    the other clocks, whose ticks no wall clock owes."""
    return wall_clock(spark, config) if config.acker.clock == "processing_time" else None


def owed_ticks(epoch: int, scale: EpochScale, now: datetime | None = None) -> int:
    """How many ticks ``scale``'s grid owes at ``now`` (UTC, naive; the wall clock's now if
    ``None``) to an acker at ``epoch``."""
    moment = now or datetime.now(UTC).replace(tzinfo=None)
    return max(0, scale.epoch_of(round(moment.replace(tzinfo=UTC).timestamp() * 1e6)) - epoch)


def due_ticks(spark: SparkSession, config: Config, now: datetime | None = None) -> int:
    """How many ticks the processing_time clock owes now (``now`` in UTC): one per
    ``tick_interval_s`` since the start of the current epoch; always 0 for the manual clock,
    and for the event_time clock, whose drain ticks as the watermark moves."""
    anchored = processing_clock(spark, config)
    return 0 if anchored is None else owed_ticks(*anchored, now)


def tick_on_clock(
    spark: SparkSession,
    config: Config,
    count: int,
    position: Position,
    progress: Progress | None,
    scale: EpochScale | None,
) -> tuple[list[TickResult], Position]:
    """Tick ``count`` times from ``position`` on the configured clock; return the ticks and
    where the acker then stands. ``scale``, the processing_time clock's grid, dates each tick
    at the start of its epoch, so the grid stays where its latest tick put it."""
    results = engine.tick(spark, config, count, config.acker.clock, scale, position)
    if progress is not None and results:
        progress(results)
    return results, position_after_ticks(position, count)


def tick_due(
    spark: SparkSession, config: Config, position: Position, progress: Progress | None
) -> tuple[list[TickResult], Position]:
    """Tick what the processing_time clock owes now to an acker at ``position``, reading the
    clock once; return the ticks and where the acker then stands."""
    anchored = processing_clock(spark, config)
    if anchored is None:
        return [], position
    return tick_on_clock(spark, config, owed_ticks(*anchored), position, progress, anchored[1])


def _now_us() -> int:
    return round(datetime.now(UTC).timestamp() * 1_000_000)


def event_time_started(spark: SparkSession, config: Config) -> bool:
    """Whether these tables have been run under the event_time clock (its scale is fixed)."""
    return _read_scale(spark, config) is not None


def _interval_us(config: Config) -> int:
    return max(1, round(config.acker.tick_interval_s * 1_000_000))


def _fix_scale(spark: SparkSession, config: Config, earliest_us: int, epoch: int) -> EpochScale:
    """Record the scale, once, on the first drain: the tick interval holding ``earliest_us``
    is the current ``epoch`` (0, unless the warehouse ticked under another clock before)."""
    interval_us = _interval_us(config)
    origin_us = (earliest_us // interval_us - epoch) * interval_us
    check_lease(config)
    run_sql(spark, config, "set_event_time_origin", literals={"origin_us": str(origin_us)})
    return EpochScale(origin_us, interval_us)


def _slice_bounds(scale: EpochScale, slice_id: int, through: int) -> dict[str, Any]:
    """The parameters that pick slice ``slice_id``'s rows, of epochs up to ``through``, for
    both select_held_slice.sql and delete_held_slice.sql."""
    return {
        "stream_batch_id": slice_id // SLICE_SPAN,
        "epoch": through,
        "origin_us": scale.origin_us,
        "interval_us": scale.interval_us,
    }


class _Staged:
    """Where a drain finds the staged rows: ``held_events``, whose applied rows a DELETE
    removes."""

    def __init__(self, spark: SparkSession, config: Config) -> None:
        self.spark = spark
        self.config = config

    @property
    def name(self) -> str:
        """What the statements read as ``:held_events``."""
        return self.config.qualified("held_events")

    def remove(self, bounds: dict[str, Any]) -> None:
        """Remove the rows ``bounds`` name (:func:`_slice_bounds`): a slice's, once applied."""
        with dml_fence(self.spark, self.config):
            run_sql(self.spark, self.config, "delete_held_slice", **bounds).collect()


class _Arriving(_Staged):
    """A stream batch's staged rows (:func:`staged_rows`), kept in memory while a drain applies
    them as they arrive, where ``held_events`` holds no row of an earlier stream batch: a
    slice's rows leave by a filter, not a DELETE, and only what the drain leaves is appended to
    ``held_events`` (:meth:`stage_rest`). Until the stream commits the batch, a crash has it
    read again from ``ack_events``, with the same rows."""

    _views = itertools.count()

    def __init__(
        self, spark: SparkSession, config: Config, rows: DataFrame, stream_batch_id: int
    ) -> None:
        super().__init__(spark, config)
        self.stream_batch_id = stream_batch_id
        self.rows = rows
        self.views: list[str] = []
        self._show(rows)

    @property
    def name(self) -> str:
        return self.views[-1]

    def _show(self, rows: DataFrame) -> None:
        # A view of its own for each state of the rows: a view defined over itself would be
        # recursive.
        view = f"arriving_stream_batch_{self.stream_batch_id}_{next(self._views)}"
        rows.createOrReplaceTempView(view)
        self.rows = rows
        self.views.append(view)

    def remove(self, bounds: dict[str, Any]) -> None:
        self._show(
            run_sql(
                self.spark, self.config, "select_held_remainder", held_events=self.name, **bounds
            )
        )

    def forget_committed(self, scale: EpochScale | None, position: Position) -> None:
        """Leave out the rows a slice of this stream batch applied before a crash stopped the
        run that read it first: the rows of epochs up to the last committed slice's, which
        ``held_events`` would no longer hold."""
        if scale is not None and position.last_batch_id // SLICE_SPAN == self.stream_batch_id:
            _finish_committed_slice(self.spark, self.config, self, scale, position)

    def stage_rest(self, left: _Held) -> bool:
        """Append the rows the drain left (``left``, its summary of them) to ``held_events``,
        once per stream batch; whether there were any."""
        if left.rows == 0:
            return False
        with compiled_for_events(self.spark):
            engine.append_idempotent(
                self.rows, self.config, "held_events", "stage", self.stream_batch_id
            )
        crash_point("stage:appended", self.stream_batch_id)
        return True

    def close(self) -> None:
        for view in self.views:
            self.spark.catalog.dropTempView(view)


def _apply_slice(
    spark: SparkSession,
    config: Config,
    staged: _Staged,
    scale: EpochScale,
    position: Position,
    slice_id: int,
    through: int,
) -> BatchResult | None:
    """Apply the staged events of stream batches up to ``slice_id // SLICE_SPAN`` in epochs up
    to ``through`` (each in its own epoch, those of earlier epochs in the current one) as
    micro-batch ``slice_id``; then remove them from ``staged``. The caller knows there are
    some (epochs without events need no micro-batch). ``None`` if the slice was committed with
    the same rows. Raises :class:`PassTooWide` as ``process_batch`` does, having changed
    nothing."""
    bounds = _slice_bounds(scale, slice_id, through)
    events = run_sql(
        spark,
        config,
        "select_held_slice",
        held_events=staged.name,
        first_epoch=position.epoch,
        **bounds,
    )
    result = process_batch(spark, config, events, slice_id, position, through)
    staged.remove(bounds)
    return result


def _finish_committed_slice(
    spark: SparkSession, config: Config, staged: _Staged, scale: EpochScale, position: Position
) -> int:
    """Remove the rows of the last committed slice, if a crash left them staged; return the
    epoch its ticks must reach (a pass's last epoch, whose ticks a crash may have stopped)."""
    if position.last_batch_id < SLICE_SPAN:
        return position.epoch
    logged = engine.committed_batch(spark, config, position.last_batch_id)
    assert logged is not None  # read_position found it committed
    through = logged.epoch if logged.through_epoch is None else logged.through_epoch
    staged.remove(_slice_bounds(scale, position.last_batch_id, through))
    return max(position.epoch, through)


def drain(
    spark: SparkSession,
    config: Config,
    position: Position,
    progress: Progress | None = None,
    settled: bool = False,
) -> tuple[list[TickResult], Position]:
    """Apply the staged events the watermark allows to an acker at ``position``, in passes over
    as many epochs as ``acker.max_epochs_per_pass`` lets, each followed by the ticks to its last
    epoch; return the ticks and where the acker then stands. Where the capacity guard could fire
    in an epoch of a pass (:class:`PassTooWide`), the epochs before it are a pass and that epoch
    one of its own, where the guard applies exactly. ``settled``: the last drain ended (the run
    record says so, or this process ran it), so no applied row is left staged and no pass's
    ticks are missing. The caller holds the writer lock."""
    _check_started_slice(config, position)
    ticks, position, _ = _Drain(spark, config, position, progress, _Staged(spark, config)).run(
        settled
    )
    return ticks, position


def _check_started_slice(config: Config, position: Position) -> None:
    """Refuse to drain where a micro-batch another clock started is unfinished."""
    started = position.started_batch_id
    if started is not None and started < SLICE_SPAN:
        raise ClockMismatch(
            f"micro-batch {started} was interrupted under another clock: run `acker run` "
            f"with that clock to finish it before changing acker.clock to {config.acker.clock!r}"
        )


def drain_arriving(
    spark: SparkSession,
    config: Config,
    position: Position,
    progress: Progress | None,
    settled: bool,
    rows: DataFrame,
    stream_batch_id: int,
) -> tuple[list[TickResult], Position, bool]:
    """:func:`drain` over stream batch ``stream_batch_id``'s staged rows (:func:`staged_rows`,
    checkpointed), kept in memory, where ``held_events`` holds no row of an earlier stream
    batch; the rows the watermark does not yet allow are then staged in ``held_events``. Return
    the ticks, where the acker then stands, and whether any rows were staged."""
    _check_started_slice(config, position)
    arriving = _Arriving(spark, config, rows, stream_batch_id)
    try:
        draining = _Drain(spark, config, position, progress, arriving)
        arriving.forget_committed(draining.scale, position)
        ticks, position, left = draining.run(settled)
        return ticks, position, arriving.stage_rest(left)
    finally:
        arriving.close()


@dataclass(frozen=True)
class _HeldEpoch:
    """summarize_held_events.sql: the staged rows of one epoch of their times (``None``: rows
    without a time, which every slice takes)."""

    epoch: int | None
    rows: int
    newest: int
    """The newest stream batch among them."""
    earliest_us: int | None
    latest_us: int | None
    """Their earliest and latest time, in microseconds since 1970 (``None`` without a time)."""


@dataclass(frozen=True)
class _Held:
    """What ``held_events`` holds: the rows every slice takes, and per epoch of the others'
    times their count and earliest and latest time."""

    untimed: int
    timed: tuple[_HeldEpoch, ...]
    newest: int
    """The newest stream batch staged (-1 if none)."""

    @classmethod
    def of(cls, epochs: list[_HeldEpoch]) -> _Held:
        """From summarize_held_events.sql's rows."""
        return cls(
            untimed=sum(held.rows for held in epochs if held.epoch is None),
            timed=tuple(held for held in epochs if held.epoch is not None),
            newest=max((held.newest for held in epochs), default=-1),
        )

    @property
    def rows(self) -> int:
        return self.untimed + sum(held.rows for held in self.timed)

    @property
    def earliest_us(self) -> int | None:
        """The earliest time that may move the clock; ``None`` if no row has one."""
        times = (held.earliest_us for held in self.timed)
        return min((us for us in times if us is not None), default=None)

    @property
    def latest_us(self) -> int | None:
        times = (held.latest_us for held in self.timed)
        return max((us for us in times if us is not None), default=None)

    def in_slice(self, scale: EpochScale, through: int) -> bool:
        """Whether a slice of epochs up to ``through`` takes any row."""
        return self.untimed > 0 or any(
            scale.epoch_of(held.earliest_us) <= through
            for held in self.timed
            if held.earliest_us is not None
        )

    def after(self, scale: EpochScale, through: int) -> _Held:
        """What a slice of epochs up to ``through`` over every staged stream batch leaves."""
        later = tuple(
            held
            for held in self.timed
            if held.earliest_us is not None and scale.epoch_of(held.earliest_us) > through
        )
        return _Held(untimed=0, timed=later, newest=self.newest)


class _Drain:
    """One drain: where the acker stands and the ticks made so far, moved forward by each slice
    it applies and each tick pass."""

    def __init__(
        self,
        spark: SparkSession,
        config: Config,
        position: Position,
        progress: Progress | None,
        staged: _Staged,
    ) -> None:
        self.spark = spark
        self.config = config
        self.position = position
        self.progress = progress
        self.staged = staged
        self.ticks: list[TickResult] = []
        self.lateness_us = 0
        self.scale: EpochScale | None
        self.grid: EpochScale | None = None
        if config.acker.clock == "event_time":
            self.scale = _read_scale(spark, config)
            self.lateness_us = round(config.acker.allowed_lateness_s * 1_000_000)
        else:  # arrivals come in commit order: none is late
            anchored = wall_clock(spark, config)
            interval_us = _interval_us(config)
            self.scale = (
                anchored[1]
                if anchored is not None
                else EpochScale(_now_us() - position.epoch * interval_us, interval_us)
            )
            self.grid = self.scale

    def run(self, settled: bool) -> tuple[list[TickResult], Position, _Held]:
        """The ticks, where the acker then stands, and what is left staged."""
        started = self.position.started_batch_id
        # What a crash may have left of the last slice (none before the scale is fixed): its
        # rows, its pass's ticks.
        if self.scale is not None and started is None and not settled:
            self.tick_to(
                _finish_committed_slice(
                    self.spark, self.config, self.staged, self.scale, self.position
                )
            )
        crowded_limit: int | None = None
        held = self.held(started)
        while True:
            if held.rows == 0:
                break
            if self.scale is None:
                if held.earliest_us is None:
                    break  # no row that may move the clock yet: the others wait for one
                self.scale = _fix_scale(
                    self.spark, self.config, held.earliest_us, self.position.epoch
                )
            epoch = self.position.epoch
            latest_us = held.latest_us
            watermark_epoch = (
                epoch if latest_us is None else self.scale.epoch_of(latest_us - self.lateness_us)
            )
            slice_id = (
                started
                if started is not None
                else max(self.position.last_batch_id + 1, held.newest * SLICE_SPAN)
            )
            if slice_id // SLICE_SPAN != held.newest:
                raise StreamBatchTooWide(
                    f"stream batch {held.newest} spans more than {SLICE_SPAN} epochs: raise "
                    "acker.tick_interval_s or lower acker.max_files_per_batch"
                )
            width = self.config.acker.max_epochs_per_pass
            through = max(epoch, min(watermark_epoch, epoch + width - 1))
            if crowded_limit is not None:
                through = min(through, crowded_limit)
            try:
                result = (
                    _apply_slice(
                        self.spark,
                        self.config,
                        self.staged,
                        self.scale,
                        self.position,
                        slice_id,
                        through,
                    )
                    if held.in_slice(self.scale, through)
                    else None
                )
            except PassTooWide as crowded:
                # The epochs before the crowded one as a pass, then that epoch on its own, where
                # the capacity guard is exact; the passes after it are as wide as before.
                crowded_limit = max(epoch, crowded.crowded_epoch - 1)
                continue
            crowded_limit = None
            if result is not None:
                self.heard(result)
                self.position = position_after(result)
            if started is not None:  # then on to the stream batches staged after it
                started = None
                self.tick_to(through)
                held = self.held(started)
                continue
            # What the pass left staged: the next pass's rows, and the epoch its ticks reach.
            held = held.after(self.scale, through)
            if self.position.epoch >= watermark_epoch:
                break
            self.tick_to(max(self.next_epoch(held.earliest_us, watermark_epoch), through))
        return self.ticks, self.position, held

    def held(self, started: int | None) -> _Held:
        """What ``held_events`` holds, by epoch; up to the interrupted slice's stream batch, if
        ``started``, which is applied again first, over the same rows."""
        # Before the scale is fixed its origin is unknown, but a whole number of intervals
        # (_fix_scale): epochs counted from 1970 group the rows as the scale's will.
        origin_us = 0 if self.scale is None else self.scale.origin_us
        with compiled_for_events(self.spark):
            rows = run_sql(
                self.spark,
                self.config,
                "summarize_held_events",
                held_events=self.staged.name,
                stream_batch_id=None if started is None else started // SLICE_SPAN,
                origin_us=origin_us,
                interval_us=_interval_us(self.config),
            ).collect()
        step = "summarize_held_events.sql"
        return _Held.of([row_as(row.asDict(), _HeldEpoch, step) for row in rows])

    def next_epoch(self, next_us: int | None, watermark_epoch: int) -> int:
        """The next epoch that holds staged events (the earliest at ``next_us``), or the
        watermark's, if sooner: the epochs between have no micro-batch, and their ticks are one
        pass."""
        assert self.scale is not None  # a slice was applied on it
        if next_us is None:
            return watermark_epoch
        return min(watermark_epoch, max(self.position.epoch + 1, self.scale.epoch_of(next_us)))

    def tick_to(self, target: int) -> None:
        if target <= self.position.epoch:
            return
        count = target - self.position.epoch
        ticked, self.position = tick_on_clock(
            self.spark, self.config, count, self.position, self.progress, self.grid
        )
        self.ticks.extend(ticked)

    def heard(self, result: BatchResult) -> None:
        if self.progress is not None:
            self.progress(result)
