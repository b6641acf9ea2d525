"""`acker run --continuous` as a real process: micro-batches as events arrive, ticks on the
processing-time clock while none arrive, one JSON line per batch and tick, and a clean stop on
SIGTERM that neither loses nor repeats an event. Under the event_time clock, the same run
leaves what a backfill of the same events leaves."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chispa import assert_df_equality
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pipelines import jobs
from pipelines.tables import create_tables
from tests.acker_harness import (
    Harness,
    ack,
    append_micro_batch,
    assert_resolved_once,
    assert_same_settled_tables,
    generated_trees,
    init,
    live_arrivals,
    outcome,
    write_conf,
)
from tests.conftest import make_config

A, B, C, D = 41, 42, 43, 44
E1, E2 = 0x1111222233334444, -0x0102030405060708
TICK_S = 4.0


class LoggedProcess:
    """The acker CLI in its own process, its stderr lines collected as they come."""

    def __init__(self, conf: Path, *argv: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pipelines.cli", *argv, "--conf", str(conf)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.records: list[dict[str, Any]] = []
        self.other_lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            try:
                self.records.append(json.loads(line))
            except json.JSONDecodeError:
                self.other_lines.append(line)

    def finish(self, timeout: float) -> str:
        """Wait for the process to exit and its stderr to be read to the end; return its stdout
        (a line or two). Not ``communicate``, which would read stderr beside the reader."""
        self.process.wait(timeout=timeout)
        self.reader.join(timeout=timeout)
        assert self.process.stdout is not None
        return self.process.stdout.read()

    def wait_for(self, what: str, test: Callable[[list[dict[str, Any]]], bool]) -> None:
        # A wait for a condition, not a timing: on two busy cores (another worker's processes
        # beside this one) the event_time run took over 300 s to apply 124 events.
        deadline = time.monotonic() + 900
        while not test(self.records):
            assert self.process.poll() is None, f"exited early: {self.other_lines[-20:]}"
            assert time.monotonic() < deadline, f"no {what} in {self.records}"
            time.sleep(0.5)


def batches(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["event"] == "batch"]


def ticks(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["event"] == "tick"]


def test_continuous_run_batches_ticks_and_stops_cleanly_on_sigterm(
    spark: SparkSession, tmp_path: Path
) -> None:
    config = make_config(
        tmp_path / "warehouse", clock="processing_time", tick_interval_s=TICK_S, buckets=2
    )
    create_tables(spark, config)
    acker = Harness(spark, config)
    conf = write_conf(config, tmp_path / "acker.toml")
    run = LoggedProcess(conf, "run", "--continuous", "--trigger-interval", "1", "--log-json")

    jobs.append_events(spark, config, [init(A, E1 ^ E2, 0), ack(A, E1, 5), ack(A, E2, 9)])
    jobs.append_events(spark, config, [init(B, E1, 20)])  # never acked: must time out
    run.wait_for("batch with A and B", lambda r: sum(b["events_in"] for b in batches(r)) == 4)

    # No event arrives now; the clock still ticks, and B expires after `buckets` ticks.
    run.wait_for("expiry of B", lambda r: any(t["expired_timeout"] == 1 for t in ticks(r)))
    assert len(ticks(run.records)) >= 2

    jobs.append_events(spark, config, [init(C, E1, 30), ack(C, E1, 31)])
    run.wait_for("batch with C", lambda r: sum(b["events_in"] for b in batches(r)) == 6)

    # D arrives just as the stop comes: it is applied by this run or left whole for the next.
    jobs.append_events(spark, config, [init(D, E2, 40), ack(D, E2, 44)])
    run.process.send_signal(signal.SIGTERM)
    out = run.finish(timeout=300)
    assert run.process.returncode == 0, run.other_lines[-20:]
    assert out.startswith("processed "), out

    record = batches(run.records)[0]
    assert {"batch_id", "events_in", "completed", "duration_ms", "epoch"} <= set(record)
    committed = acker.table("batches").where("status = 'committed'").count()
    assert committed == len(batches(run.records))

    applied_by_the_continuous_run = sum(b["events_in"] for b in batches(run.records))
    after = jobs.run(spark, config)
    assert after.events_in == 8 - applied_by_the_continuous_run
    assert acker.table("batches").where("status <> 'committed'").count() == 0
    expected = {
        "completed": [
            outcome(A, "acked", init_ms=0, first_ms=0, last_ms=9, events=3, batch=0),
            outcome(C, "acked", init_ms=30, first_ms=30, last_ms=31, events=2, batch=0),
            outcome(D, "acked", init_ms=40, first_ms=40, last_ms=44, events=2, batch=0),
        ],
        "expired": [outcome(B, "timeout", init_ms=20, first_ms=20, last_ms=20, events=1, batch=0)],
    }
    # which batch and epoch each tree resolved in depends on timing; everything else does not
    for table, rows in expected.items():
        assert_df_equality(
            acker.outcomes(table).drop("batch_id", "epoch"),
            acker.expected(rows).drop("batch_id", "epoch"),
            ignore_row_order=True,
            ignore_nullable=True,
            ignore_metadata=True,
        )
    assert acker.table("failed").count() == 0
    assert_resolved_once(spark, config)


def test_continuous_run_under_event_time_leaves_what_a_backfill_leaves(
    spark: SparkSession, tmp_path: Path
) -> None:
    semantics = {
        "clock": "event_time",
        "tick_interval_s": 20.0,
        "buckets": 2,
        "allowed_lateness_s": 15.0,
        "max_files_per_batch": 1,  # one stream batch per arrival, as a live run would see them
    }
    events = generated_trees(seed=3, count=40, span_s=60)
    backfill = Harness(spark, make_config(tmp_path / "backfill" / "warehouse", **semantics))
    create_tables(spark, backfill.config)
    append_micro_batch(spark, backfill.config, events)
    jobs.run(spark, backfill.config)
    status = jobs.status(spark, backfill.config)
    assert min(status.completed, status.failed, status.expired) > 0 and status.epoch >= 3
    applied = backfill.table("batches").agg(F.sum("events_in")).first()
    assert applied is not None and applied[0] > 0

    live = Harness(spark, make_config(tmp_path / "live" / "warehouse", **semantics))
    create_tables(spark, live.config)
    conf = write_conf(live.config, tmp_path / "acker.toml")
    run = LoggedProcess(conf, "run", "--continuous", "--trigger-interval", "1", "--log-json")
    arrivals = live_arrivals(events, lateness_ms=15_000, seed=4)
    assert len(arrivals) >= 4
    for arrival in arrivals:
        append_micro_batch(spark, live.config, arrival)
    run.wait_for(
        f"{applied[0]} events applied and epoch {status.epoch}",
        lambda r: (
            sum(b["events_in"] for b in batches(r)) == applied[0]
            and max((t["epoch"] for t in ticks(r)), default=0) == status.epoch
        ),
    )
    run.process.send_signal(signal.SIGTERM)
    run.finish(timeout=300)
    assert run.process.returncode == 0, run.other_lines[-20:]

    tables = ["completed", "failed", "expired", "late_events", "pending", "ticks", "held_events"]
    assert_same_settled_tables(live, backfill, tables)
