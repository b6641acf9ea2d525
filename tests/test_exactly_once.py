"""Replays and the one-writer rule, in-process: a batch applied again, with the same or other
content, leaves what one application leaves; batches out of order and second writers are
refused with a clear message."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from pipelines import jobs
from pipelines.cli import main
from pipelines.engine import (
    BATCHES_SCHEMA,
    Position,
    _outcome_anchors,
    process_batch,
    read_position,
    tick,
)
from pipelines.errors import CheckpointMismatch, InterruptedWork, ReplayConflict, WriterBusy
from pipelines.lock import lock_path
from pipelines.tables import attach_tables
from pipelines.workload import Event
from tests.acker_harness import (
    WALL_CLOCK_COLUMNS,
    Harness,
    ack,
    copy_warehouse,
    fail,
    init,
    outcome,
    write_conf,
)
from tests.conftest import make_config

A, B, C, D, G = 11, 22, 33, 44, 77
E1, E2, E3, E4, E5 = 0x51F0E1D2C3B4A596, -0x3A2B1C0D4E5F6071, 0x0F1E2D3C4B5A6978, -77, 0x4242

# Compared whole; batches keeps only what does not depend on the wall clock.
STATE_TABLES = ("completed", "failed", "late_events", "quarantine", "pending", "batches")


def assert_same_state(left: Harness, right: Harness) -> None:
    for name in STATE_TABLES:
        assert_df_equality(
            left.table(name).drop(*WALL_CLOCK_COLUMNS.get(name, [])),
            right.table(name).drop(*WALL_CLOCK_COLUMNS.get(name, [])),
            ignore_row_order=True,
            ignore_nullable=True,
        )


def events_df(acker: Harness, *events: Event):  # type: ignore[no-untyped-def]
    return acker.spark.createDataFrame([e.row() for e in events], jobs.ACK_EVENTS_SCHEMA)


def test_replay_after_losing_the_checkpoint_commit_changes_no_table(acker: Harness) -> None:
    acker.batch(init(A, E1 ^ E2, 0), ack(A, E1, 10), ack(A, E2, 20), init(B, E3, 5))
    before = {name: sorted(acker.table(name).collect(), key=repr) for name in STATE_TABLES}
    # The stream forgets it committed batch 0, as after a crash just before its commit.
    commits = acker.config.checkpoint_path / "commits"
    for name in ("0", ".0.crc"):
        (commits / name).unlink()
    report = jobs.run(acker.spark, acker.config)
    assert report.batches == 0
    for name, rows in before.items():
        assert sorted(acker.table(name).collect(), key=repr) == rows, name


def test_batch_applied_again_with_other_content_equals_one_application(acker_factory) -> None:  # type: ignore[no-untyped-def]
    replayed: Harness = acker_factory()
    single: Harness = acker_factory()
    first = (init(A, E1 ^ E2, 0), init(B, E3, 0), init(C, E4, 0))
    first_content = (
        ack(A, E1, 10),
        ack(A, E2, 20),  # A completes
        ack(B, E3, 10),  # B completes
        init(D, E5, 15),  # D becomes pending
        Event(0, "ack", 5, None, None, "bolt", first[0].event_time, None),  # quarantined
    )
    other_content = (
        ack(A, E1, 30),  # A stays pending, waiting for E2
        ack(B, E3, 10),
        fail(C, 40),
        init(G, E5, 50),
        ack(G, E5, 60),
    )
    for acker in (replayed, single):
        acker.batch(*first)
    replayed.batch(*first_content)
    assert replayed.pending_ids() == {C, D}
    result = process_batch(
        replayed.spark, replayed.config, events_df(replayed, *other_content), batch_id=1
    )
    assert result is not None and result.events_in == 5
    single.batch(*other_content)

    assert replayed.pending_ids() == {A}
    replayed.assert_outcomes(
        completed=[
            outcome(B, "acked", init_ms=0, first_ms=0, last_ms=10, events=2, batch=1),
            outcome(G, "acked", init_ms=50, first_ms=50, last_ms=60, events=2, batch=1),
        ],
        failed=[outcome(C, "fail", init_ms=0, first_ms=0, last_ms=40, events=2, batch=1)],
    )
    assert replayed.table("quarantine").count() == 0
    assert_same_state(replayed, single)


def test_replay_with_other_content_after_a_tick_is_refused(acker: Harness) -> None:
    acker.batch(init(A, E1, 0))
    acker.tick()
    with pytest.raises(ReplayConflict, match="only be applied again before the next tick"):
        process_batch(acker.spark, acker.config, events_df(acker, ack(A, E1, 5)), batch_id=0)
    assert acker.pending_ids() == {A}


def test_a_batch_older_than_the_last_committed_is_refused(acker: Harness) -> None:
    acker.batch(init(A, E1, 0))
    acker.batch(init(B, E2, 0))
    with pytest.raises(CheckpointMismatch, match="older than the last committed batch 1"):
        process_batch(acker.spark, acker.config, events_df(acker, ack(A, E1, 5)), batch_id=0)
    assert acker.pending_ids() == {A, B}


def test_a_started_row_an_older_acker_left_still_marks_its_batch_half_done(acker: Harness) -> None:
    acker.batch(init(A, E1, 0))
    assert read_position(acker.spark, acker.config).started_batch_id is None
    started = acker.spark.createDataFrame(
        [(1, "started", 0, "x", datetime(2026, 1, 1)) + (None,) * 13], BATCHES_SCHEMA
    )
    started.writeTo(acker.config.qualified("batches")).append()
    assert read_position(acker.spark, acker.config).started_batch_id == 1
    with pytest.raises(InterruptedWork, match="micro-batch 1 was interrupted"):
        acker.tick()
    assert acker.pending_ids() == {A}


def test_the_position_the_writer_carries_is_what_the_tables_say_until_another_commit(
    acker: Harness, tmp_path: Path
) -> None:
    acker.batch(init(A, E1, 0))
    acker.tick()
    acker.batch(ack(A, E1, 5))
    expected = Position(epoch=1, last_batch_id=1, started_batch_id=None, unfinished_tick=None)
    assert read_position(acker.spark, acker.config) == expected
    # The same tables under a schema this process has never read: read from their rows.
    copy = make_config(tmp_path / "copy")
    copy_warehouse(acker.config, copy)
    attach_tables(acker.spark, copy, views=())
    assert read_position(acker.spark, copy) == expected
    # A commit the writer did not make: the rows a half-done batch 2 left.
    completed = acker.table("completed").withColumn("batch_id", F.lit(2).cast("bigint"))
    completed.writeTo(acker.config.qualified("completed")).append()
    assert read_position(acker.spark, acker.config) == replace(expected, started_batch_id=2)


def test_the_outcomes_the_writer_keeps_give_way_to_another_commit(acker: Harness) -> None:
    spark, config = acker.spark, acker.config
    process_batch(spark, config, events_df(acker, init(A, E1, 0), ack(A, E1, 5)), batch_id=0)
    # Looked up in what the writer kept of its own batch 0: A's second ack is late.
    process_batch(spark, config, events_df(acker, ack(A, E1, 6)), batch_id=1)
    # A commit the writer did not make: B failed, as a restore of an older outcome would say.
    restored = acker.table("completed").withColumn("anchor_id", F.lit(B).cast("bigint"))
    restored.writeTo(config.qualified("failed")).append()
    process_batch(
        spark, config, events_df(acker, init(B, E2, 7), ack(B, E2, 8), init(C, E3, 9)), batch_id=2
    )
    # C expires at the ticks, which add it to what the writer keeps: its ack is late.
    tick(spark, config, config.acker.buckets)
    process_batch(spark, config, events_df(acker, ack(C, E3, 10)), batch_id=3)
    late = acker.table("late_events").groupBy("anchor_id", "batch_id").count()
    expected = spark.createDataFrame([(A, 1, 1), (B, 2, 2), (C, 3, 1)], late.schema)
    assert_df_equality(late, expected, ignore_row_order=True, ignore_nullable=True)
    assert {row["anchor_id"] for row in acker.table("completed").collect()} == {A}
    assert {row["anchor_id"] for row in acker.table("expired").collect()} == {C}
    assert acker.pending_ids() == set()


def test_the_outcomes_the_writer_keeps_serve_its_next_runs(acker: Harness) -> None:
    acker.batch(init(A, E1, 0), ack(A, E1, 5), init(B, E2, 1), fail(B, 2))
    # A new run, whose micro-batch has a session of its own: A's second ack is late.
    acker.batch(ack(A, E1, 6))
    late = acker.table("late_events").select("anchor_id", "batch_id")
    assert [tuple(row) for row in late.collect()] == [(A, 1)]
    other = acker.spark.newSession()
    kept = _outcome_anchors(other, acker.config, for_batch=True)
    # From memory, not from the tables, and readable by the new session's SQL.
    assert "Relation" not in kept._jdf.queryExecution().analyzed().toString()
    assert_df_equality(
        other.sql("select anchor_id, outcome, batch_id from {kept}", kept=kept),
        other.createDataFrame(
            [(A, "completed", 0), (B, "failed", 0)],
            "anchor_id bigint, outcome string, batch_id bigint",
        ),
        ignore_row_order=True,
        ignore_nullable=True,
        ignore_metadata=True,
    )


def test_a_second_writer_is_refused_naming_the_holder(acker: Harness) -> None:
    path = lock_path(acker.config)
    holder_code = (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "os.write(fd, b'pid 1 on elsewhere, run, earlier')\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", holder_code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(WriterBusy, match=r"another acker writer holds .*pid 1 on elsewhere"):
            jobs.tick(acker.spark, acker.config, 1)
        assert jobs.status(acker.spark, acker.config).epoch == 0
    finally:
        holder.communicate("", timeout=30)
    # The holder is gone, and with it the lock: the next writer goes ahead.
    assert [t.epoch for t in jobs.tick(acker.spark, acker.config, 1)] == [1]
    assert not Path(path).read_text(), "the lock file is emptied when released"


def test_a_lost_checkpoint_stops_the_run_instead_of_applying_events_twice(
    acker: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    acker.batch(init(A, E1, 0))
    acker.batch(ack(A, E1, 5), init(B, E2, 0))
    shutil.rmtree(acker.config.checkpoint_path)
    conf = write_conf(acker.config, tmp_path / "acker.toml")
    assert main(["run", "--conf", str(conf)]) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "older than the last committed batch 1" in error[0], error
    assert acker.pending_ids() == {B}
    acker.assert_outcomes(
        completed=[outcome(A, "acked", init_ms=0, first_ms=0, last_ms=5, events=2, batch=1)]
    )
