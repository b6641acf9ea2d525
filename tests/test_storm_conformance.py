"""The acker against Storm itself: what Storm 2.8.3's acker executed, recorded by the task hook
(clients/storm-hook) from real topologies in LocalCluster, replayed tick-exact, must end every
spout message as Storm's spout was told, and every tree as Storm's acker decided (see
tests/storm_conformance.py for the rule)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession

from pipelines.ingest import ingest
from tests.acker_harness import Harness
from tests.storm_conformance import (
    RECORDED,
    SCENARIOS,
    STORM_ACKER_SETTINGS,
    STORM_SPOUT_SETTINGS,
    Capture,
    as_event,
    build_hook,
    read_capture,
    run_topology,
    side_by_side,
    storm_acker_verdicts,
    storm_verdicts,
)

Verdicts = Callable[[Capture], dict[str, str]]


def replay(acker: Harness, captures: dict[str, Capture]) -> None:
    """Each micro-batch appended and run, with one `acker tick` between them."""
    batches = side_by_side(captures)
    for number, batch in enumerate(batches):
        if batch:
            acker.batch(*(as_event(fields) for fields in batch))
        if number < len(batches) - 1:
            acker.tick()


OUTCOME_TABLES = ("completed", "failed", "expired")


def acker_verdicts(acker: Harness) -> DataFrame:
    """Each spout message's outcome, in Storm's words."""
    completed, failed, expired = (acker.config.qualified(t) for t in OUTCOME_TABLES)
    return acker.spark.sql(
        f"""
        select source_msg_id as msg_id, 'completed' as verdict from {completed}
        union all
        select source_msg_id, 'failed' from {failed}
        union all
        select source_msg_id, 'timeout' from {expired} where source_msg_id is not null
        """
    )


def storm_said(
    spark: SparkSession, captures: dict[str, Capture], verdicts: Verdicts = storm_verdicts
) -> DataFrame:
    rows = [
        (f"{name}/{message}", verdict)
        for name, capture in captures.items()
        for message, verdict in verdicts(capture).items()
    ]
    return spark.createDataFrame(rows, "msg_id string, verdict string")


def assert_agrees_with_storm(
    acker: Harness, captures: dict[str, Capture], verdicts: Verdicts = storm_verdicts
) -> None:
    storm = storm_said(acker.spark, captures, verdicts)
    assert_df_equality(
        acker_verdicts(acker).join(storm.select("msg_id"), "msg_id", "left_semi"),
        storm,
        ignore_row_order=True,
        ignore_nullable=True,
        ignore_metadata=True,
    )


@pytest.mark.parametrize(
    ("settings", "verdicts"),
    [(STORM_SPOUT_SETTINGS, storm_verdicts), (STORM_ACKER_SETTINGS, storm_acker_verdicts)],
    ids=["as-its-spout-was-told", "as-its-acker-decided"],
)
def test_the_recorded_captures_end_every_tree_as_storm_did(
    settings: dict[str, object],
    verdicts: Verdicts,
    acker_factory,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """With the spout's two buckets, as the spout was told; with the acker's three (the
    default), as Storm's acker itself decided, a timeout being an entry it dropped."""
    captures = {name: read_capture(RECORDED / name) for name in SCENARIOS}
    acker = acker_factory(**settings)
    replay(acker, captures)
    assert_agrees_with_storm(acker, captures, verdicts)


def assert_a_dead_workers_file_is_published_whole(classpath: str, folder: Path) -> None:
    """What an acker task that starts again does with the hidden file a dead worker left."""
    folder.mkdir()
    whole = '{"anchor_id": 1, "event_type": "ack", "xor_value": 5}\n' * 2
    hidden = folder / ".ack-events-t-task1-20260101T000000000-1.jsonl.inprogress"
    hidden.write_text(whole + '{"anchor_id": 1, "event_ty')
    java = ["java", "-cp", classpath, "org.batchacker.storm.PublishLeftovers"]
    subprocess.run([*java, str(folder), "ack-events-t-task1"], check=True)
    assert [p.name for p in folder.iterdir()] == ["ack-events-t-task1-20260101T000000000-1.jsonl"]
    assert (folder / "ack-events-t-task1-20260101T000000000-1.jsonl").read_text() == whole


def test_a_live_topology_with_the_hook_ends_every_tree_as_storm_did(
    acker_factory,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    """The hook as a user builds it: first what it does with a dead worker's file, then a
    topology it watches for 20 s."""
    folder = tmp_path / "hook"
    classpath = build_hook()
    assert_a_dead_workers_file_is_published_whole(classpath, tmp_path / "left")
    run_topology(classpath, "parallel", folder, messages=200, emit_seconds=6, timeout_s=3, seed=99)
    captures = {"live": read_capture(folder)}
    assert len(captures["live"].spout) == 200  # every message had its callback

    as_written = acker_factory()
    report = ingest(as_written.spark, as_written.config, [folder])
    assert (report.accepted, report.quarantined) == (len(captures["live"].rows), 0)

    acker = acker_factory(**STORM_SPOUT_SETTINGS)
    replay(acker, captures)
    assert_agrees_with_storm(acker, captures)
