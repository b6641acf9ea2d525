"""Benchmarks of the acker's micro-batch, on this machine, in one run.

Run ``./dev bench`` (the default sizes, about 25 minutes on 2 cores) or ``./dev bench --quick``
(tiny sizes, to check that every measurement runs). Figures are printed as a table and saved as
JSON and a PNG chart in ``--out`` (default ``benchmarks/results``).

Events come from the project's workload simulator (Storm protocol, about 5 events per tree):
batches up to 10^5 events are simulated directly; larger ones repeat a simulated template with
fresh anchor ids, so every copy is a distinct, equally realistic set of tuple trees. Pending
trees are seeded straight into the ``pending`` table, and a fifth of each batch's trees continue
one of them (so the MERGE updates rows, not only inserts and deletes). Each micro-batch is
applied by :class:`pipelines.jobs.BatchApplier`, exactly as ``acker run``'s stream applies it.

Beside a micro-batch, the Delta floor of a batch of the same size over the same ``pending``:
the Delta work the required shape cannot do without, and nothing else (read the touched rows of
``pending``, MERGE a row back for each, append to three tables). No micro-batch of that shape
can cost less; a target below it is out of reach whatever the acker's own logic costs.

Measurements (issue targets in brackets):

1. end-to-end events/s of a micro-batch over a large pending table
2. dedup floor ratio: micro-batch time / the dedup floor, the least the duplicate rule costs
   (one row per anchor, type and value, then ``bit_xor`` and the sorted key set per anchor, to
   Parquet), largest batch  [<= 2]; the bare ``bit_xor`` GROUP BY floor beside it, and the least
   ratio the shape allows, (dedup floor + Delta floor) / dedup floor
3. state scaling: one batch size against growing pending tables, largest / smallest  [<= 1.5]
4. small-batch latency: median and p95 of small micro-batches over the large pending table
   [median <= 4 s], and median over the smallest scaling table  [<= 2.5 s]; the Delta commits
   of one, per table, from the tables' logs  [<= 4]
5. state size: bytes on disk per pending tree once ``acker maintain`` compacted it, against the
   information it must hold, 8 bytes x (2 + applied keys)  [<= 1.15]
6. peer: the same core logic in DuckDB on the same Parquet events, as a ratio to ours
7. overdue ticks: 100 ticks in one call against one tick, over the same pending table  [<= 2]
8. ingest log: one more file's idempotent append to ``ack_events`` whose log holds the
   transaction ids of 10^4 ingested files, against the same log once the idempotency window
   has dropped them
9. hot tree: one tree of 10^6 events (an init and an ack per edge) in one micro-batch, and
   spread over ten, each checked against the keys the tree already holds  [slowest <= 2 x fastest]
10. backfill: a day (10^6 events, 2,880 epochs of 30 s) and a week (7 x 10^6 events, 20,160
    epochs) of events under the event_time clock, on a fresh warehouse, as one ``acker run``
    [<= 2 min and <= 10 min]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from benchmarks.command_line import (
    DEFAULT_COMMAND_LINE,
    QUICK_COMMAND_LINE,
    measure_command_line,
)
from benchmarks.copies import copied, nonzero
from pipelines import jobs
from pipelines.config import Config, parse_config
from pipelines.engine import BROADCAST_MERGE_ROWS, BatchResult, append_idempotent
from pipelines.ingest import ACK_EVENTS_SCHEMA
from pipelines.session import INTERPRETED_QUERIES, build_session
from pipelines.sql import TABLES, quoted_table
from pipelines.tables import IDEMPOTENCY_WINDOW_PROPERTY, create_tables, table_location
from pipelines.workload import WorkloadSpec, generate_workload

TEMPLATE_EVENTS = 100_000
EVENTS_PER_TREE = 5  # what the simulator makes with max_fanout=3, max_depth=2, Storm protocol
# Trees of a batch that continue a tree already pending (their events land on a seeded row, so
# the MERGE updates rows as well as inserting and deleting them): an assumption, about a batch
# interval a few times a tree's lifetime.
CONTINUED_PERCENT = 20


@dataclass(frozen=True)
class Sizes:
    """How big each measurement is."""

    batch_events: tuple[int, ...]
    main_pending: int
    scaling_batch: int
    scaling_pending: tuple[int, ...]
    small_batch: int
    small_runs: int
    scaling_runs: int
    tick_pending: int
    overdue_ticks: int
    ingested_files: int
    hot_tree_events: int
    hot_tree_batches: int
    backfills: tuple[tuple[int, int], ...]
    """(hours, events) of each event_time backfill."""


DEFAULT_SIZES = Sizes(
    batch_events=(10**5, 10**6, 10**7),
    main_pending=10**7,
    scaling_batch=10**6,
    scaling_pending=(10**6, 5 * 10**6, 2 * 10**7),
    small_batch=10**4,
    small_runs=10,
    scaling_runs=3,
    tick_pending=10**6,
    overdue_ticks=100,
    ingested_files=10**4,
    hot_tree_events=10**6,
    hot_tree_batches=10,
    backfills=((24, 10**6), (7 * 24, 7 * 10**6)),
)
QUICK_SIZES = Sizes(
    batch_events=(10**3,),
    main_pending=10**4,
    scaling_batch=10**3,
    scaling_pending=(2 * 10**3, 5 * 10**3),
    small_batch=10**3,
    small_runs=1,
    scaling_runs=1,
    tick_pending=10**3,
    overdue_ticks=100,
    ingested_files=200,
    hot_tree_events=10**4,
    hot_tree_batches=3,
    backfills=((2, 2 * 10**3),),
)


@dataclass
class Figures:
    """Everything one run measured; saved as JSON."""

    started_at: str
    machine: dict[str, Any]
    sizes: dict[str, Any]
    end_to_end: list[dict[str, Any]] = field(default_factory=list)
    state_scaling: list[dict[str, Any]] = field(default_factory=list)
    small_batches: dict[str, Any] = field(default_factory=dict)
    small_batches_less_state: dict[str, Any] = field(default_factory=dict)
    state_size: dict[str, Any] = field(default_factory=dict)
    ticks: dict[str, Any] = field(default_factory=dict)
    ingest_log: dict[str, Any] = field(default_factory=dict)
    hot_tree: dict[str, Any] = field(default_factory=dict)
    backfills: list[dict[str, Any]] = field(default_factory=list)
    command_line: dict[str, Any] = field(default_factory=dict)
    targets: list[dict[str, Any]] = field(default_factory=list)


def log(message: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", file=sys.stderr, flush=True)


@contextmanager
def stopwatch() -> Iterator[Callable[[], float]]:
    """Measure the block's wall time; call the yielded function afterwards for seconds."""
    started = time.perf_counter()
    elapsed: list[float] = []
    yield lambda: elapsed[0]
    elapsed.append(time.perf_counter() - started)


class Bench:
    """One warehouse, one Spark session, one DuckDB database, and the event sets."""

    def __init__(self, spark: SparkSession, root: Path) -> None:
        self.spark = spark
        self.root = root
        self.events_dir = root / "events"
        self.schemas = 0
        # Seeded trees not yet continued by any event set: each set continues trees of its own,
        # so no batch sends events to a seeded tree an earlier batch resolved (those would be
        # late events for the acker, which the peer has no tombstones to tell).
        self.unused_seeded = 0
        self.appliers: dict[str, jobs.BatchApplier] = {}
        self.duck = duckdb.connect(str(root / "peer.duckdb"))
        self.duck.execute("set threads = 2")

    # --- events -------------------------------------------------------------------------

    def simulate(self, events: int, seed: int) -> Path:
        """Simulated events (Storm protocol) written as one Parquet file, once per size and
        seed (the template of the large batches is asked for again by each of them)."""
        path = self.events_dir / f"simulated-{events}-{seed}"
        if (path / "part-0.parquet").exists():
            return path
        spec = WorkloadSpec(
            trees=max(1, events // EVENTS_PER_TREE),
            batches=1,
            max_fanout=3,
            max_depth=2,
            fsshelter_share=0.0,
            seed=seed,
        )
        rows = [event.row() for event in generate_workload(spec)]
        columns = list(zip(*rows, strict=True))
        schema = to_arrow_schema(ACK_EVENTS_SCHEMA, timezone="UTC")
        table = pa.table([pa.array(column) for column in columns], names=schema.names)
        table = table.cast(schema)
        path.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path / "part-0.parquet")
        return path

    def events(self, events: int, seed: int) -> tuple[Path, int]:
        """A Parquet folder of about ``events`` events, :data:`CONTINUED_PERCENT` of whose trees
        continue a seeded pending tree; return it and its exact row count."""
        if events <= TEMPLATE_EVENTS:
            simulated = self.spark.read.parquet(str(self.simulate(events, seed)))
        else:
            template = self.spark.read.parquet(str(self.simulate(TEMPLATE_EVENTS, seed=0)))
            simulated = copied(template, math.ceil(events / template.count()), seed)
        continued = F.pmod(F.xxhash64("anchor_id", F.lit("continued")), F.lit(100))
        trees = max(1, events // EVENTS_PER_TREE)
        seeded_index = self.unused_seeded + F.pmod(F.xxhash64("anchor_id", F.lit(seed)), trees)
        self.unused_seeded += trees
        path = self.events_dir / f"events-{events}-{seed}"
        simulated.withColumn(
            "anchor_id",
            F.when(
                (F.col("anchor_id") != 0) & (continued < CONTINUED_PERCENT),
                seeded_anchor_id(seeded_index.cast("bigint")),
            ).otherwise(F.col("anchor_id")),
        ).write.mode("overwrite").parquet(str(path))
        return path, self.spark.read.parquet(str(path)).count()

    # --- the acker --------------------------------------------------------------------

    def new_acker(self, pending: int, buckets: int = 3, **settings: Any) -> Config:
        """A fresh schema in the warehouse with ``pending`` trees waiting for their acks, and
        any further ``[acker]`` settings."""
        self.schemas += 1
        config = parse_config(
            {
                # far above any seeded state: the capacity guard must not fail new trees here
                "acker": {
                    "max_pending": 10**9,
                    "buckets": buckets,
                    **settings,
                },
                "warehouse": {"path": str(self.root / "warehouse"), "schema": f"b{self.schemas}"},
                "spark": {"conf": dict(BENCH_SPARK_CONF)},
            }
        )
        create_tables(self.spark, config)
        with stopwatch() as took:
            self.spark.range(pending).select(
                seeded_anchor_id(F.col("id")).alias("anchor_id"), "id"
            ).selectExpr(
                "anchor_id",
                "xxhash64(id, 'checksum') as checksum",
                "true as has_init",
                "false as failed",
                "cast(id % 4 as int) as spout_task",
                "concat('seed-', id) as source_msg_id",
                "timestamp'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id % 600)"
                " as init_time",
                "timestamp'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id % 600)"
                " as first_event_time",
                "timestamp'2026-01-01 00:00:01' + make_interval(0, 0, 0, 0, 0, 0, id % 600)"
                " as last_event_time",
                "3L as event_count",
                "0L as epoch",
                "array(xxhash64(id, 'k1'), xxhash64(id, 'k2'), xxhash64(id, 'k3')) as applied_keys",
                "-1L as batch_id",
                "cast(null as string) as outcome",
                "cast(null as struct<checksum: bigint, has_init: boolean, failed: boolean,"
                " spout_task: int, source_msg_id: string, init_time: timestamp,"
                " first_event_time: timestamp, last_event_time: timestamp, event_count: bigint,"
                " epoch: bigint, applied_keys: array<bigint>>) as prev",
            ).write.format("delta").mode("append").saveAsTable(config.qualified("pending"))
        log(
            f"seeded {pending:,} pending trees into {config.qualified('pending')} in {took():.1f} s"
        )
        return config

    def micro_batch(self, config: Config, events: Path, batch_id: int) -> tuple[float, BatchResult]:
        """Apply one micro-batch as ``acker run``'s stream does (the position carried over from
        the schema's previous batch); return its wall time and result."""
        batch = self.spark.read.parquet(str(events))
        applier = self.appliers.setdefault(config.warehouse.schema, jobs.BatchApplier(config))
        with stopwatch() as took:
            result = applier.apply(batch, batch_id)
        assert result is not None and result.events_in, f"batch {batch_id} applied nothing"
        return took(), result

    def table_versions(self, config: Config) -> dict[str, int]:
        """Each acker table's latest Delta version, from its log."""
        versions = {}
        for table in TABLES:
            latest = self.spark.sql(f"describe history {quoted_table(config, table)} limit 1")
            row = latest.first()
            assert row is not None, f"{table} has no history"
            versions[table] = int(row["version"])
        return versions

    def last_merge(self, config: Config) -> dict[str, int]:
        """How many rows of ``pending`` the last MERGE updated, inserted and deleted."""
        history = self.spark.sql(f"describe history {config.qualified('pending')}")
        metrics = history.where("operation = 'MERGE'").orderBy(F.desc("version")).first()
        assert metrics is not None, "no MERGE into pending yet"
        return {
            f"merge_{name}": int(metrics["operationMetrics"][f"numTargetRows{name.title()}"])
            for name in ("updated", "inserted", "deleted")
        }

    def floor(self, events: Path) -> float:
        """The bare aggregate: ``bit_xor`` per anchor of the same events, written to Parquet."""
        return self.time_to_parquet(
            self.spark.read.parquet(str(events))
            .groupBy("anchor_id")
            .agg(F.bit_xor("xor_value").alias("checksum")),
            "floor",
        )

    def dedup_floor(self, events: Path) -> float:
        """The bare aggregate with the duplicate rule: one row per (anchor, type, value), then
        ``bit_xor`` and the sorted set of event keys per anchor, written to Parquet. No acker
        can drop re-deliveries for less: every event must meet its tree's other events."""
        return self.time_to_parquet(
            self.spark.read.parquet(str(events))
            .select("anchor_id", "event_type", "xor_value")
            .distinct()
            .groupBy("anchor_id")
            .agg(
                F.bit_xor("xor_value").alias("checksum"),
                F.array_sort(F.collect_set(F.xxhash64("event_type", "xor_value"))).alias("keys"),
            ),
            "dedup_floor",
        )

    def floor_anchors(self, trees: int) -> DataFrame:
        """``trees`` distinct anchor ids, as a batch of about ``EVENTS_PER_TREE * trees`` events
        holds, :data:`CONTINUED_PERCENT` of them seeded trees no earlier set continued."""
        index = F.col("id")
        continued = F.pmod(index, F.lit(100)) < CONTINUED_PERCENT
        anchors = self.spark.range(trees).select(
            F.when(continued, seeded_anchor_id(index + F.lit(self.unused_seeded)))
            .otherwise(nonzero(F.xxhash64(index, F.lit("floor"), F.lit(self.unused_seeded))))
            .alias("anchor_id")
        )
        self.unused_seeded += trees
        return anchors.localCheckpoint()

    def delta_floor(self, config: Config, anchors: DataFrame) -> dict[str, float]:
        """The Delta work a micro-batch over ``anchors`` cannot do without, and nothing else:
        read the rows of ``pending`` they touch, MERGE a row back for each, and append to
        three tables (for ``completed``, ``failed`` and the batch log). No classifying, no
        fold, no duplicate rule, no outcome selection, no crash safety. It runs on a shallow
        clone of ``pending`` made just before, so the acker's own table keeps its files for
        the measurements after. The clone's snapshot is computed before the clock starts,
        where a micro-batch rebuilds the one its last MERGE wrote: if anything, the floor
        comes out low. Return each part's seconds and their sum."""
        schema = config.warehouse.schema
        outputs = {name: f"{schema}.floor_{name}" for name in ("completed", "failed", "batches")}
        for table in outputs.values():
            self.spark.sql(
                f"create table if not exists {table}"
                " (anchor_id bigint, checksum bigint, batch_id bigint) using delta"
            )
        pending = f"{schema}.floor_pending"
        self.spark.sql(f"drop table if exists {pending}")
        self.spark.sql(f"create table {pending} shallow clone {config.qualified('pending')}")
        self.spark.table(pending).count()  # answered from the log: computes the snapshot
        with stopwatch() as touched_took:
            touched = (
                self.spark.table(pending).join(F.broadcast(anchors), "anchor_id").localCheckpoint()
            )
        # broadcast when small, as the acker's own MERGE does
        source = F.broadcast(touched) if touched.count() <= BROADCAST_MERGE_ROWS else touched
        with stopwatch() as merge_took:
            self.spark.sql(
                "merge into identifier(:pending) as t using {source} as s"
                " on t.anchor_id = s.anchor_id"
                " when matched then update set * when not matched then insert *",
                {"pending": pending},
                source=source,
            ).collect()
        rows = {
            "completed": anchors.select("anchor_id"),
            "failed": touched.select("anchor_id"),
            "batches": anchors.limit(1),
        }
        with stopwatch() as appends_took:
            for name, df in rows.items():
                df.select(
                    "anchor_id", F.lit(0).alias("checksum"), F.lit(-2).alias("batch_id")
                ).write.format("delta").mode("append").saveAsTable(outputs[name])
        parts = {"touched_s": touched_took(), "merge_s": merge_took(), "appends_s": appends_took()}
        return {**parts, "total_s": sum(parts.values())}

    def time_to_parquet(self, df: DataFrame, name: str) -> float:
        """Seconds to compute ``df`` and write it as Parquet under ``name`` in the bench root."""
        with stopwatch() as took:
            df.write.mode("overwrite").parquet(str(self.root / name))
        return took()

    # --- the peer ---------------------------------------------------------------------

    def peer_seed(self, config: Config) -> None:
        """Give the peer the same pending trees as the acker's ``config`` schema."""
        seed = self.root / "peer-seed"
        self.spark.table(config.qualified("pending")).select(
            "anchor_id", "checksum", "has_init", "failed"
        ).write.mode("overwrite").parquet(str(seed))
        self.duck.execute(
            "create or replace table pending as select * from read_parquet(?)",
            [str(seed / "*.parquet")],
        )

    def peer_batch(self, events: Path) -> tuple[float, dict[str, int]]:
        """The acker's core in DuckDB: aggregate, upsert into pending, extract outcomes;
        return the wall time and how many trees completed and failed."""
        files = str(events / "*.parquet")
        out = self.root / "peer"
        out.mkdir(exist_ok=True)
        with stopwatch() as took:
            self.duck.execute(
                "create or replace temp table batch_state as"
                " with agg as ("
                "  select anchor_id,"
                "   bit_xor(xor_value) filter (where event_type in ('init', 'ack', 'anchor')) as x,"
                "   bool_or(event_type = 'init') as saw_init,"
                "   bool_or(event_type = 'fail') as saw_fail"
                "  from (select distinct anchor_id, event_type, xor_value from read_parquet(?)"
                "   where anchor_id is not null and anchor_id <> 0)"
                "  group by anchor_id)"
                " select a.anchor_id,"
                "  xor(coalesce(p.checksum, 0), coalesce(a.x, 0)) as checksum,"
                "  coalesce(p.has_init, false) or a.saw_init as has_init,"
                "  coalesce(p.failed, false) or a.saw_fail as failed"
                " from agg a left join pending p using (anchor_id)",
                [files],
            )
            for outcome, condition in (
                ("completed", "has_init and not failed and checksum = 0"),
                ("failed", "has_init and failed"),
            ):
                self.duck.execute(
                    f"copy (select * from batch_state where {condition})"
                    f" to '{out / outcome}.parquet' (format parquet)"
                )
            self.duck.execute(
                "merge into pending p using batch_state s on p.anchor_id = s.anchor_id"
                " when matched and s.has_init and (s.failed or s.checksum = 0) then delete"
                " when matched then update set checksum = s.checksum, has_init = s.has_init,"
                "  failed = s.failed"
                " when not matched and not (s.has_init and (s.failed or s.checksum = 0))"
                "  then insert values (s.anchor_id, s.checksum, s.has_init, s.failed)"
            )
        counts = {}
        for outcome in ("completed", "failed"):
            row = self.duck.execute(
                f"select count(*) from read_parquet('{out / outcome}.parquet')"
            ).fetchone()
            counts[outcome] = int(row[0]) if row else 0
        return took(), counts


def seeded_anchor_id(index: Column) -> Column:
    """The anchor id of the seeded pending tree number ``index`` (a bigint column)."""
    return nonzero(F.xxhash64(index, F.lit("seed")))


BENCH_SPARK_CONF = {"spark.driver.memory": "6g", "spark.sql.shuffle.partitions": "4"}
# --quick only checks that every measurement runs: its batches hold a few thousand rows, which
# Spark interprets sooner than it generates and compiles code for them.
QUICK_SPARK_CONF = {**BENCH_SPARK_CONF, **INTERPRETED_QUERIES}


def small_batches(
    bench: Bench, config: Config, sizes: Sizes, batch_id: int
) -> tuple[dict[str, Any], int]:
    """``small_runs`` small micro-batches from ``batch_id`` on: their times, the Delta commits
    of the first per table, from the tables' logs, and the Delta floor of a batch of that size
    as many times; also the next batch id."""
    times = []
    commits: dict[str, int] = {}
    for run in range(sizes.small_runs):
        path, _ = bench.events(sizes.small_batch, seed=1000 + batch_id)
        before = bench.table_versions(config)
        times.append(bench.micro_batch(config, path, batch_id)[0])
        batch_id += 1
        if run == 0:
            after = bench.table_versions(config)
            commits = {table: after[table] - before[table] for table in TABLES}
            commits = {table: count for table, count in commits.items() if count}
    times.sort()
    pending = bench.spark.table(config.qualified("pending")).count()
    anchors = bench.floor_anchors(sizes.small_batch // EVENTS_PER_TREE)
    floors = [bench.delta_floor(config, anchors) for _ in range(sizes.small_runs)]
    figures = {
        "events": sizes.small_batch,
        "pending": pending,
        "runs": len(times),
        "median_s": round(statistics.median(times), 3),
        "p95_s": round(times[math.ceil(0.95 * len(times)) - 1], 3),
        "times_s": [round(t, 3) for t in times],
        "delta_commits": commits,
        "delta_commits_total": sum(commits.values()),
        "delta_floor": {
            part: round(statistics.median(floor[part] for floor in floors), 3) for part in floors[0]
        },
    }
    return figures, batch_id


def measure(bench: Bench, sizes: Sizes, figures: Figures) -> None:
    spark = bench.spark
    main = bench.new_acker(sizes.main_pending)
    bench.peer_seed(main)
    batch_id = 0

    warm_up, _ = bench.events(sizes.small_batch, seed=99)
    after_warm_up = bench.unused_seeded
    bench.micro_batch(main, warm_up, batch_id)
    bench.floor(warm_up)
    bench.dedup_floor(warm_up)
    bench.peer_batch(warm_up)
    batch_id += 1
    log("warm-up batch done")

    for seed, target in enumerate(sizes.batch_events, start=1):
        path, events = bench.events(target, seed=seed)
        ours, result = bench.micro_batch(main, path, batch_id)
        batch_id += 1
        merged = bench.last_merge(main)
        floor = bench.floor(path)
        dedup_floor = bench.dedup_floor(path)
        peer, peer_counts = bench.peer_batch(path)
        delta_floor = bench.delta_floor(main, bench.floor_anchors(events // EVENTS_PER_TREE))
        row = {
            "events": events,
            "pending": sizes.main_pending,
            "micro_batch_s": round(ours, 3),
            "events_per_s": round(events / ours),
            "floor_s": round(floor, 3),
            "floor_ratio": round(ours / floor, 2),
            "dedup_floor_s": round(dedup_floor, 3),
            "dedup_floor_ratio": round(dedup_floor / floor, 2),
            "dedup_ratio": round(ours / dedup_floor, 2),
            "delta_floor_s": round(delta_floor["total_s"], 3),
            "least_dedup_ratio": round((dedup_floor + delta_floor["total_s"]) / dedup_floor, 2),
            "duckdb_s": round(peer, 3),
            "ours_over_duckdb": round(ours / peer, 2),
            "completed": result.completed,
            "failed": result.failed,
            "overflowed": result.overflowed,
            "duckdb_completed": peer_counts["completed"],
            "duckdb_failed": peer_counts["failed"],
            **merged,
        }
        figures.end_to_end.append(row)
        log(f"end-to-end {row}")

    figures.small_batches, batch_id = small_batches(bench, main, sizes, batch_id)
    log(f"small batches {figures.small_batches}")

    with stopwatch() as took:
        maintained = {m.table: m for m in jobs.maintain(spark, main, tables=("pending",))}
    held = (
        spark.table(main.qualified("pending"))
        .agg(F.count("*").alias("rows"), F.avg(F.size("applied_keys")).alias("keys"))
        .first()
    )
    assert held is not None
    bytes_per_tree = maintained["pending"].bytes / held["rows"]
    figures.state_size = {
        "pending_rows": held["rows"],
        "bytes": maintained["pending"].bytes,
        "files": maintained["pending"].files,
        "bytes_per_anchor": round(bytes_per_tree, 1),
        "applied_keys_per_tree": round(held["keys"], 2),
        "over_information": round(bytes_per_tree / (8 * (2 + held["keys"])), 2),
        "maintain_s": round(took(), 1),
    }
    log(f"state size {figures.state_size}")

    # fresh schemas: their events continue seeded trees from just after the warm-up's
    bench.unused_seeded = after_warm_up
    runs = [bench.events(sizes.scaling_batch, seed=500 + run) for run in range(sizes.scaling_runs)]
    floor_anchors = bench.floor_anchors(sizes.scaling_batch // EVENTS_PER_TREE)
    assert bench.unused_seeded <= min(sizes.scaling_pending), "scaling events need more seeds"
    for pending in sizes.scaling_pending:
        config = bench.new_acker(pending)
        bench.micro_batch(config, warm_up, 0)
        times = [
            bench.micro_batch(config, path, batch_id)[0]
            for batch_id, (path, _) in enumerate(runs, start=1)
        ]
        figures.state_scaling.append(
            {
                "events": runs[0][1],
                "pending": pending,
                "micro_batch_s": round(statistics.median(times), 3),
                "times_s": [round(t, 3) for t in times],
                "delta_floor_s": round(bench.delta_floor(config, floor_anchors)["total_s"], 3),
            }
        )
        log(f"state scaling {figures.state_scaling[-1]}")
        if pending == min(sizes.scaling_pending):
            figures.small_batches_less_state, _ = small_batches(bench, config, sizes, len(runs) + 1)
            assert bench.unused_seeded <= pending, "small batches need more seeded trees"
            log(f"small batches {figures.small_batches_less_state}")
        shutil.rmtree(bench.root / "warehouse" / f"{config.warehouse.schema}.db")


def measure_ticks(bench: Bench, sizes: Sizes, figures: Figures) -> None:
    """One tick, three times, then ``overdue_ticks`` ticks in one call (what a scheduled run
    owes after a pause), over the same pending table. Its trees live more ticks than the
    runs make, so none expires: both scan ``pending`` and write the same outputs but for the
    number of tick rows."""
    config = bench.new_acker(sizes.tick_pending, buckets=sizes.overdue_ticks + 10)
    one = []
    for _ in range(3):
        with stopwatch() as took:
            jobs.tick(bench.spark, config, 1)
        one.append(took())
    with stopwatch() as took:
        ticked = jobs.tick(bench.spark, config, sizes.overdue_ticks)
    assert len(ticked) == sizes.overdue_ticks
    figures.ticks = {
        "pending": sizes.tick_pending,
        "one_tick_s": round(statistics.median(one), 3),
        "one_tick_times_s": [round(t, 3) for t in one],
        "overdue_ticks": sizes.overdue_ticks,
        "overdue_s": round(took(), 3),
        "overdue_ratio": round(took() / statistics.median(one), 2),
    }
    log(f"ticks {figures.ticks}")
    shutil.rmtree(bench.root / "warehouse" / f"{config.warehouse.schema}.db")


def measure_ingest_log(bench: Bench, sizes: Sizes, figures: Figures) -> None:
    """What the transaction ids of ingested files cost each later ingest. Two ``ack_events``
    tables get one id per file, as ``acker ingest`` leaves them (Delta's own commits, 100 ids
    each, dated 40 days back), and a checkpoint; one of them has the idempotency window, which
    drops the ids from its checkpoint. Then, alternating between the two, the session forgets
    every cached log and one more file is appended idempotently (Delta reads the table's ids
    to decide) and the table counted, as a new ``acker ingest`` process would."""
    jvm = bench.spark._jvm
    assert jvm is not None
    delta = jvm.org.apache.spark.sql.delta
    manual_update = getattr(getattr(delta, "DeltaOperations$ManualUpdate$"), "MODULE$")
    dated = jvm.scala.Some(jvm.java.lang.Long.valueOf(int((time.time() - 40 * 86400) * 1000)))
    tables = {}
    for variant in ("kept", "dropped"):
        config = bench.new_acker(0)  # its ack_events has the window from its DDL
        if variant == "kept":
            bench.spark.sql(
                f"alter table {config.qualified('ack_events')} unset tblproperties "
                f"('{IDEMPOTENCY_WINDOW_PROPERTY}')"
            )
        location = str(table_location(config, "ack_events"))
        log_of_table = delta.DeltaLog.forTable(bench.spark._jsparkSession, location)
        for first in range(0, sizes.ingested_files, 100):
            ids = jvm.java.util.ArrayList()
            for index in range(first, min(first + 100, sizes.ingested_files)):
                ids.add(delta.actions.SetTransaction(f"ingest/{index:064x}", 0, dated))
            log_of_table.startTransaction().commit(
                jvm.scala.jdk.javaapi.CollectionConverters.asScala(ids).toList(), manual_update
            )
        log_of_table.checkpoint()  # as Delta writes one every ten commits
        checkpoint = max(Path(location, "_delta_log").glob("*.checkpoint.parquet"))
        ids_in_checkpoint = pq.read_table(checkpoint, columns=["txn"]).column("txn").drop_null()
        tables[variant] = (config, len(ids_in_checkpoint))
    row = bench.spark.createDataFrame(
        [(1, "ack", 7, None, None, "bolt", datetime(2026, 1, 1), None)], ACK_EVENTS_SCHEMA
    )
    times: dict[str, list[float]] = {"kept": [], "dropped": []}
    for run in range(4):  # the first round warms the session up and is not counted
        for variant, (config, _) in tables.items():
            delta.DeltaLog.clearCache()
            with stopwatch() as took:
                append_idempotent(row, config, "ack_events", f"ingest/new-{run}", 0)
                bench.spark.table(config.qualified("ack_events")).count()
            if run:
                times[variant].append(took())
    figures.ingest_log = {
        "ingested_files": sizes.ingested_files,
        "ids_in_checkpoint": {variant: ids for variant, (_, ids) in tables.items()},
        **{f"ids_{variant}_s": round(statistics.median(t), 3) for variant, t in times.items()},
        **{f"ids_{variant}_times_s": [round(x, 3) for x in t] for variant, t in times.items()},
    }
    log(f"ingest log {figures.ingest_log}")
    for config, _ in tables.values():
        shutil.rmtree(bench.root / "warehouse" / f"{config.warehouse.schema}.db")


HOT_ANCHOR = 4242


def hot_tree_events(bench: Bench, events: int, parts: int) -> list[Path]:
    """One tree of ``events`` events, an init and one ack per edge, split by edge into ``parts``
    Parquet folders (the init in the first)."""
    acks = bench.spark.range(1, events).selectExpr(
        f"{HOT_ANCHOR}L as anchor_id",
        "'ack' as event_type",
        "xxhash64(id, 'edge') as xor_value",
        "cast(null as int) as spout_task",
        "cast(null as string) as source_msg_id",
        "'bolt' as component",
        "timestamp'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id / 1000.0)"
        " as event_time",
        "cast(id as string) as event_id",
        f"id % {parts} as part",
    )
    row = acks.agg(F.bit_xor("xor_value")).first()
    assert row is not None
    init = bench.spark.createDataFrame(
        [(HOT_ANCHOR, "init", row[0], 1, "hot", "spout", datetime(2026, 1, 1), "0", 0)],
        acks.schema,
    )
    tree = init.unionByName(acks)
    paths = []
    for part in range(parts):
        path = bench.events_dir / f"hot-{events}-{parts}-{part}"
        tree.where(F.col("part") == part).drop("part").write.mode("overwrite").parquet(str(path))
        paths.append(path)
    return paths


def measure_hot_tree(bench: Bench, sizes: Sizes, figures: Figures) -> None:
    """A hot tree, applied whole in one micro-batch, and in ``hot_tree_batches`` micro-batches,
    each of which checks its events against every key the tree already holds."""
    spread_times = []
    for parts in (1, sizes.hot_tree_batches):
        config = bench.new_acker(0)
        times = []
        for batch_id, path in enumerate(hot_tree_events(bench, sizes.hot_tree_events, parts)):
            took, result = bench.micro_batch(config, path, batch_id)
            times.append(round(took, 3))
        assert result.completed == 1, "the hot tree did not complete"
        if parts == 1:
            one_batch = times[0]
        else:
            spread_times = times
        shutil.rmtree(bench.root / "warehouse" / f"{config.warehouse.schema}.db")
    figures.hot_tree = {
        "events": sizes.hot_tree_events,
        "one_batch_s": one_batch,
        "batches": sizes.hot_tree_batches,
        "spread_times_s": spread_times,
        "spread_total_s": round(sum(spread_times), 3),
        "slowest_over_fastest": round(max(spread_times) / min(spread_times), 2),
    }
    log(f"hot tree {figures.hot_tree}")


BACKFILL_TICK_S = 30


def backfill_events(bench: Bench, events: int, hours: int) -> DataFrame:
    """About ``events`` simulated events whose trees start uniformly over ``hours`` hours: copies
    of the simulated template with fresh anchor ids, each tree moved by an offset of its own."""
    template = bench.spark.read.parquet(str(bench.simulate(TEMPLATE_EVENTS, seed=0)))
    template = template.limit(events) if events < TEMPLATE_EVENTS else template
    copies = max(1, round(events / TEMPLATE_EVENTS))
    offset_s = F.pmod(F.xxhash64("anchor_id", F.lit("offset")), F.lit(hours * 3600))
    return copied(template, copies, "backfill", offset_s)


def measure_backfill(bench: Bench, sizes: Sizes, figures: Figures) -> None:
    """Each backfill appended to the ``ack_events`` of a fresh warehouse under the event_time
    clock, then applied by one ``acker run`` (``jobs.run``), timed whole."""
    for hours, events in sizes.backfills:
        config = bench.new_acker(0, clock="event_time", tick_interval_s=BACKFILL_TICK_S)
        backfill_events(bench, events, hours).write.format("delta").mode("append").saveAsTable(
            config.qualified("ack_events")
        )
        appended = bench.spark.table(config.qualified("ack_events")).count()
        with stopwatch() as took:
            report = jobs.run(bench.spark, config)
        status = jobs.status(bench.spark, config)
        row = {
            "hours": hours,
            "events": appended,
            "epochs": len(report.ticks),
            "passes": report.batches,
            "run_s": round(took(), 1),
            "seconds_per_epoch": round(took() / max(1, len(report.ticks)), 3),
            "completed": status.completed,
            "failed": status.failed,
            "expired": status.expired,
            "late": status.late_events,
            "pending": status.pending,
        }
        figures.backfills.append(row)
        log(f"backfill {row}")
        shutil.rmtree(bench.root / "warehouse" / f"{config.warehouse.schema}.db")


def judge(figures: Figures) -> None:
    """Compare the figures with the targets of the benchmark suite."""
    checks = (in_process_checks(figures) if figures.end_to_end else []) + command_line_checks(
        figures.command_line
    )
    figures.targets = [
        {
            "target": name,
            "value": value,
            "goal": f"<= {goal}",
            "met": value <= goal,
            "shape_floor": floor,
        }
        for name, value, goal, floor in checks
    ]


Check = tuple[str, float, float, float | None]
"""(name, value, goal, the shape floor: the same figure for the least the required shape
allows, where there is one: the Delta floor, plus the dedup floor in a ratio to it)"""


def command_line_checks(command_line: dict[str, Any]) -> list[Check]:
    """The targets of the acker as a scheduler runs it (benchmarks/command_line.py)."""
    if not command_line:
        return []
    checks: list[Check] = []
    for backfill, limit_s in zip(command_line["backfills"], (60, 120, 120), strict=False):
        checks.append(
            (
                f"command line: {backfill['name']} ({backfill['events']:,} events), "
                "ingest + run seconds",
                backfill["ingest_and_run_s"],
                limit_s,
                None,
            )
        )
    cycles = command_line["cycles"]
    checks += [
        ("command line: 5-minute cycle, median seconds", cycles["median_s"], 30, None),
        ("command line: 5-minute cycle, worst seconds", cycles["worst_s"], 45, None),
        (
            "command line: acker run with nothing to do, seconds",
            command_line["idle"]["run_nothing_to_do_s"],
            8,
            None,
        ),
        (
            "command line: passes beyond one per one-file backfill",
            sum(backfill["passes"] - 1 for backfill in command_line["backfills"]),
            0,
            None,
        ),
        ("command line: JVM warnings printed", len(command_line["jvm_warnings"]), 0, None),
    ]
    return checks


def in_process_checks(figures: Figures) -> list[Check]:
    """The targets of the warm, in-process measurements."""
    largest = max(figures.end_to_end, key=lambda row: row["events"])
    scaling = sorted(figures.state_scaling, key=lambda row: row["pending"])
    ratio = scaling[-1]["micro_batch_s"] / scaling[0]["micro_batch_s"]
    small_over_less = figures.small_batches_less_state
    keys = figures.state_size["applied_keys_per_tree"]
    checks: list[Check] = [
        (
            "micro-batch / dedup floor, largest batch",
            largest["dedup_ratio"],
            2.0,
            largest["least_dedup_ratio"],
        ),
        (
            f"time(pending {scaling[-1]['pending']:,}) / time(pending {scaling[0]['pending']:,})",
            round(ratio, 2),
            1.5,
            None,
        ),
        (
            f"small-batch median seconds, pending {figures.small_batches['pending']:,}",
            figures.small_batches["median_s"],
            4.0,
            figures.small_batches["delta_floor"]["total_s"],
        ),
        (
            f"small-batch median seconds, pending {small_over_less['pending']:,}",
            small_over_less["median_s"],
            2.5,
            small_over_less["delta_floor"]["total_s"],
        ),
        (
            "Delta commits per small micro-batch",
            figures.small_batches["delta_commits_total"],
            4,
            None,
        ),
        (
            f"bytes per pending tree / (8 x (2 + {keys} keys))",
            figures.state_size["over_information"],
            1.15,
            None,
        ),
        (
            f"{figures.ticks['overdue_ticks']} overdue ticks / one tick",
            figures.ticks["overdue_ratio"],
            2.0,
            None,
        ),
        (
            f"hot tree over {figures.hot_tree['batches']} batches: slowest / fastest batch",
            figures.hot_tree["slowest_over_fastest"],
            2.0,
            None,
        ),
    ]
    for backfill, limit_s in zip(figures.backfills, (120, 600), strict=False):
        checks.append(
            (
                f"backfill of {backfill['hours']} h ({backfill['events']:,} events) seconds",
                backfill["run_s"],
                limit_s,
                None,
            )
        )
    return checks


def print_table(figures: Figures) -> None:
    if figures.end_to_end:
        print_in_process(figures)
    if figures.command_line:
        print_command_line(figures.command_line)
    print("\ntargets")
    for target in figures.targets:
        verdict = "met" if target["met"] else "MISSED"
        floor = target["shape_floor"]
        beside = "" if floor is None else f"; shape floor {floor:.2f}"
        print(f"  {target['target']}: {target['value']} (goal {target['goal']}) {verdict}{beside}")


def print_command_line(command_line: dict[str, Any]) -> None:
    print("\ncommand line (new processes, event_time clock, 30 s ticks)")
    for row in command_line["backfills"]:
        print(
            f"  {row['name']}: {row['events']:,} events in one file: ingest {row['ingest_s']} s,"
            f" run {row['run_s']} s ({row['passes']} passes to epoch {row['epoch']:,});"
            f" init {row['init_s']} s"
        )
    cycles = command_line["cycles"]
    print(
        f"  5-minute cycles at {cycles['trees_per_s']:g} trees/s, ingest + run:"
        f" median {cycles['median_s']} s, worst {cycles['worst_s']} s"
        f" ({', '.join(str(t) for t in cycles['times_s'])})"
    )
    idle = command_line["idle"]
    print(
        f"  then: run with nothing to do {idle['run_nothing_to_do_s']} s,"
        f" status {idle['status_s']} s, tick {idle['tick_s']} s;"
        f" JVM warnings printed: {len(command_line['jvm_warnings'])}"
    )


def print_in_process(figures: Figures) -> None:
    print("\nend-to-end (pending {:,})".format(figures.end_to_end[0]["pending"]))
    print(
        f"{'events':>12} {'batch s':>9} {'events/s':>11} {'floor s':>8} {'ratio':>6}"
        f" {'dedup s':>8} {'dedup/floor':>11} {'duckdb s':>9} {'ours/duckdb':>11}"
        f" {'Delta floor s':>13} {'ours/dedup':>10} {'least/dedup':>11}"
    )
    for row in figures.end_to_end:
        print(
            f"{row['events']:>12,} {row['micro_batch_s']:>9.2f} {row['events_per_s']:>11,}"
            f" {row['floor_s']:>8.2f} {row['floor_ratio']:>6.2f} {row['dedup_floor_s']:>8.2f}"
            f" {row['dedup_floor_ratio']:>11.2f} {row['duckdb_s']:>9.2f}"
            f" {row['ours_over_duckdb']:>11.2f} {row['delta_floor_s']:>13.2f}"
            f" {row['dedup_ratio']:>10.2f} {row['least_dedup_ratio']:>11.2f}"
        )
    print("\nstate scaling")
    for row in figures.state_scaling:
        print(
            f"  {row['events']:,} events over {row['pending']:>12,} pending:"
            f" {row['micro_batch_s']:.2f} s; Delta floor {row['delta_floor_s']:.2f} s"
        )
    small = figures.small_batches
    print(
        f"\nsmall batches of {small['events']:,} events over {small['pending']:,} pending:"
        f" median {small['median_s']:.2f} s,"
        f" p95 {small['p95_s']:.2f} s over {small['runs']} runs;"
        f" {small['delta_commits_total']} Delta commits each"
        f" ({', '.join(f'{t} {n}' for t, n in small['delta_commits'].items())})"
    )
    less = figures.small_batches_less_state
    print(
        f"small batches of {less['events']:,} events over {less['pending']:,} pending:"
        f" median {less['median_s']:.2f} s over {less['runs']} runs"
    )
    for batches in (small, less):
        floor = batches["delta_floor"]
        print(
            f"  Delta floor over {batches['pending']:,} pending: median {floor['total_s']:.2f} s"
            f" (touched rows {floor['touched_s']:.2f} s, MERGE {floor['merge_s']:.2f} s,"
            f" three appends {floor['appends_s']:.2f} s)"
        )
    size = figures.state_size
    print(
        f"state size: {size['bytes']:,} bytes for {size['pending_rows']:,} pending trees,"
        f" {size['bytes_per_anchor']} bytes per tree holding {size['applied_keys_per_tree']}"
        f" keys: {size['over_information']} x the 8 bytes x (2 + keys) it must hold"
    )
    ticks = figures.ticks
    print(
        f"ticks over {ticks['pending']:,} pending: one {ticks['one_tick_s']:.2f} s,"
        f" {ticks['overdue_ticks']} in one call {ticks['overdue_s']:.2f} s"
    )
    ingest_log = figures.ingest_log
    print(
        f"one more ingested file over {ingest_log['ingested_files']:,} files' transaction ids:"
        f" {ingest_log['ids_kept_s']:.2f} s kept, {ingest_log['ids_dropped_s']:.2f} s dropped"
        " by the idempotency window"
    )
    hot = figures.hot_tree
    print(
        f"hot tree of {hot['events']:,} events: {hot['one_batch_s']:.2f} s in one micro-batch;"
        f" over {hot['batches']}: {', '.join(f'{t:.1f}' for t in hot['spread_times_s'])} s"
    )
    for backfill in figures.backfills:
        print(
            f"backfill of {backfill['hours']} h, {backfill['events']:,} events, event_time:"
            f" {backfill['run_s']:.1f} s for {backfill['epochs']:,} epochs in"
            f" {backfill['passes']} passes ({backfill['seconds_per_epoch']:.3f} s per epoch)"
        )


def chart(figures: Figures, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_batch, by_state) = plt.subplots(1, 2, figsize=(11, 4.2))
    events = [row["events"] for row in figures.end_to_end]
    for key, label in (
        ("micro_batch_s", "acker micro-batch"),
        ("floor_s", "bare bit_xor GROUP BY (floor)"),
        ("dedup_floor_s", "with the duplicate rule (dedup floor)"),
        ("duckdb_s", "DuckDB peer"),
    ):
        by_batch.plot(events, [row[key] for row in figures.end_to_end], marker="o", label=label)
    by_batch.set(
        xscale="log",
        yscale="log",
        xlabel="events per micro-batch",
        ylabel="seconds",
        title=f"cost vs batch size ({figures.end_to_end[0]['pending']:,} pending)",
    )
    by_batch.legend()
    pending = [row["pending"] for row in figures.state_scaling]
    by_state.plot(
        pending, [row["micro_batch_s"] for row in figures.state_scaling], marker="o", color="C0"
    )
    by_state.set(
        xscale="log",
        xlabel="pending trees",
        ylabel="seconds",
        ylim=(0, None),
        title=f"cost vs pending size ({figures.state_scaling[0]['events']:,} events)",
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: check that it runs")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--work", type=Path, help="scratch folder (default: <out>/work, removed)")
    parser.add_argument(
        "--command-line-only",
        action="store_true",
        help="only the command-line measurements (saved as <name>-command-line.json)",
    )
    parser.add_argument(
        "--cycles", type=int, help="5-minute cycles of the command-line measurements (default 12)"
    )
    args = parser.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else DEFAULT_SIZES
    command_line_sizes = QUICK_COMMAND_LINE if args.quick else DEFAULT_COMMAND_LINE
    if args.cycles is not None:
        command_line_sizes = replace(command_line_sizes, cycles=args.cycles)
    work = args.work or args.out / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    figures = Figures(
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        machine={"cpus": os.cpu_count(), "python": platform.python_version()},
        sizes=asdict(sizes),
    )
    spark = build_session(
        parse_config(
            {
                "warehouse": {"path": str(work / "warehouse")},
                "spark": {"conf": dict(QUICK_SPARK_CONF if args.quick else BENCH_SPARK_CONF)},
            }
        )
    )
    figures.machine["spark"] = spark.version
    try:
        if not args.command_line_only:
            bench = Bench(spark, work)
            measure(bench, sizes, figures)
            measure_ticks(bench, sizes, figures)
            measure_ingest_log(bench, sizes, figures)
            measure_hot_tree(bench, sizes, figures)
            measure_backfill(bench, sizes, figures)
        figures.command_line = measure_command_line(spark, work, command_line_sizes, log)
    finally:
        spark.stop()
    judge(figures)
    print_table(figures)
    name = ("quick" if args.quick else "default") + (
        "-command-line" if args.command_line_only else ""
    )
    (args.out / f"{name}.json").write_text(json.dumps(asdict(figures), indent=2) + "\n")
    if figures.end_to_end:
        chart(figures, args.out / f"{name}.png")
    shutil.rmtree(work)
    chart_note = f" and {args.out / f'{name}.png'}" if figures.end_to_end else ""
    print(f"\nsaved {args.out / f'{name}.json'}{chart_note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
