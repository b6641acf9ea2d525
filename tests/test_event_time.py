"""The event_time clock: events are applied epoch by epoch in event-time order, whatever
micro-batches they arrive in, so a backfill gives the outcomes the live run gave."""

from __future__ import annotations

import random
import shutil
import statistics
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from pipelines import jobs
from pipelines.clock import median_event_time_us
from pipelines.errors import CheckpointMismatch, ClockMismatch
from pipelines.run_record import unread_files
from pipelines.tables import CHANGE_FEED_PROPERTY, table_location
from pipelines.workload import Event, new_id
from tests.acker_harness import (
    BASE_TIME,
    Harness,
    ack,
    assert_same_settled_tables,
    epoch_spanning_trees,
    generated_trees,
    init,
    live_arrivals,
    outcome,
    settled_table,
)
from tests.model import AckerModel, EventTimeModel

A, B, C = 11, 22, 33
E1, E2, E3 = 0x1F2E3D4C5B6A7988, -0x0123456789ABCDEF, 0x7777000011112222
# Slice ids of stream batch 0 start at 0; those of stream batch 1 at 2**20.
SECOND_STREAM_BATCH = 2**20


def _backfill_two_trees(acker: Harness, completed_by: int, expired_by: int) -> None:
    """One stream batch over epochs 0 to 3: B completes in epoch 3 (micro-batch
    ``completed_by``), A, stamped at epoch 0, expires at the tick to epoch 3 (its last batch
    ``expired_by``), and A's ack of epoch 3 is late."""
    report = acker.batch(
        init(A, E1, 0),
        ack(A, E1, 35_000),  # epoch 3: A, stamped at epoch 0, expired at the tick to epoch 3
        init(B, E2 ^ E3, 12_000),
        ack(B, E2, 15_000),
        ack(B, E3, 31_000),  # epoch 3: B, stamped at epoch 1, is still pending
    )
    assert [t.epoch for t in report.ticks] == [1, 2, 3]
    b_done = outcome(
        B,
        "acked",
        init_ms=12_000,
        first_ms=12_000,
        last_ms=31_000,
        events=3,
        batch=completed_by,
        epoch=3,
    )
    a_expired = outcome(
        A, "timeout", init_ms=0, first_ms=0, last_ms=0, events=1, batch=expired_by, epoch=3
    )
    acker.assert_outcomes(completed=[b_done], expired=[a_expired])
    late = acker.table("late_events").select("anchor_id", "event_type", "outcome", "outcome_reason")
    assert [tuple(r) for r in late.collect()] == [(A, "ack", "expired", "timeout")]
    assert acker.table("held_events").count() == 0


def test_a_backfill_in_one_batch_is_applied_epoch_by_epoch(acker_factory) -> None:  # type: ignore[no-untyped-def]
    # One epoch per pass: the rule that a pass over many epochs reproduces.
    acker: Harness = acker_factory(clock="event_time", tick_interval_s=10.0, max_epochs_per_pass=1)
    # Slices: epoch 0 is batch 0, epoch 1 batch 1, epoch 2 has no events, epoch 3 is batch 2.
    _backfill_two_trees(acker, completed_by=2, expired_by=1)
    batches = acker.table("batches").select("batch_id", "epoch", "events_in").orderBy("batch_id")
    assert [tuple(r) for r in batches.collect()] == [(0, 0, 1), (1, 1, 2), (2, 3, 2)]


def test_a_pass_applies_a_backfill_s_epochs_at_once_as_epoch_by_epoch_would(acker_factory) -> None:  # type: ignore[no-untyped-def]
    acker: Harness = acker_factory(clock="event_time", tick_interval_s=10.0)
    # One micro-batch applies epochs 0 to 3; the ticks to epoch 3 follow it.
    _backfill_two_trees(acker, completed_by=0, expired_by=0)
    batches = acker.table("batches").select(
        "batch_id", "status", "epoch", "through_epoch", "events_in", "late", "completed"
    )
    assert [tuple(r) for r in batches.collect()] == [(0, "committed", 0, 3, 5, 1, 1)]


def test_a_run_of_one_stream_batch_applies_it_without_staging_it(acker_factory) -> None:  # type: ignore[no-untyped-def]
    acker: Harness = acker_factory(clock="event_time", tick_interval_s=10.0)

    def held_writes() -> list[str]:
        history = acker.spark.sql(f"describe history {acker.config.qualified('held_events')}")
        rows = history.where("operation in ('WRITE', 'DELETE')").orderBy("version").collect()
        return [row["operation"] for row in rows]

    # One file, one stream batch, nothing held from before: its rows never pass through
    # held_events, and the outcomes are those of the pass above.
    _backfill_two_trees(acker, completed_by=0, expired_by=0)
    assert held_writes() == []
    assert unread_files(acker.config) == 0
    # Two files a stream batch each: both are staged, and the drain after the stream applies
    # them in one micro-batch, then removes them.
    jobs.append_events(acker.spark, acker.config, [init(C, E3, 41_000)])
    jobs.append_events(acker.spark, acker.config, [ack(C, E3, 42_000)])
    assert unread_files(acker.config) == 2
    staged = replace(acker.config, acker=replace(acker.config.acker, max_files_per_batch=1))
    report = jobs.run(acker.spark, staged)
    assert (report.batches, report.completed) == (1, 1)
    assert held_writes() == ["WRITE", "WRITE", "DELETE"]


def slow_trees_and_late_inits(seed: int, count: int, interval_s: int) -> list[Event]:
    """What a real topology adds to :func:`epoch_spanning_trees`: trees whose last acks come 4
    to 12 epochs late, long after they expired, and trees whose acks come first, expire
    ``no_init``, and get their init 5 to 9 epochs later."""
    rng = random.Random(seed)
    interval_ms = interval_s * 1000
    events = []
    for number in range(count):
        anchor_id, edges = new_id(rng), [new_id(rng), new_id(rng)]
        start = rng.randrange(4 * interval_ms)
        if number % 2:
            events.append(init(anchor_id, edges[0] ^ edges[1], start))
            events.append(ack(anchor_id, edges[0], start + 500))
            events.append(ack(anchor_id, edges[1], start + rng.randrange(4, 13) * interval_ms))
        else:
            events.append(ack(anchor_id, edges[0], start))
            events.append(init(anchor_id, edges[0], start + rng.randrange(5, 10) * interval_ms))
    return events


@pytest.mark.parametrize(
    ("refresh", "realistic"),
    [("reset", False), ("activity", True)],
    ids=["refresh-reset", "refresh-activity-slow-trees-late-inits-crowded"],
)
def test_passes_over_many_epochs_equal_the_model(acker_factory, refresh, realistic) -> None:  # type: ignore[no-untyped-def]
    semantics = {"buckets": 2, "refresh": refresh}
    events = epoch_spanning_trees(seed=7, count=30, span_s=40, interval_s=10)
    if realistic:
        events += slow_trees_and_late_inits(seed=9, count=12, interval_s=10)
        # max_pending as low as the most trees ever pending at once, epoch by epoch: below
        # the trees of a pass, so only a pass that counts pending per epoch stays wide.
        probe = EventTimeModel(interval_s=10.0, allowed_lateness_s=10.0, **semantics)
        probe.run(events)
        semantics["max_pending"] = probe.acker.most_pending
        assert len({e.anchor_id for e in events}) > probe.acker.most_pending
    arrivals = live_arrivals(events, lateness_ms=10_000, seed=8)
    # Two runs, each a stream batch of what arrived meanwhile; the realistic workload in one.
    runs = (
        [events]
        if realistic
        else [
            [event for batch in half for event in batch]
            for half in (arrivals[: len(arrivals) // 2], arrivals[len(arrivals) // 2 :])
        ]
    )
    passes: Harness = acker_factory(
        clock="event_time", tick_interval_s=10.0, allowed_lateness_s=10.0, **semantics
    )
    model = EventTimeModel(interval_s=10.0, allowed_lateness_s=10.0, **semantics)
    for run in runs:
        passes.batch(*run)
        model.run(run)

    assert_settled_outcomes_equal_the_model(passes, model.acker)
    ticks = passes.table("ticks").select(
        "epoch", "expired_timeout", "expired_no_init", "late_no_init"
    )
    assert sorted(tuple(row) for row in ticks.collect()) == model.acker.ticks
    # The comparison means something: every kind of outcome and late events, over many
    # epochs, and passes that applied several epochs at once.
    status = jobs.status(passes.spark, passes.config)
    assert min(status.completed, status.failed, status.expired, status.late_events) > 0
    assert status.epoch >= 6
    spans = passes.table("batches").select(F.col("through_epoch") - F.col("epoch")).collect()
    assert max(span for (span,) in spans) > 1
    # One pass per run: nothing narrowed them.
    assert len(spans) == len(runs)
    if realistic:  # late acks of expired trees and late inits after no_init expiries
        late = passes.table("late_events")
        assert late.where("event_type = 'init' and outcome_reason = 'no_init'").count() > 0
        assert late.where("event_type = 'ack' and outcome_reason = 'timeout'").count() > 0
        assert_one_outcome_per_anchor(passes)


def assert_one_outcome_per_anchor(acker: Harness) -> None:
    outcomes = acker.table("outcomes").groupBy("anchor_id").count()
    assert outcomes.where("count > 1").count() == 0


def test_the_capacity_guard_firing_in_the_middle_epoch_of_a_pass_equals_epoch_by_epoch(
    acker_factory,  # type: ignore[no-untyped-def]
) -> None:
    semantics = {"buckets": 3, "max_pending": 3}
    # Epoch 0: two trees wait for acks; epoch 1: three more, two past max_pending (the newest
    # fail with reason overflow); epoch 2: the first trees complete and one more arrives.
    events = [init(1, E1, 0), init(2, E2, 1_000)]
    events += [init(3, E3, 11_000), init(4, E1, 12_000), init(5, E2, 13_000)]
    events += [ack(1, E1, 21_000), ack(2, E2, 22_000), init(6, E3, 23_000), ack(3, E3, 24_000)]
    events += [ack(7, E1, 41_000)]  # moves the watermark past epoch 2
    acker: Harness = acker_factory(clock="event_time", tick_interval_s=10.0, **semantics)
    model = EventTimeModel(interval_s=10.0, allowed_lateness_s=0.0, **semantics)
    acker.batch(*events)
    model.run(events)

    assert_settled_outcomes_equal_the_model(acker, model.acker)
    overflowed = acker.table("failed").where("reason = 'overflow'").select("anchor_id")
    assert sorted(row[0] for row in overflowed.collect()) == [4, 5]
    # Epoch 0 as a pass of its own, the crowded epoch 1 alone, then the rest as one pass.
    spans = acker.table("batches").orderBy("batch_id").select("epoch", "through_epoch")
    assert [tuple(row) for row in spans.collect()] == [(0, 0), (1, 1), (2, 4)]


def assert_settled_outcomes_equal_the_model(acker: Harness, model: AckerModel) -> None:
    """The outcome tables, late events and pending trees' state equal the model's; batch ids
    aside, which a pass numbers otherwise than the model's one micro-batch per epoch."""
    for name, rows in model.outcomes.items():
        assert_df_equality(
            settled_table(acker, name),
            acker.expected(rows).drop("batch_id"),
            ignore_row_order=True,
            ignore_nullable=True,
            ignore_metadata=True,
        )
    late = acker.table("late_events").select("anchor_id", "event_type", "xor_value", "outcome")
    assert sorted(tuple(row) for row in late.collect()) == sorted(
        (e.anchor_id, e.event_type, e.xor_value, kind) for e, kind in model.late
    )
    state = ["anchor_id", "checksum", "has_init", "failed", "event_count", "epoch"]
    pending = acker.table("pending").where("outcome is null").select(*state)
    assert sorted(tuple(row) for row in pending.collect()) == sorted(
        (anchor, e.checksum, e.has_init, e.failed, e.event_count, e.epoch)
        for anchor, e in model.pending.items()
    )


def test_events_beyond_the_allowed_lateness_wait_for_the_watermark(acker_factory) -> None:  # type: ignore[no-untyped-def]
    acker: Harness = acker_factory(
        clock="event_time", tick_interval_s=10.0, allowed_lateness_s=15.0
    )
    # Watermark 25 s - 15 s = 10 s, in epoch 1: B (epoch 2) waits.
    first = acker.batch(init(A, E1, 0), init(B, E2, 25_000))
    assert [t.epoch for t in first.ticks] == [1]
    assert acker.pending_ids() == {A}
    assert acker.table("held_events").select("anchor_id").collect() == [(B,)]
    # C is 26 s older than the latest event but still in the current epoch: on time. The
    # watermark moves to 38 s - 15 s = 23 s, epoch 2: B is applied there; A's ack (epoch 3) waits.
    second = acker.batch(init(C, E3, 12_000), ack(A, E1, 38_000))
    assert [t.epoch for t in second.ticks] == [2]
    stamps = acker.table("pending").select("anchor_id", "epoch").orderBy("anchor_id")
    assert [tuple(r) for r in stamps.collect()] == [(A, 0), (B, 2), (C, 1)]
    assert acker.table("held_events").select("anchor_id").collect() == [(A,)]


def test_a_lost_checkpoint_is_refused_before_anything_is_staged(acker_factory) -> None:  # type: ignore[no-untyped-def]
    acker: Harness = acker_factory(clock="event_time", tick_interval_s=10.0)
    acker.batch(init(A, E1, 0))
    acker.batch(init(B, E2, 1_000))
    shutil.rmtree(acker.config.checkpoint_path)
    with pytest.raises(
        CheckpointMismatch, match=r"^micro-batch 0 is older than the last staged batch 1"
    ):
        jobs.run(acker.spark, acker.config)
    assert acker.pending_ids() == {A, B}
    assert acker.table("held_events").count() == 0


def test_rows_without_an_event_time_wait_for_the_first_row_with_one(acker_factory) -> None:  # type: ignore[no-untyped-def]
    acker: Harness = acker_factory(clock="event_time", tick_interval_s=10.0)
    timeless = Event(A, "ack", E1, None, None, "bolt", None, None)
    assert acker.batch(timeless).ticks == []
    assert acker.table("held_events").count() == 1
    assert acker.table("quarantine").count() == 0
    report = acker.batch(init(B, E2, 3_000), init(C, E3, 12_000))
    assert [t.epoch for t in report.ticks] == [1]
    reasons = acker.table("quarantine").select("reason", "batch_id").collect()
    assert [tuple(r) for r in reasons] == [("null_event_time", SECOND_STREAM_BATCH)]
    stamps = acker.table("pending").select("anchor_id", "epoch").orderBy("anchor_id")
    assert [tuple(r) for r in stamps.collect()] == [(B, 0), (C, 1)]


@pytest.mark.fast
def test_a_stream_batch_median_event_time_lies_within_half_a_bucket_of_the_true_one(
    acker: Harness,
) -> None:
    seconds = [10.2, 11.7, 12.1, 30.0, 95.0, 95.4]
    rows = [(datetime(2026, 1, 1) + timedelta(seconds=s),) for s in seconds] + [(None,)]
    batch = acker.spark.createDataFrame(rows, "event_time timestamp")
    true_us = statistics.median_low(round(s * 1_000_000) for s in seconds)
    origin_us = round(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1_000_000)
    for width_us in (1, 1_000_000, 60_000_000):
        found = median_event_time_us(batch, width_us)
        assert found is not None
        assert abs(found - origin_us - true_us) <= width_us // 2, width_us
    assert median_event_time_us(batch.where("event_time is null"), 1_000_000) is None


def test_events_dated_a_year_off_are_quarantined_and_move_no_clock(acker_factory) -> None:  # type: ignore[no-untyped-def]
    normal = [init(A, E1, 0), ack(A, E1, 12_000), init(B, E2, 3_000)]
    year = timedelta(days=365)
    ahead = ack(C, E1, _ms_after_base(datetime.now(UTC).replace(tzinfo=None) + year))
    behind = ack(C, E2, _ms_after_base(BASE_TIME - year))
    acker: Harness = acker_factory(clock="event_time", tick_interval_s=10.0)
    report = acker.batch(ahead, *normal, behind)
    reference: Harness = acker_factory(clock="event_time", tick_interval_s=10.0)
    expected = reference.batch(*normal)
    # Neither a year of ticks to the event ahead nor an origin a year back.
    assert [t.epoch for t in report.ticks] == [t.epoch for t in expected.ticks] == [1]
    anchor = F.get_json_object("raw", "$.anchor_id").cast("bigint")
    reasons = acker.table("quarantine").select(anchor, "reason", "batch_id")
    assert sorted(tuple(r) for r in reasons.collect()) == [
        (C, "event_time_far_from_batch", 0),
        (C, "event_time_in_future", 0),
    ]
    assert acker.table("held_events").count() == 0
    assert_same_settled_tables(
        acker, reference, ["pending", "completed", "failed", "expired", "late_events", "ticks"]
    )


def test_a_run_upgrades_the_tables_of_an_older_acker(acker: Harness) -> None:
    held = acker.config.qualified("held_events")
    acker.spark.sql(f"drop table {held}")
    shutil.rmtree(table_location(acker.config, "held_events"), ignore_errors=True)
    acker.spark.sql(
        f"create table {held} (anchor_id bigint, event_type string, xor_value bigint, "
        "spout_task int, source_msg_id string, component string, event_time timestamp, "
        f"event_id string, stream_batch_id bigint) using delta "
        f"location '{table_location(acker.config, 'held_events')}'"
    )
    events = acker.config.qualified("ack_events")
    acker.spark.sql(f"alter table {events} unset tblproperties ('{CHANGE_FEED_PROPERTY}')")
    jobs.run(acker.spark, acker.config)
    assert acker.spark.table(held).columns[-2:] == ["quarantine_reason", "arrived_at"]
    properties = acker.spark.sql(f"show tblproperties {events}").collect()
    assert {r["key"]: r["value"] for r in properties}[CHANGE_FEED_PROPERTY] == "true"


def _ms_after_base(moment: datetime) -> int:
    return round((moment - BASE_TIME).total_seconds() * 1000)


def test_tables_run_under_event_time_refuse_another_clock(acker_factory) -> None:  # type: ignore[no-untyped-def]
    acker: Harness = acker_factory(clock="event_time", tick_interval_s=10.0)
    acker.batch(init(A, E1, 0))
    manual = replace(acker.config, acker=replace(acker.config.acker, clock="manual"))
    jobs.append_events(acker.spark, manual, [ack(A, E1, 1_000)])
    with pytest.raises(ClockMismatch, match=r"^acker.clock = 'manual', but these tables were run"):
        jobs.run(acker.spark, manual)
    assert acker.pending_ids() == {A}


def test_a_backfill_equals_the_live_run(acker_factory) -> None:  # type: ignore[no-untyped-def]
    semantics = {
        "clock": "event_time",
        "tick_interval_s": 20.0,
        "buckets": 2,
        "allowed_lateness_s": 15.0,
    }
    events = generated_trees(seed=3, count=40, span_s=60)
    live: Harness = acker_factory(**semantics)
    batches = live_arrivals(events, lateness_ms=15_000, seed=4)
    assert len(batches) >= 4
    for batch in batches:
        live.batch(*batch)
    backfill: Harness = acker_factory(**semantics)
    backfill.batch(*events)

    tables = ["completed", "failed", "expired", "late_events", "pending", "ticks"]
    assert_same_settled_tables(backfill, live, tables)
    # The comparison means something: every kind of outcome happened, over several epochs.
    status = jobs.status(live.spark, live.config)
    assert min(status.completed, status.failed, status.expired) > 0
    assert status.epoch >= 4
