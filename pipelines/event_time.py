"""The event_time clock: the epoch follows the watermark of ``event_time``, so a backfill of
last week's events gives the same outcomes as processing them live.

Under this clock the stream over ``ack_events`` only stages its micro-batches in
``held_events`` (one idempotent append per stream batch). A *drain* then applies what is staged
in event-time order, epoch by epoch:

1. the watermark is the latest staged ``event_time`` minus ``allowed_lateness_s``;
2. at the current epoch ``e``, every staged event of epoch ``e`` or earlier is applied as one
   micro-batch of the engine (a *slice*), and leaves ``held_events`` once it has committed;
3. while the watermark lies in a later epoch, the drain ticks, in one pass, to the next epoch
   that holds staged events (or the watermark's, if sooner), and goes back to 2.

Events of later epochs stay staged until the watermark reaches them. The first drain fixes
the scale: the tick interval (counted from 1970) that holds its earliest event is the current
epoch, 0 on a new warehouse; rows without an event time wait in ``held_events`` until then
(they are quarantined by the slice that takes them). An event is on time when its
``event_time`` is no older than the watermark of the stream batches before it; a later one is
applied in the current epoch, as the other clocks would apply it.

Exactly once: a slice's batch id is at least ``S * 2**20``, where ``S`` is the newest staged
stream batch, and the slice holds exactly the staged rows of stream batches up to ``S`` in
epochs up to its own. So a drain first applies again a slice a crash interrupted (the same
rows under the same id) and removes the rows of the last committed slice if a crash came
between its commit and their removal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines import engine
from pipelines.config import Config
from pipelines.engine import BatchResult, Position, TickResult, position_after, process_batch
from pipelines.errors import CheckpointMismatch, ClockMismatch, StreamBatchTooWide
from pipelines.faults import crash_point
from pipelines.sql import quoted_table, run_sql

__all__ = ["SLICE_SPAN", "EventTimeStager", "drain", "event_time_started"]

SLICE_SPAN = 2**20
"""Batch ids per stream batch: slice ids of stream batch ``S`` lie in ``[S, S + 1) * 2**20``."""

_ORIGIN_PROPERTY = "batch_acker.event_time_origin_us"


@dataclass(frozen=True)
class _EpochScale:
    """Where epoch 0 starts and how long an epoch lasts, in microseconds since 1970."""

    origin_us: int
    interval_us: int

    def epoch_of(self, micros: int) -> int:
        return (micros - self.origin_us) // self.interval_us


class EventTimeStager:
    """Stages the stream's micro-batches in ``held_events``: the event_time clock's part of
    the stream. A stream batch staged before is skipped by Delta (idempotent append)."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def apply(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        newest = _newest_staged(spark, self.config)
        if batch_id < newest:
            raise CheckpointMismatch(
                f"micro-batch {batch_id} is older than the last staged batch {newest}: the "
                f"checkpoint {self.config.checkpoint_path} was rolled back or replaced; its "
                "events would be applied twice"
            )
        staged = batch.withColumn("stream_batch_id", F.lit(batch_id).cast("bigint"))
        staged = staged.withColumn("quarantine_reason", _implausible(batch, self.config))
        engine.append_idempotent(staged, self.config, "held_events", "stage", batch_id)
        crash_point("stage:appended", batch_id)


def _implausible(batch: DataFrame, config: Config) -> Column:
    """Why a row of ``batch`` must not move the clock (null for most): an event time more than
    ``max_event_skew_s`` ahead of now (``event_time_in_future``), or that far from the stream
    batch's median event time (``event_time_far_from_batch``: a stray among its neighbours,
    which would otherwise set the first run's origin or drag the watermark)."""
    skew_us = round(config.acker.max_event_skew_s * 1_000_000)
    now_us = round(datetime.now(UTC).timestamp() * 1_000_000)
    micros = F.unix_micros("event_time")
    middle = batch.agg(F.percentile_approx(micros, 0.5)).first()
    median_us = None if middle is None else middle[0]
    reason = F.when(micros > now_us + skew_us, "event_time_in_future")
    if median_us is not None:
        reason = reason.when(F.abs(micros - median_us) > skew_us, "event_time_far_from_batch")
    return reason


def _newest_staged(spark: SparkSession, config: Config) -> int:
    """The newest stream batch staged so far (-1 if none): from the rows still held, or from
    the id of the newest slice, whose rows may all be applied."""
    held = spark.table(config.qualified("held_events")).agg(F.max("stream_batch_id")).first()
    logged = spark.table(config.qualified("batches")).agg(F.max("batch_id")).first()
    newest_slice = -1 if logged is None or logged[0] is None else logged[0] // SLICE_SPAN
    return max(-1 if held is None or held[0] is None else held[0], newest_slice)


def _plausible_micros() -> Column:
    """A held row's event time in microseconds since 1970, null if the stager marked the row
    for quarantine: such a row never moves the clock."""
    return F.when(F.col("quarantine_reason").isNull(), F.unix_micros("event_time"))


def _earliest_us(held: DataFrame) -> int | None:
    """The earliest event time in ``held`` that may move the clock, in microseconds since 1970
    (``None`` if none)."""
    row = held.agg(F.min(_plausible_micros())).first()
    return None if row is None else row[0]


def _read_scale(spark: SparkSession, config: Config) -> _EpochScale | None:
    properties = spark.sql(f"show tblproperties {quoted_table(config, 'held_events')}")
    origin = [row["value"] for row in properties.collect() if row["key"] == _ORIGIN_PROPERTY]
    return None if not origin else _EpochScale(int(origin[0]), _interval_us(config))


def event_time_started(spark: SparkSession, config: Config) -> bool:
    """Whether these tables have been run under the event_time clock (its scale is fixed)."""
    return _read_scale(spark, config) is not None


def _interval_us(config: Config) -> int:
    return max(1, round(config.acker.tick_interval_s * 1_000_000))


def _fix_scale(spark: SparkSession, config: Config, earliest_us: int, epoch: int) -> _EpochScale:
    """Record the scale, once, on the first drain: the tick interval holding ``earliest_us``
    is the current ``epoch`` (0, unless the warehouse ticked under another clock before)."""
    interval_us = _interval_us(config)
    origin_us = (earliest_us // interval_us - epoch) * interval_us
    run_sql(spark, config, "set_event_time_origin", literals={"origin_us": str(origin_us)})
    return _EpochScale(origin_us, interval_us)


def _slice_bounds(scale: _EpochScale, slice_id: int, epoch: int) -> dict[str, Any]:
    """The parameters that pick slice ``slice_id``'s rows in epoch ``epoch``, for both
    select_held_slice.sql and delete_held_slice.sql."""
    return {
        "stream_batch_id": slice_id // SLICE_SPAN,
        "epoch": epoch,
        "origin_us": scale.origin_us,
        "interval_us": scale.interval_us,
    }


def _apply_slice(
    spark: SparkSession,
    config: Config,
    scale: _EpochScale,
    position: Position,
    slice_id: int,
) -> BatchResult | None:
    """Apply the staged events of stream batches up to ``slice_id // SLICE_SPAN`` in epochs up
    to the current one, as micro-batch ``slice_id``; then remove them from ``held_events``.
    ``None`` if there are none (an epoch without events needs no micro-batch)."""
    bounds = _slice_bounds(scale, slice_id, position.epoch)
    events = run_sql(spark, config, "select_held_slice", **bounds)
    if events.isEmpty():
        return None
    result = process_batch(spark, config, events, slice_id, position)
    run_sql(spark, config, "delete_held_slice", **bounds).collect()
    return result


def _remove_committed_slice(
    spark: SparkSession, config: Config, scale: _EpochScale, position: Position
) -> None:
    """Remove the rows of the last committed slice, if a crash left them staged."""
    if position.last_batch_id < SLICE_SPAN:
        return
    logged = engine.committed_batch(spark, config, position.last_batch_id)
    assert logged is not None  # read_position found it committed
    bounds = _slice_bounds(scale, position.last_batch_id, int(logged["epoch"]))
    run_sql(spark, config, "delete_held_slice", **bounds).collect()


def drain(
    spark: SparkSession,
    config: Config,
    progress: Callable[[BatchResult | TickResult], None] | None = None,
) -> list[TickResult]:
    """Apply the staged events the watermark allows, epoch by epoch, ticking between epochs;
    return the ticks. The caller holds the writer lock."""
    position = engine.read_position(spark, config)
    scale = _read_scale(spark, config)
    ticks: list[TickResult] = []

    def heard(result: BatchResult | TickResult | None) -> None:
        if result is not None and progress is not None:
            progress(result)

    started = position.started_batch_id
    if started is not None and started < SLICE_SPAN:
        raise ClockMismatch(
            f"micro-batch {started} was interrupted under another clock: run `acker run` "
            "with that clock to finish it before changing acker.clock to 'event_time'"
        )
    if scale is not None:  # every slice comes after the scale is fixed
        if started is not None:
            result = _apply_slice(spark, config, scale, position, started)
            heard(result)
            position = position if result is None else position_after(result)
        _remove_committed_slice(spark, config, scale, position)
    lateness_us = round(config.acker.allowed_lateness_s * 1_000_000)
    while True:
        held = (
            spark.table(config.qualified("held_events"))
            .agg(
                F.count("*").alias("rows"),
                F.max("stream_batch_id").alias("newest"),
                F.min(_plausible_micros()).alias("earliest_us"),
                F.max(_plausible_micros()).alias("latest_us"),
            )
            .first()
        )
        assert held is not None  # an aggregate without grouping returns one row
        if held["rows"] == 0:
            return ticks
        if scale is None:
            if held["earliest_us"] is None:
                return ticks  # no row that may move the clock yet: the others wait for one
            scale = _fix_scale(spark, config, held["earliest_us"], position.epoch)
        latest_us = held["latest_us"]
        watermark_epoch = (
            position.epoch if latest_us is None else scale.epoch_of(latest_us - lateness_us)
        )
        slice_id = max(position.last_batch_id + 1, held["newest"] * SLICE_SPAN)
        if slice_id // SLICE_SPAN != held["newest"]:
            raise StreamBatchTooWide(
                f"stream batch {held['newest']} spans more than {SLICE_SPAN} epochs: raise "
                "acker.tick_interval_s or lower acker.max_files_per_batch"
            )
        result = _apply_slice(spark, config, scale, position, slice_id)
        heard(result)
        position = position if result is None else position_after(result)
        if position.epoch >= watermark_epoch:
            return ticks
        # Straight to the next epoch that has staged events: the epochs between have no
        # micro-batch, and their ticks are one pass.
        next_us = _earliest_us(spark.table(config.qualified("held_events")))
        target = watermark_epoch
        if next_us is not None:
            target = min(target, max(position.epoch + 1, scale.epoch_of(next_us)))
        ticked = engine.tick(spark, config, target - position.epoch, clock="event_time")
        for done in ticked:
            heard(done)
        ticks += ticked
        position = Position(
            epoch=target,
            last_batch_id=position.last_batch_id,
            started_batch_id=None,
            unfinished_tick=None,
        )
