"""The acker's measurements: micro-batches of each size over a large ``pending``, with their
floors and the DuckDB peer beside them; state scaling; small batches; state size; overdue
ticks; the ingest log; a hot tree; backfills. Each micro-batch is applied by
:class:`pipelines.jobs.BatchApplier`, exactly as ``acker run``'s stream applies it."""

from __future__ import annotations

import math
import shutil
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from benchmarks.floors import (
    bare_floor,
    dedup_floor,
    delta_floors,
    lower_floor_s,
    pending_snapshot_s,
)
from benchmarks.peer import DuckDBPeer
from benchmarks.timing import log, stopwatch
from benchmarks.workloads import EVENTS_PER_TREE, EventSets, seeded_anchor_id
from pipelines import jobs
from pipelines.config import Config, parse_config
from pipelines.engine import BatchResult, append_idempotent
from pipelines.ingest import ACK_EVENTS_SCHEMA
from pipelines.session import INTERPRETED_QUERIES
from pipelines.sql import TABLES, quoted_table
from pipelines.tables import IDEMPOTENCY_WINDOW_PROPERTY, create_tables, table_location

__all__ = [
    "BENCH_SPARK_CONF",
    "DEFAULT_SIZES",
    "QUICK_SIZES",
    "QUICK_SPARK_CONF",
    "Bench",
    "Figures",
    "Sizes",
    "measure_all",
]

BENCH_SPARK_CONF = {"spark.driver.memory": "6g", "spark.sql.shuffle.partitions": "4"}
# --quick only checks that every measurement runs: its batches hold a few thousand rows, which
# Spark interprets sooner than it generates and compiles code for them.
QUICK_SPARK_CONF = {**BENCH_SPARK_CONF, **INTERPRETED_QUERIES}
BACKFILL_TICK_S = 30


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
    backfills: tuple[tuple[int, int, str], ...]
    """(hours, events, the key of its target in benchmarks/targets.py) of each event_time
    backfill."""


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
    backfills=((24, 10**6, "backfill_day"), (7 * 24, 7 * 10**6, "backfill_week")),
)
# One size of each: the quick run checks that every measurement runs, and each warehouse it
# seeds costs the suite about a minute.
QUICK_SIZES = Sizes(
    batch_events=(10**3,),
    main_pending=10**4,
    scaling_batch=10**3,
    scaling_pending=(2 * 10**3,),
    small_batch=10**3,
    small_runs=1,
    scaling_runs=1,
    tick_pending=10**3,
    overdue_ticks=100,
    ingested_files=200,
    hot_tree_events=10**4,
    hot_tree_batches=3,
    backfills=((2, 2 * 10**3, "backfill_day"),),
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


class Bench:
    """One warehouse, one Spark session, the event sets and the DuckDB peer."""

    def __init__(self, spark: SparkSession, root: Path) -> None:
        self.spark = spark
        self.root = root
        self.sets = EventSets(spark, root / "events")
        self.peer = DuckDBPeer(root)
        self.schemas = 0
        self.appliers: dict[str, jobs.BatchApplier] = {}

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

    def drop(self, config: Config) -> None:
        """Remove a schema's tables from the disk once measured."""
        shutil.rmtree(self.root / "warehouse" / f"{config.warehouse.schema}.db")

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

    def bare_floor(self, events: Path) -> float:
        return bare_floor(self.spark, events, self.root)

    def dedup_floor(self, events: Path) -> float:
        return dedup_floor(self.spark, events, self.root)


@dataclass(frozen=True)
class _Execution:
    """One SQL execution, as Spark's SQL status store (its UI) holds it."""

    started_ms: int
    ended_ms: int | None
    tree: str
    """Its physical plan's tree, before the details of its nodes."""
    root: bool
    """Not run inside another execution (a statement the acker submitted)."""
    jobs: int


def _executions_since(spark: SparkSession, since_ms: int) -> list[_Execution]:
    """The SQL executions submitted since ``since_ms`` (epoch milliseconds)."""
    session = spark._jsparkSession
    session.sparkContext().listenerBus().waitUntilEmpty()
    store = session.sharedState().statusStore().executionsList()
    executions = []
    for index in range(store.size()):
        execution = store.apply(index)
        started = int(execution.submissionTime())
        if started < since_ms:
            continue
        ended = execution.completionTime()
        executions.append(
            _Execution(
                started_ms=started,
                ended_ms=int(ended.get().getTime()) if ended.isDefined() else None,
                tree=str(execution.physicalPlanDescription()).split("\n\n")[0],
                root=execution.rootExecutionId() == execution.executionId(),
                jobs=int(execution.jobs().size()),
            )
        )
    return executions


def pending_scans(executions: list[_Execution], config: Config) -> dict[str, int]:
    """How many times ``executions`` read the data files of ``config``'s ``pending`` (a file
    scan of the table in a physical plan): outside Delta's MERGE, and inside it (the executions
    a MERGE runs start while its own command runs)."""
    scan = f"Scan parquet spark_catalog.{config.warehouse.schema}.pending"
    merges = [(e.started_ms, e.ended_ms) for e in executions if "MergeIntoCommand" in e.tree]
    scans = {"outside_merge": 0, "in_merge": 0}
    for execution in executions:
        if "MergeIntoCommand" in execution.tree:
            continue
        in_merge = any(
            begun <= execution.started_ms and (ended is None or execution.started_ms <= ended)
            for begun, ended in merges
        )
        scans["in_merge" if in_merge else "outside_merge"] += execution.tree.count(scan)
    return scans


# How the physical plan of a temporary view's registration begins.
_VIEW_BINDING = "== Physical Plan ==\nExecute CreateViewCommand"


def statements(executions: list[_Execution]) -> dict[str, int]:
    """How many statements the acker submitted in ``executions`` (root SQL executions), apart
    from the temporary views that bind a step's DataFrames to its SQL (PySpark registers one per
    DataFrame a statement reads, a command of its own that runs no job), and how many Spark jobs
    they all ran, Delta's own (its log replays, its MERGE's) included."""
    roots = [execution for execution in executions if execution.root]
    views = sum(execution.tree.startswith(_VIEW_BINDING) for execution in roots)
    return {
        "statements": len(roots) - views,
        "view_bindings": views,
        "spark_jobs": sum(execution.jobs for execution in executions),
    }


def _floor_totals(floors: dict[str, dict[str, float]]) -> dict[str, float]:
    """Each plan's Delta floor in seconds, and the lower one, the batch's Delta floor; and how
    much of today's plan's is computing pending's snapshot."""
    return {
        "delta_floor_s": round(lower_floor_s(floors), 3),
        "pending_snapshot_s": round(floors["read_then_merge"]["snapshot_s"], 3),
        **{f"{plan}_floor_s": round(floor["total_s"], 3) for plan, floor in floors.items()},
    }


def _over_floors(seconds: float, dedup_s: float, delta_s: float) -> float:
    return round(seconds / (dedup_s + delta_s), 2)


def small_batches(
    bench: Bench, config: Config, sizes: Sizes, batch_id: int
) -> tuple[dict[str, Any], int]:
    """``small_runs`` small micro-batches from ``batch_id`` on: their times, the Delta commits
    of the first per table, from the tables' logs, and the Delta floor of a batch of that size
    as many times; also the next batch id."""
    times = []
    commits: dict[str, int] = {}
    scans: dict[str, int] = {}
    counted: dict[str, int] = {}
    for run in range(sizes.small_runs):
        path, _ = bench.sets.events(sizes.small_batch, seed=1000 + batch_id)
        before = bench.table_versions(config)
        since_ms = int(time.time() * 1000)
        times.append(bench.micro_batch(config, path, batch_id)[0])
        batch_id += 1
        if run == 0:
            executions = _executions_since(bench.spark, since_ms)
            scans = pending_scans(executions, config)
            counted = statements(executions)
            after = bench.table_versions(config)
            commits = {table: after[table] - before[table] for table in TABLES}
            commits = {table: count for table, count in commits.items() if count}
    times.sort()
    snapshot_s = pending_snapshot_s(bench.spark, config)
    pending = bench.spark.table(config.qualified("pending")).count()
    anchors = bench.sets.anchors(sizes.small_batch // EVENTS_PER_TREE)
    runs = [
        delta_floors(bench.spark, config, anchors, snapshot_s, merge_state_first=run % 2 == 1)
        for run in range(sizes.small_runs)
    ]
    floors = {
        plan: {
            part: round(statistics.median(run[plan][part] for run in runs), 3)
            for part in runs[0][plan]
        }
        for plan in runs[0]
    }
    lower = lower_floor_s(floors)
    median = statistics.median(times)
    figures = {
        "events": sizes.small_batch,
        "pending": pending,
        "runs": len(times),
        "median_s": round(median, 3),
        "p95_s": round(times[math.ceil(0.95 * len(times)) - 1], 3),
        "times_s": [round(t, 3) for t in times],
        "delta_commits": commits,
        "delta_commits_total": sum(commits.values()),
        "pending_scans": scans,
        **counted,
        "delta_floors": floors,
        "delta_floor_s": lower,
        "over_delta_floor": round(median / lower, 2),
    }
    return figures, batch_id


def measure_batches(bench: Bench, sizes: Sizes, figures: Figures) -> None:
    """Micro-batches of each size over the large ``pending``, then small batches, the state's
    size, and one batch size over growing ``pending`` tables."""
    spark = bench.spark
    main = bench.new_acker(sizes.main_pending)
    bench.peer.seed(spark, main)
    batch_id = 0

    warm_up, _ = bench.sets.events(sizes.small_batch, seed=99)
    after_warm_up = bench.sets.unused_seeded
    bench.micro_batch(main, warm_up, batch_id)
    bench.bare_floor(warm_up)
    bench.dedup_floor(warm_up)
    bench.peer.batch(warm_up)
    batch_id += 1
    log("warm-up batch done")

    for seed, target in enumerate(sizes.batch_events, start=1):
        path, events = bench.sets.events(target, seed=seed)
        ours, result = bench.micro_batch(main, path, batch_id)
        batch_id += 1
        snapshot_s = pending_snapshot_s(spark, main)
        merged = bench.last_merge(main)
        floor = bench.bare_floor(path)
        dedup = bench.dedup_floor(path)
        peer, peer_counts = bench.peer.batch(path)
        anchors = bench.sets.anchors(events // EVENTS_PER_TREE)
        floors = delta_floors(spark, main, anchors, snapshot_s, merge_state_first=seed % 2 == 1)
        delta = lower_floor_s(floors)
        row = {
            "events": events,
            "pending": sizes.main_pending,
            "micro_batch_s": round(ours, 3),
            "events_per_s": round(events / ours),
            "floor_s": round(floor, 3),
            "floor_ratio": round(ours / floor, 2),
            "dedup_floor_s": round(dedup, 3),
            "dedup_floor_ratio": round(dedup / floor, 2),
            "dedup_ratio": round(ours / dedup, 2),
            **_floor_totals(floors),
            "over_floors": _over_floors(ours, dedup, delta),
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
    bench.sets.unused_seeded = after_warm_up
    runs = [
        bench.sets.events(sizes.scaling_batch, seed=500 + run) for run in range(sizes.scaling_runs)
    ]
    floor_anchors = bench.sets.anchors(sizes.scaling_batch // EVENTS_PER_TREE)
    assert bench.sets.unused_seeded <= min(sizes.scaling_pending), "scaling events need more seeds"
    # the same events over every pending size: their dedup floor is measured once
    scaling_dedup = statistics.median(bench.dedup_floor(path) for path, _ in runs)
    for scale, pending in enumerate(sizes.scaling_pending):
        config = bench.new_acker(pending)
        bench.micro_batch(config, warm_up, 0)
        times = [
            bench.micro_batch(config, path, batch_id)[0]
            for batch_id, (path, _) in enumerate(runs, start=1)
        ]
        median = statistics.median(times)
        snapshot_s = pending_snapshot_s(spark, config)
        floors = delta_floors(
            spark, config, floor_anchors, snapshot_s, merge_state_first=scale % 2 == 1
        )
        delta = lower_floor_s(floors)
        figures.state_scaling.append(
            {
                "events": runs[0][1],
                "pending": pending,
                "micro_batch_s": round(median, 3),
                "times_s": [round(t, 3) for t in times],
                "dedup_floor_s": round(scaling_dedup, 3),
                **_floor_totals(floors),
                "over_floors": _over_floors(median, scaling_dedup, delta),
            }
        )
        log(f"state scaling {figures.state_scaling[-1]}")
        if pending == min(sizes.scaling_pending):
            figures.small_batches_less_state, _ = small_batches(bench, config, sizes, len(runs) + 1)
            assert bench.sets.unused_seeded <= pending, "small batches need more seeded trees"
            log(f"small batches {figures.small_batches_less_state}")
        bench.drop(config)


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
    bench.drop(config)


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
        log_of_table.checkpoint()  # as Delta writes one every so many commits
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
        bench.drop(config)


def measure_hot_tree(bench: Bench, sizes: Sizes, figures: Figures) -> None:
    """A hot tree, applied whole in one micro-batch, and in ``hot_tree_batches`` micro-batches,
    each of which checks its events against every key the tree already holds. Each schema
    first takes a warm-up batch of other trees, as the state scaling's do: the first
    micro-batch of a new schema reads its tables cold, which is not the tree's cost."""
    warm_up, _ = bench.sets.events(sizes.small_batch, seed=99)
    spread_times = []
    for parts in (1, sizes.hot_tree_batches):
        config = bench.new_acker(0)
        bench.micro_batch(config, warm_up, 0)
        times = []
        hot_tree = bench.sets.hot_tree(sizes.hot_tree_events, parts)
        for batch_id, path in enumerate(hot_tree, start=1):
            took, result = bench.micro_batch(config, path, batch_id)
            times.append(round(took, 3))
        assert result.completed == 1, "the hot tree did not complete"
        if parts == 1:
            one_batch = times[0]
        else:
            spread_times = times
        bench.drop(config)
    figures.hot_tree = {
        "events": sizes.hot_tree_events,
        "one_batch_s": one_batch,
        "batches": sizes.hot_tree_batches,
        "spread_times_s": spread_times,
        "spread_total_s": round(sum(spread_times), 3),
        "slowest_over_fastest": round(max(spread_times) / min(spread_times), 2),
    }
    log(f"hot tree {figures.hot_tree}")


def measure_backfill(bench: Bench, sizes: Sizes, figures: Figures) -> None:
    """Each backfill appended to the ``ack_events`` of a fresh warehouse under the event_time
    clock, then applied by one ``acker run`` (``jobs.run``), timed whole."""
    for hours, events, target in sizes.backfills:
        config = bench.new_acker(0, clock="event_time", tick_interval_s=BACKFILL_TICK_S)
        bench.sets.backfill(events, hours).write.format("delta").mode("append").saveAsTable(
            config.qualified("ack_events")
        )
        appended = bench.spark.table(config.qualified("ack_events")).count()
        with stopwatch() as took:
            report = jobs.run(bench.spark, config)
        status = jobs.status(bench.spark, config)
        row = {
            "hours": hours,
            "target": target,
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
        bench.drop(config)


def measure_all(spark: SparkSession, root: Path, sizes: Sizes, figures: Figures) -> None:
    """Every in-process measurement, in one session, into ``figures``."""
    bench = Bench(spark, root)
    measure_batches(bench, sizes, figures)
    measure_ticks(bench, sizes, figures)
    measure_ingest_log(bench, sizes, figures)
    measure_hot_tree(bench, sizes, figures)
    measure_backfill(bench, sizes, figures)
