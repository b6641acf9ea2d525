"""The analyst views over one hand-written history, each compared whole with rows written by
hand, and the reference page compared with the one rendered from the DDL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession

from pipelines import jobs
from pipelines.cli import main
from pipelines.reference import render_reference
from pipelines.sql import TABLES, VIEWS
from pipelines.tables import create_tables
from pipelines.workload import Event
from tests.acker_harness import BASE_TIME, Harness, ack, at, fail, init, write_conf
from tests.conftest import make_config

A, B, C, D, E, F, G, H = 11, 12, 13, 14, 15, 16, 17, 18
E1, E2, E3, E4 = 0x1F2E3D4C5B6A7988, -0x0123456789ABCDEF, 0x7777000011112222, -0x5A5A5A5A5A5A5A5A
HOUR_MS = 3_600_000
HOUR_12 = BASE_TIME
HOUR_13 = BASE_TIME + timedelta(hours=1)
REFERENCE_PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference.md"


@pytest.fixture(scope="module")
def history(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Batch 0, a tick, batch 1, a look at stuck_trees, a tick (buckets 2, max_pending 3).

    Hour 12: A, B complete (task 1), A with a duplicate ack and a late one; C fails (task 2),
    with a late fail; E is never fully acked and expires (task 1); F has no init and expires.
    Hour 13, in batch 1: D completes (task 2); H stays pending (task 2); G is the newest of the
    new trees that would take pending past 3, so it overflows (task 3).
    """
    config = make_config(tmp_path_factory.mktemp("views"), buckets=2, max_pending=3)
    create_tables(spark, config)
    acker = Harness(spark, config)
    acker.batch(
        init(A, E1 ^ E2, 0, task=1),
        ack(A, E1, 100),
        ack(A, E1, 150),
        ack(A, E2, 300),
        init(B, E1, 1000, task=1),
        ack(B, E1, 1400),
        init(C, E1 ^ E2, 2000, task=2),
        ack(C, E1, 2100),
        fail(C, 2200),
        init(E, E1 ^ E3, 500, task=1),
        ack(E, E1, 600),
        ack(F, E2, 700),
    )
    acker.tick()
    acker.batch(
        init(D, E3, HOUR_MS, task=2),
        ack(D, E3, HOUR_MS + 50),
        init(H, E4, HOUR_MS + 100, task=2),
        init(G, E3, HOUR_MS + 200, task=3),
        ack(A, E2, 5000),
        fail(C, 5100),
    )
    stuck_at_epoch_1 = acker.table("stuck_trees").collect()
    acker.tick()
    yield acker, stuck_at_epoch_1


def rows(spark: SparkSession, like: DataFrame, *values: tuple[object, ...]) -> DataFrame:
    return spark.createDataFrame(list(values), like.schema)


def assert_view(actual: DataFrame, expected: DataFrame, *, ordered: bool = False) -> None:
    assert_df_equality(
        actual,
        expected,
        ignore_row_order=not ordered,
        ignore_nullable=True,
        ignore_metadata=True,
    )


def test_outcome_summary_counts_everything_against_the_trees_spout(history: Any) -> None:
    acker, _ = history
    summary = acker.table("outcome_summary")
    expected = rows(
        acker.spark,
        summary,
        # hour, task, component, completed, failed, expired, overflowed, late, duplicates
        (HOUR_12, None, None, 0, 0, 1, 0, 0, 0),
        (HOUR_12, 1, "spout", 2, 0, 1, 0, 1, 1),
        (HOUR_12, 2, "spout", 0, 1, 0, 0, 1, 0),
        (HOUR_13, 2, "spout", 1, 0, 0, 0, 0, 0),
        (HOUR_13, 3, "spout", 0, 1, 0, 1, 0, 0),
    )
    assert_view(summary, expected, ordered=True)


def test_latency_percentiles_per_spout_task_and_hour(history: Any) -> None:
    acker, _ = history
    latency = acker.table("latency")
    expected = rows(
        acker.spark,
        latency,
        # hour, task, trees, p50, p90, p99, max: A took 300 ms, B 400 ms, D 50 ms
        (HOUR_12, 1, 2, 300, 400, 400, 400),
        (HOUR_13, 2, 1, 50, 50, 50, 50),
    )
    assert_view(latency, expected, ordered=True)


def test_stuck_trees_oldest_first_then_only_the_survivor(history: Any) -> None:
    acker, stuck_at_epoch_1 = history
    columns = ["anchor_id", "age_epochs", "epoch", "has_init", "fail_seen", "event_count"]
    earlier = [tuple(row[c] for c in columns) for row in stuck_at_epoch_1]
    # E and F were stamped at epoch 0, H at epoch 1; E's first event (500 ms) precedes F's
    assert earlier == [
        (E, 1, 0, True, False, 2),
        (F, 1, 0, False, False, 1),
        (H, 0, 1, True, False, 1),
    ]
    stuck = acker.table("stuck_trees")
    expected = rows(
        acker.spark,
        stuck,
        (H, 1, 1, True, False, 2, f"m{H}", E4, 1, at(HOUR_MS + 100), at(HOUR_MS + 100)),
    )
    assert_view(stuck, expected, ordered=True)


def test_replay_queue_lists_what_spouts_must_re_emit_newest_first(history: Any) -> None:
    acker, _ = history
    queue = acker.table("replay_queue").drop("resolved_at")
    expected = rows(
        acker.spark,
        queue,
        # E expired at the second tick, G overflowed in batch 1, C failed in batch 0;
        # F is left out: it had no init, so no spout waits for it
        (1, f"m{E}", E, "expired", "timeout", at(500), 1, 2),
        (3, f"m{G}", G, "failed", "overflow", at(HOUR_MS + 200), 1, 1),
        (2, f"m{C}", C, "failed", "fail", at(2000), 0, 0),
    )
    assert_view(queue, expected, ordered=True)


def test_replay_queue_lists_a_tree_whose_init_came_after_it_expired(acker: Harness) -> None:
    acker.batch(ack(A, E1, 0))
    acker.tick(3)  # A expires with reason no_init: no spout is known to wait for it yet
    assert acker.table("replay_queue").count() == 0
    acker.batch(init(A, E1 ^ E2, 100, task=4), ack(B, E3, 200))
    queue = acker.table("replay_queue").drop("resolved_at")
    expected = rows(acker.spark, queue, (4, f"m{A}", A, "expired", "no_init", at(100), 0, 3))
    assert_view(queue, expected)


def test_tree_events_show_the_running_checksum_and_redeliveries(history: Any) -> None:
    acker, _ = history
    events = (
        acker.table("tree_events")
        .where(f"anchor_id in ({A}, {C})")
        .select(
            "anchor_id",
            "event_seq",
            "event_time",
            "event_type",
            "xor_value",
            "is_redelivery",
            "running_checksum",
            "outcome",
            "outcome_reason",
        )
        .orderBy("anchor_id", "event_seq")
    )
    done, failed = ("completed", "acked"), ("failed", "fail")
    expected = rows(
        acker.spark,
        events,
        (A, 1, at(0), "init", E1 ^ E2, False, E1 ^ E2, *done),
        (A, 2, at(100), "ack", E1, False, E2, *done),
        (A, 3, at(150), "ack", E1, True, E2, *done),
        (A, 4, at(300), "ack", E2, False, 0, *done),
        (A, 5, at(5000), "ack", E2, True, 0, *done),
        (C, 1, at(2000), "init", E1 ^ E2, False, E1 ^ E2, *failed),
        (C, 2, at(2100), "ack", E1, False, E2, *failed),
        (C, 3, at(2200), "fail", None, False, E2, *failed),
        (C, 4, at(5100), "fail", None, False, E2, *failed),
    )
    assert_view(events, expected, ordered=True)


def test_pending_history_rebuilds_the_pending_size_per_epoch(history: Any) -> None:
    acker, _ = history
    pending = acker.table("pending_history")
    expected = rows(
        acker.spark,
        pending,
        # epoch, batches, admitted, resolved, expired timeout, expired no_init, late no_init,
        # pending at end
        (0, 1, 2, 0, 0, 0, 0, 2),  # E and F wait
        (1, 1, 1, 0, 0, 0, 0, 3),  # H joins; D resolves inside its batch, G overflows
        (2, 0, 0, 0, 1, 1, 0, 1),  # the tick expires E (timeout) and F (no_init)
    )
    assert_view(pending, expected, ordered=True)


def test_status_headline_names_latency_replay_queue_and_oldest_pending(
    history: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    acker, _ = history
    status = jobs.status(acker.spark, acker.config)
    # completed latencies 50, 300 and 400 ms; E, G and C to replay; H stamped one epoch ago
    assert (status.latency_p50_ms, status.latency_p99_ms) == (300, 400)
    assert (status.replay_queue, status.oldest_pending_epochs) == (3, 1)
    assert main(["status", "--conf", str(write_conf(acker.config, tmp_path / "acker.toml"))]) == 0
    printed = capsys.readouterr().out
    assert "  replay queue 3 trees (select * from replay_queue)\n" in printed
    assert "  latency p50 300 ms, p99 400 ms (select * from latency)\n" in printed
    assert "  oldest pending tree 1 epoch old (select * from stuck_trees)\n" in printed


def test_documented_invariants_hold_on_the_history(history: Any) -> None:
    acker, _ = history
    assert [row["epoch"] for row in acker.table("ticks").orderBy("epoch").collect()] == [1, 2]
    late = acker.table("late_events").collect()
    resolved = {row["anchor_id"]: row for row in acker.table("outcomes").collect()}
    assert sorted(row["anchor_id"] for row in late) == [A, C]
    assert all(row["outcome_batch_id"] <= row["batch_id"] for row in late)
    assert all(row["outcome"] == resolved[row["anchor_id"]]["outcome"] for row in late)
    summary = acker.table("outcome_summary").agg({"late_events": "sum"}).first()
    assert summary is not None and summary[0] == len(late)


def test_reference_page_matches_the_ddl(history: Any) -> None:
    acker, _ = history
    rendered = render_reference(acker.spark, acker.config)
    assert REFERENCE_PAGE.read_text(encoding="utf-8") == rendered, (
        "docs/reference.md is out of date with the DDL in acker_sql/: run ./dev docs"
    )


def test_every_column_of_every_table_and_view_is_documented(history: Any) -> None:
    acker, _ = history
    for name in [*TABLES, *VIEWS]:
        undocumented = [
            f.name for f in acker.table(name).schema.fields if not f.metadata.get("comment")
        ]
        assert undocumented == [], f"{name} has columns without a comment: {undocumented}"


def test_the_views_leave_out_exactly_the_rows_the_acker_quarantines(acker: Harness) -> None:
    """One input contract (input_contract.sql) for the acker and the views: a row the acker
    quarantines is in no tree's events and counts toward no tree in outcome_summary."""
    t = at(10)
    broken = [
        Event(None, "ack", E1, None, None, "bolt", t, "null anchor"),
        Event(0, "ack", E1, None, None, "bolt", t, "zero anchor"),
        Event(B, "bogus", E1, None, None, "bolt", t, "unknown type"),
        Event(B, "init", None, 1, "m", "spout", t, "init without value"),
        Event(B, "ack", 0, None, None, "bolt", t, "zero ack"),
        Event(B, "init", E1, None, "m", "spout", t, "init without spout task"),
        Event(B, "ack", E2, None, None, "bolt", None, "no event time"),
    ]
    acker.batch(init(A, E1 ^ E2, 0), ack(A, E1, 20), ack(A, E1, 30), ack(A, E2, 40), *broken)
    assert acker.table("quarantine").count() == len(broken)
    events = acker.table("tree_events").select("anchor_id", "event_type", "xor_value")
    assert sorted(tuple(r) for r in events.collect()) == sorted(
        [(A, "init", E1 ^ E2), (A, "ack", E1), (A, "ack", E1), (A, "ack", E2)]
    )
    summary = acker.table("outcome_summary").select(
        "spout_task", "completed", "failed", "expired", "late_events", "duplicate_events"
    )
    assert [tuple(r) for r in summary.collect()] == [(1, 1, 0, 0, 0, 1)]
