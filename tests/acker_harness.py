"""Test helpers: build events tersely, push them through the real pipeline, read the tables."""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import astuple
from datetime import datetime, timedelta
from pathlib import Path

from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pipelines import jobs
from pipelines.config import Config
from pipelines.sql import TABLES
from pipelines.tables import schema_location, table_location
from pipelines.workload import Event, new_id
from tests.model import Outcome

BASE_TIME = datetime(2026, 3, 1, 12, 0, 0)

OUTCOME_SCHEMA = T.StructType(
    [
        T.StructField("anchor_id", T.LongType()),
        T.StructField("spout_task", T.IntegerType()),
        T.StructField("source_msg_id", T.StringType()),
        T.StructField("reason", T.StringType()),
        T.StructField("init_time", T.TimestampType()),
        T.StructField("first_event_time", T.TimestampType()),
        T.StructField("last_event_time", T.TimestampType()),
        T.StructField("latency_ms", T.LongType()),
        T.StructField("event_count", T.LongType()),
        T.StructField("batch_id", T.LongType()),
        T.StructField("epoch", T.LongType()),
    ]
)


# Wall-clock columns: they differ between two runs that did the same work.
WALL_CLOCK_COLUMNS = {
    "completed": ["resolved_at"],
    "failed": ["resolved_at"],
    "expired": ["resolved_at"],
    "quarantine": ["quarantined_at"],
    "batches": ["started_at", "finished_at", "duration_ms"],
    "ticks": ["ticked_at"],
}


def write_conf(config: Config, path: Path) -> Path:
    """Write ``config`` as the TOML file the CLI reads with ``--conf``; return its path."""
    lines = ["[acker]"] + [f"{k} = {v!r}" for k, v in vars(config.acker).items()]
    lines += [
        "[warehouse]",
        f'path = "{config.warehouse.path}"',
        f'schema = "{config.warehouse.schema}"',
        "[maintain]",
        f"vacuum_retain_hours = {config.maintain.vacuum_retain_hours!r}",
        "[writer]",
        f"lease_s = {config.writer.lease_s!r}",
        f'lock_dir = "{config.writer.lock_dir}"',
        "[spark]",
        f'master = "{config.spark.master}"',
        "[spark.conf]",
    ]
    lines += [f'"{k}" = "{v}"' for k, v in config.spark.conf.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def free_port() -> int:
    """A TCP port of this machine that no one listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_cli(
    conf: Path, *argv: str, env: Mapping[str, str] | None = None, timeout: float = 900
) -> str:
    """Run one acker verb as its own process, as the console script would; assert it succeeded
    and return its stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", *argv, "--conf", str(conf)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def copy_warehouse(source: Config, destination: Config) -> None:
    """Copy ``source``'s warehouse folder to ``destination``'s, its schema's tables renamed to
    ``destination``'s schema (unattached)."""
    shutil.copytree(source.warehouse_path, destination.warehouse_path)
    (destination.warehouse_path / f"{source.warehouse.schema}.db").rename(
        schema_location(destination)
    )


def read_table(spark: SparkSession, config: Config, name: str) -> DataFrame:
    """A table of ``config``'s local warehouse, read by path, without its wall-clock columns."""
    df = spark.read.format("delta").load(str(table_location(config, name)))
    return df.drop(*WALL_CLOCK_COLUMNS.get(name, []))


def assert_same_tables(spark: SparkSession, config: Config, reference: Config) -> None:
    """Every table of two warehouses holds the same rows (wall-clock columns aside, and
    quarantine's ``source``, which names each warehouse's own schema)."""
    for name in TABLES:
        ignored = ["source"] if name == "quarantine" else []
        assert_df_equality(
            read_table(spark, config, name).drop(*ignored),
            read_table(spark, reference, name).drop(*ignored),
            ignore_row_order=True,
            ignore_nullable=True,
            ignore_metadata=True,
        )


def assert_resolved_once(spark: SparkSession, config: Config) -> None:
    """No anchor appears twice across completed, failed and expired."""
    ids = [
        row["anchor_id"]
        for name in ("completed", "failed", "expired")
        for row in read_table(spark, config, name).select("anchor_id").collect()
    ]
    assert len(ids) == len(set(ids)), "an anchor was resolved more than once"


def at(ms: int) -> datetime:
    """A timestamp ``ms`` milliseconds after the test's base time."""
    return BASE_TIME + timedelta(milliseconds=ms)


def init(anchor: int, value: int, ms: int = 0, task: int = 1, msg: str | None = None) -> Event:
    return Event(anchor, "init", value, task, msg or f"m{anchor}", "spout", at(ms), None)


def ack(anchor: int, value: int, ms: int = 0) -> Event:
    return Event(anchor, "ack", value, None, None, "bolt", at(ms), None)


def anchor(root: int, value: int, ms: int = 0) -> Event:
    return Event(root, "anchor", value, None, None, "bolt", at(ms), None)


def fail(anchor_id: int, ms: int = 0) -> Event:
    return Event(anchor_id, "fail", None, None, None, "bolt", at(ms), None)


def reset(anchor_id: int, ms: int = 0) -> Event:
    return Event(anchor_id, "reset", None, None, None, "bolt", at(ms), None)


def outcome(
    anchor_id: int,
    reason: str,
    *,
    init_ms: int | None,
    first_ms: int,
    last_ms: int,
    events: int,
    batch: int,
    epoch: int = 0,
    task: int | None = 1,
) -> Outcome:
    """An expected outcome row, written by hand."""
    return Outcome(
        anchor_id=anchor_id,
        spout_task=task if init_ms is not None else None,
        source_msg_id=f"m{anchor_id}" if init_ms is not None else None,
        reason=reason,
        init_time=at(init_ms) if init_ms is not None else None,
        first_event_time=at(first_ms),
        last_event_time=at(last_ms),
        latency_ms=last_ms - first_ms,
        event_count=events,
        batch_id=batch,
        epoch=epoch,
    )


class Harness:
    """One acker (config + tables) driven through the real CLI code path."""

    def __init__(self, spark: SparkSession, config: Config) -> None:
        self.spark = spark
        self.config = config

    def batch(self, *events: Event) -> jobs.RunReport:
        """Append the events to ack_events and run the stream over them (one micro-batch)."""
        jobs.append_events(self.spark, self.config, events)
        return jobs.run(self.spark, self.config)

    def tick(self, count: int = 1) -> None:
        """``acker tick count``: it and the next run take the position the last one recorded."""
        jobs.tick(self.spark, self.config, count)

    def table(self, name: str) -> DataFrame:
        return self.spark.table(self.config.qualified(name))

    def outcomes(self, name: str) -> DataFrame:
        return self.table(name).drop("resolved_at")

    def pending_ids(self) -> set[int]:
        """The trees still pending (rows of trees resolved by the last batch excluded)."""
        pending = self.table("pending").where("outcome is null").select("anchor_id")
        return {row["anchor_id"] for row in pending.collect()}

    def expected(self, rows: Iterable[Outcome]) -> DataFrame:
        return self.spark.createDataFrame([astuple(r) for r in rows], OUTCOME_SCHEMA)

    def assert_outcomes(
        self,
        completed: Sequence[Outcome] = (),
        failed: Sequence[Outcome] = (),
        expired: Sequence[Outcome] = (),
    ) -> None:
        """Compare all three outcome tables, whole, with the expected rows."""
        for name, rows in (("completed", completed), ("failed", failed), ("expired", expired)):
            assert_df_equality(
                self.outcomes(name),
                self.expected(rows),
                ignore_row_order=True,
                ignore_nullable=True,
                ignore_metadata=True,
            )


def append_micro_batch(spark: SparkSession, config: Config, events: Sequence[Event]) -> None:
    """Append as one Delta file, so the stream (one file per trigger) takes it as one batch."""
    df = spark.createDataFrame([e.row() for e in events], jobs.ACK_EVENTS_SCHEMA).coalesce(1)
    df.write.format("delta").mode("append").saveAsTable(config.qualified("ack_events"))


def generated_trees(seed: int, count: int, span_s: int) -> list[Event]:
    """Trees starting over ``span_s`` seconds, each with two acks up to 50 s after its init;
    some fail. With 20 s epochs and 2 buckets, the slow ones time out."""
    rng = random.Random(seed)
    events = []
    for _ in range(count):
        anchor_id, edges = new_id(rng), [new_id(rng), new_id(rng)]
        start = rng.randrange(span_s * 1000)
        events.append(init(anchor_id, edges[0] ^ edges[1], start))
        for edge in edges:
            events.append(ack(anchor_id, edge, start + rng.randrange(50_000)))
        if rng.random() < 0.1:
            events.append(fail(anchor_id, start + rng.randrange(20_000)))
    return events


def epoch_spanning_trees(seed: int, count: int, span_s: int, interval_s: int) -> list[Event]:
    """Trees starting over ``span_s`` seconds whose events spread over up to three epochs of
    ``interval_s``: some acks re-delivered an epoch or two later, resets and fails, inits after
    their first ack, acks that never come (the tree times out), and acks after the tree
    expired or resolved (late)."""
    rng = random.Random(seed)
    interval_ms = interval_s * 1000
    events = []
    for _ in range(count):
        anchor_id = new_id(rng)
        edges = [new_id(rng) for _ in range(rng.randrange(1, 4))]
        start = rng.randrange(span_s * 1000)
        init_ms = start + (interval_ms * 3 // 2 if rng.random() < 0.1 else 0)
        value = 0
        for edge in edges:
            value ^= edge
        events.append(init(anchor_id, value, init_ms))
        for number, edge in enumerate(edges):
            if number == 0 and rng.random() < 0.15:
                continue  # never acked: the tree times out, and a later ack is late
            ms = start + rng.randrange(3 * interval_ms)
            events.append(ack(anchor_id, edge, ms))
            if rng.random() < 0.15:
                events.append(
                    ack(anchor_id, edge, ms + rng.randrange(interval_ms, 2 * interval_ms))
                )
        if rng.random() < 0.1:
            events.append(reset(anchor_id, start + rng.randrange(2 * interval_ms)))
        if rng.random() < 0.1:
            events.append(fail(anchor_id, start + rng.randrange(3 * interval_ms)))
        if rng.random() < 0.1:
            events.append(ack(anchor_id, new_id(rng), start + rng.randrange(4, 6) * interval_ms))
    return events


def live_arrivals(events: list[Event], lateness_ms: int, seed: int) -> list[list[Event]]:
    """The events as a live run receives them: each arrives up to ``lateness_ms`` after its
    event time, and a micro-batch takes what arrived in each 30 s."""
    rng = random.Random(seed)
    arrivals: dict[int, list[Event]] = {}
    for event in events:
        assert event.event_time is not None
        arrival = event.event_time + timedelta(milliseconds=rng.randrange(lateness_ms + 1))
        arrivals.setdefault((arrival - at(0)) // timedelta(seconds=30), []).append(event)
    return [arrivals[window] for window in sorted(arrivals)]


def settled_table(acker: Harness, table: str) -> DataFrame:
    """A table without the columns that name micro-batches or stream batches, which a backfill
    numbers otherwise."""
    df = read_table(acker.spark, acker.config, table)
    if table == "pending":  # rows of trees resolved by the last micro-batch are kept until later
        df = df.where("outcome is null")
    return df.drop(
        "batch_id", "last_batch_id", "outcome_batch_id", "stream_batch_id", "prev", "applied_keys"
    )


def assert_same_settled_tables(acker: Harness, reference: Harness, tables: Sequence[str]) -> None:
    """Each of ``tables`` holds the same settled rows (:func:`settled_table`) in both ackers."""
    for table in tables:
        assert_df_equality(
            settled_table(acker, table),
            settled_table(reference, table),
            ignore_row_order=True,
            ignore_nullable=True,
            ignore_metadata=True,
        )
