"""Jobs beyond a single batch: the clocks that drive `acker run`, and the demo workload."""

from __future__ import annotations

import calendar
import json
import os
import shutil
import time
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pipelines import clock, jobs
from pipelines.config import Config
from pipelines.engine import read_position
from pipelines.errors import CheckpointMismatch, NotInitialised
from pipelines.jobs import _refusal_in
from pipelines.lease import LEASE_TABLE
from pipelines.run_record import take_recorded_position
from pipelines.session import build_session
from pipelines.sql import TABLES
from pipelines.tables import (
    CHANGE_FEED_PROPERTY,
    CHECKPOINT_INTERVAL_PROPERTY,
    CHECKPOINT_INTERVALS,
    STATISTICS_COLUMNS,
    STATISTICS_COLUMNS_PROPERTY,
    table_location,
    table_property,
)
from pipelines.workload import WorkloadSpec
from tests.acker_harness import BASE_TIME, Harness, ack, init, outcome
from tests.conftest import make_config

E1, E2 = 0x0123456789ABCDEF, -0x7654321076543210


def test_the_times_a_run_writes_are_utc_whatever_the_zone_of_its_process(acker: Harness) -> None:
    zone = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        build_session(acker.config)  # as every verb starts; here the session already runs
        before = time.time()
        acker.batch(init(1, 5, 0), ack(1, 5, 1_000))
        after = time.time()
    finally:
        if zone is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = zone
        time.tzset()
    started = acker.table("batches").select(F.unix_micros("started_at")).first()
    assert started is not None
    assert before - 1 <= started[0] / 1e6 <= after + 1
    first_event = acker.table("ack_events").agg(F.min(F.unix_micros("event_time"))).first()
    assert first_event is not None
    assert first_event[0] == calendar.timegm(BASE_TIME.timetuple()) * 1_000_000


def test_manual_clock_never_ticks_on_run(acker: Harness) -> None:
    report = acker.batch(init(1, 5, 0), ack(2, 7, 90_000_000))
    assert report.ticks == []
    assert jobs.status(acker.spark, acker.config).epoch == 0


def test_processing_time_clock_owes_one_tick_per_interval(acker_factory) -> None:  # type: ignore[no-untyped-def]
    acker: Harness = acker_factory(clock="processing_time", tick_interval_s=3600.0)
    assert acker.batch(init(1, 5, 0)).ticks == [], "less than an interval has passed"
    started = acker.table("batches").agg(F.min("started_at")).first()[0]  # type: ignore[index]
    later = started + timedelta(seconds=2.5 * 3600)
    assert clock.due_ticks(acker.spark, acker.config, now=later) == 2


def test_a_scheduled_processing_time_run_applies_each_event_in_the_epoch_it_arrived_in(
    acker_factory,  # type: ignore[no-untyped-def]
) -> None:
    """Two runs several tick intervals apart, the first applying half of each tree's events and
    the second the rest, all arriving within the trees' timeout: every tree completes. A run
    that stamped its events with the epoch of the tick before it would expire them all."""
    # A gap of `buckets` intervals before the first half arrives makes the first run owe
    # `buckets` ticks (which expire whatever was stamped before the gap); the trees' timeout
    # leaves the first run and the second append about a minute, on a busy machine too.
    interval_s, buckets = 5.0, 12
    acker: Harness = acker_factory(
        clock="processing_time",
        tick_interval_s=interval_s,
        buckets=buckets,
    )
    jobs.tick(acker.spark, acker.config)  # the clock's epoch 1 starts now
    anchored = time.monotonic()
    trees = range(1, 21)
    time.sleep(max(0.0, (buckets + 0.2) * interval_s - (time.monotonic() - anchored)))
    first = acker.batch(*(e for t in trees for e in (init(t, E1 ^ E2, 0), ack(t, E1, 1))))
    assert first.ticks, "the first run ticks past the epoch its events arrived in"
    jobs.append_events(acker.spark, acker.config, [ack(t, E2, 2) for t in trees])
    # The trees, stamped in epoch 1 + buckets, expire at the tick to epoch 1 + 2 * buckets.
    assert time.monotonic() - anchored < 2 * buckets * interval_s, "the rest arrived too late"
    jobs.run(acker.spark, acker.config)

    ticks = acker.table("ticks").orderBy("epoch").collect()
    anchor_us = ticks[0]["ticked_at"].timestamp() * 1e6
    for later in ticks[1:]:  # each tick of the clock is dated at the start of its epoch
        assert later["clock"] == "processing_time"
        expected_us = anchor_us + (later["epoch"] - 1) * interval_s * 1e6
        assert later["ticked_at"].timestamp() * 1e6 == pytest.approx(expected_us, abs=1)
    history = acker.spark.sql(f"describe history {acker.config.qualified('ack_events')}")
    rest_arrived = history.agg(F.max("timestamp")).first()[0]  # type: ignore[index]
    rest_epoch = 1 + int((rest_arrived - ticks[0]["ticked_at"]).total_seconds() // interval_s)
    expected = [
        outcome(t, "acked", init_ms=0, first_ms=0, last_ms=2, events=3, batch=0, epoch=rest_epoch)
        for t in trees
    ]
    assert_df_equality(
        acker.outcomes("completed").drop("batch_id"),
        acker.expected(expected).drop("batch_id"),
        ignore_row_order=True,
        ignore_nullable=True,
        ignore_metadata=True,
    )
    assert acker.table("expired").count() == 0
    assert acker.table("late_events").count() == 0


def test_rows_appended_before_ack_events_had_its_change_feed_are_applied_as_arriving_now(
    acker_factory,  # type: ignore[no-untyped-def]
) -> None:
    """A warehouse of an older acker: its stream checkpoint stands before rows that the change
    data feed never recorded. Runs read without the feed until it has a batch to start from."""
    acker: Harness = acker_factory(clock="processing_time", tick_interval_s=3600.0)
    events = acker.config.qualified("ack_events")
    jobs.run(acker.spark, acker.config)  # the stream's checkpoint, at the feed's start
    acker.spark.sql(f"alter table {events} unset tblproperties ('{CHANGE_FEED_PROPERTY}')")
    runs = []
    for arriving in (
        [init(1, E1 ^ E2, 0), ack(1, E1, 1)],  # unrecorded by the feed
        [ack(1, E2, 2), init(2, E1, 3)],  # recorded: the run enabled the feed again
        [ack(2, E1, 4)],
    ):
        jobs.append_events(acker.spark, acker.config, arriving)
        runs.append(jobs.run(acker.spark, acker.config).events_in)
    assert runs == [2, 2, 1]
    acker.assert_outcomes(
        completed=[
            outcome(1, "acked", init_ms=0, first_ms=0, last_ms=2, events=3, batch=2 * 2**20),
            outcome(2, "acked", init_ms=3, first_ms=3, last_ms=4, events=2, batch=3 * 2**20),
        ]
    )


def test_readers_of_older_tables_are_told_to_upgrade_and_a_tick_upgrades_them(
    acker: Harness,
) -> None:
    """late_events and ticks as an acker made them before a tick could send late events."""
    spark, config = acker.spark, acker.config
    older = {
        "late_events": "anchor_id bigint, event_type string, xor_value bigint, spout_task int, "
        "source_msg_id string, component string, event_time timestamp, event_id string, "
        "outcome string, outcome_reason string, outcome_batch_id bigint, batch_id bigint",
        "ticks": "epoch bigint, ticked_at timestamp, clock string, expired_timeout bigint, "
        "expired_no_init bigint, last_batch_id bigint",
    }
    for table, columns in older.items():
        spark.sql(f"drop table {config.qualified(table)}")
        location = table_location(config, table)
        shutil.rmtree(location, ignore_errors=True)
        spark.sql(
            f"create table {config.qualified(table)} ({columns}) using delta location '{location}'"
        )

    with pytest.raises(NotInitialised, match=r"has no column tick_epoch: .* `acker init`"):
        jobs.status(spark, config)
    with pytest.raises(NotInitialised, match=r"has no column tick_epoch"):
        jobs.open_tables(spark, config)
    jobs.tick(spark, config)
    assert spark.table(config.qualified("late_events")).columns[-1] == "tick_epoch"
    assert spark.table(config.qualified("ticks")).columns[-1] == "late_no_init"
    assert jobs.status(spark, config).epoch == 1


def test_event_time_clock_follows_the_watermark(acker_factory) -> None:  # type: ignore[no-untyped-def]
    acker: Harness = acker_factory(clock="event_time", tick_interval_s=10.0)
    first = acker.batch(init(1, 5, 0), ack(1, 9, 5_000), init(2, 6, 25_000))
    assert [t.epoch for t in first.ticks] == [1, 2]
    second = acker.batch(ack(2, 3, 41_000))
    assert [t.epoch for t in second.ticks] == [3, 4]
    # Each tree is stamped with the epoch of its events, not with the epoch of the run that
    # read them: tree 1 (epoch 0) expired at the tick to epoch 3, tree 2 (epoch 2) lives on.
    assert acker.pending_ids() == {2}
    expired = acker.table("expired").select("anchor_id", "epoch").orderBy("anchor_id")
    assert [tuple(r) for r in expired.collect()] == [(1, 3)]


def test_demo_resolves_every_tree_exactly_once(spark, acker: Harness) -> None:  # type: ignore[no-untyped-def]
    spec = WorkloadSpec(trees=150, batches=3, seed=5)
    status = jobs.demo(spark, acker.config, spec)
    outcomes = acker.table("outcomes")
    assert status.pending == 0
    assert status.completed + status.failed + status.expired == spec.trees
    assert outcomes.select("anchor_id").distinct().count() == spec.trees
    assert status.completed > 0 and status.failed > 0 and status.expired > 0


def test_ingesting_the_same_files_again_adds_nothing(acker: Harness, tmp_path: Path) -> None:
    folder = tmp_path / "events"
    (folder / "day1").mkdir(parents=True)
    rows = [
        {
            "anchor_id": 1,
            "event_type": "init",
            "xor_value": 3,
            "spout_task": 0,
            "event_time": "2026-03-01T12:00:00",
        },
        {"anchor_id": 1, "event_type": "ack", "xor_value": 3, "event_time": "2026-03-01T12:00:01"},
    ]
    (folder / "day1" / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "b.jsonl").write_text(json.dumps(rows[0] | {"anchor_id": 2}) + "\n")
    lines: list[str] = []

    first = jobs.ingest(acker.spark, acker.config, [folder], progress=lines.append)
    assert (first.files, first.accepted, first.quarantined, first.skipped_files) == (2, 3, 0, 0)
    # The same folder again, plus an overlapping sub-folder: every file is already in.
    again = jobs.ingest(acker.spark, acker.config, [folder, folder / "day1"])
    assert (again.files, again.accepted, again.skipped_files) == (3, 0, 3)
    assert acker.table("ack_events").count() == 3
    assert lines == [
        f"[1/2] {folder / 'b.jsonl'}: 1 events, 0 quarantined",
        f"[2/2] {folder / 'day1' / 'a.jsonl'}: 2 events, 0 quarantined",
    ]


@pytest.mark.fast
def test_a_refusal_from_a_connect_server_is_raised_again_as_its_own_class() -> None:
    failure = (
        "StreamingQueryException: [STREAM_FAILED] ...\n"
        '  File "/work/pipelines/engine.py", line 214, in _check_batch_order\n'
        "pipelines.errors.CheckpointMismatch: micro-batch 0 is older than the last committed "
        "batch 1: the checkpoint /tmp/cp was rolled back or replaced\n"
    )
    refusal = _refusal_in(failure)
    assert type(refusal) is CheckpointMismatch
    assert str(refusal).startswith("micro-batch 0 is older than the last committed batch 1")
    assert _refusal_in("java.lang.OutOfMemoryError: Java heap space") is None


def property_of_each(
    spark: SparkSession, config: Config, key: str, tables: Iterable[str]
) -> dict[str, str | None]:
    """Each of ``tables``' property ``key`` (``None`` where unset)."""
    return {table: table_property(spark, config, table, key) for table in tables}


def test_init_gives_each_table_its_checkpoint_interval_and_keeps_one_a_user_set(
    spark: SparkSession, tmp_path: Path
) -> None:
    config = make_config(tmp_path / "warehouse")
    jobs.init(spark, config)

    def intervals() -> dict[str, str | None]:
        return property_of_each(spark, config, CHECKPOINT_INTERVAL_PROPERTY, (*TABLES, LEASE_TABLE))

    assert intervals() == {table: str(n) for table, n in CHECKPOINT_INTERVALS.items()}
    # Delta writes no checkpoint at the tenth commit, its own default interval.
    for anchor in range(1, 12):
        jobs.append_events(spark, config, [init(anchor, 7, 0)])
    log = table_location(config, "ack_events") / "_delta_log"
    assert (log / f"{11:020}.json").exists() and not list(log.glob("*.checkpoint.parquet"))
    # An older acker's tables have none; an interval a user chose stays.
    for table in ("pending", LEASE_TABLE):
        spark.sql(
            f"alter table {config.qualified(table)} "
            f"unset tblproperties ('{CHECKPOINT_INTERVAL_PROPERTY}')"
        ).collect()
    spark.sql(
        f"alter table {config.qualified('ticks')} "
        f"set tblproperties ('{CHECKPOINT_INTERVAL_PROPERTY}' = '5')"
    ).collect()
    jobs.init(spark, config)
    assert intervals() == {
        table: "5" if table == "ticks" else str(n) for table, n in CHECKPOINT_INTERVALS.items()
    }


def test_the_event_tables_keep_file_statistics_of_the_columns_reads_skip_by(
    spark: SparkSession, tmp_path: Path
) -> None:
    config = make_config(tmp_path / "warehouse")
    jobs.init(spark, config)

    def statistics_columns() -> dict[str, str | None]:
        return property_of_each(spark, config, STATISTICS_COLUMNS_PROPERTY, TABLES)

    assert statistics_columns() == {table: STATISTICS_COLUMNS.get(table) for table in TABLES}
    jobs.append_events(spark, config, [init(1, 7, 0), ack(1, 7, 1_000)])
    log = table_location(config, "ack_events") / "_delta_log"
    newest = max(log.glob("*.json"))
    added = [json.loads(line)["add"] for line in newest.read_text().splitlines() if '"add"' in line]
    assert added
    for action in added:
        statistics = json.loads(action["stats"])
        assert set(statistics["minValues"]) == set(statistics["maxValues"]) == {"event_time"}
    # An older acker's table has none; columns a user chose stay.
    events, held = config.qualified("ack_events"), config.qualified("held_events")
    spark.sql(f"alter table {events} unset tblproperties ('{STATISTICS_COLUMNS_PROPERTY}')")
    spark.sql(
        f"alter table {held} set tblproperties ('{STATISTICS_COLUMNS_PROPERTY}' = 'anchor_id')"
    )
    assert table_property(spark, config, "ack_events", STATISTICS_COLUMNS_PROPERTY) is None
    jobs.init(spark, config)
    assert statistics_columns() == {
        table: "anchor_id" if table == "held_events" else STATISTICS_COLUMNS.get(table)
        for table in TABLES
    }


def test_init_records_where_new_tables_stand_and_only_for_new_tables(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    config = make_config(tmp_path / "warehouse")
    jobs.init(spark, config)
    assert take_recorded_position(config) == read_position(spark, config)
    # tables that existed already may hold anything: nothing recorded
    jobs.init(spark, config)
    assert take_recorded_position(config) is None
