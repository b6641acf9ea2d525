"""Jobs beyond a single batch: the clocks that drive `acker run`, and the demo workload."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from pipelines import jobs
from pipelines.errors import CheckpointMismatch
from pipelines.jobs import _refusal_in
from pipelines.workload import WorkloadSpec
from tests.acker_harness import Harness, ack, init


def test_manual_clock_never_ticks_on_run(acker: Harness) -> None:
    report = acker.batch(init(1, 5, 0), ack(2, 7, 90_000_000))
    assert report.ticks == []
    assert jobs.status(acker.spark, acker.config).epoch == 0


def test_processing_time_clock_owes_one_tick_per_interval(acker_factory) -> None:  # type: ignore[no-untyped-def]
    acker: Harness = acker_factory(clock="processing_time", tick_interval_s=3600.0)
    assert acker.batch(init(1, 5, 0)).ticks == [], "less than an interval has passed"
    started = acker.table("batches").agg(F.min("started_at")).first()[0]  # type: ignore[index]
    later = started + timedelta(seconds=2.5 * 3600)
    assert jobs.due_ticks(acker.spark, acker.config, now=later) == 2


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
