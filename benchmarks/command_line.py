"""The acker as a scheduler runs it: ``acker ingest`` and ``acker run`` as new processes, on
the realistic mix of the workload simulator (:meth:`pipelines.workload.WorkloadSpec.realistic`:
fan-out, multi-anchoring, fails, lost acks, slow trees, acks before their init, duplicates),
under the event_time clock with 30 s ticks, each command timed whole from its start to its exit.

- backfills, each one file: ingest it, then run once; the run's passes and epochs from its log
- the scheduled cycle: traffic cut into one file per 5 minutes, each ingested and run in turn:
  one process, ``acker run --ingest FILE``, as the Airflow DAG does with a landing folder, and,
  every other cycle, two, ``acker ingest FILE`` then ``acker run``; the time of each cycle
- on the cycle's warehouse afterwards: a cycle of a few trees (what a run costs with almost
  nothing to apply), then ``acker run`` with nothing to do, ``acker status`` and ``acker tick``

Traffic of more trees than the simulator makes in a few seconds repeats a simulated template
with fresh anchor ids, each copy moved by a fraction of a second.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from benchmarks.copies import copied
from pipelines.ingest import ACK_EVENTS_SCHEMA
from pipelines.workload import WorkloadSpec, generate_workload

__all__ = ["CommandLineSizes", "measure_command_line"]

TICK_S = 30
CYCLE_S = 300
# Most trees the simulator makes for one template; more are copies of it.
TEMPLATE_TREES = 40_000


@dataclass(frozen=True)
class Backfill:
    """A backfill of ``hours`` of traffic at ``trees_per_s``, with ``max_pending`` (``None``:
    the default), judged by ``target`` (a key of :data:`benchmarks.targets.TARGETS`)."""

    name: str
    hours: float
    trees_per_s: float
    target: str
    max_pending: int | None = None


@dataclass(frozen=True)
class CommandLineSizes:
    backfills: tuple[Backfill, ...]
    cycle_trees_per_s: float
    cycles: int


DEFAULT_COMMAND_LINE = CommandLineSizes(
    backfills=(
        Backfill("4 hours of the realistic mix", 4, 4000 / (4 * 3600), "command_line_4_hours"),
        Backfill("an hour at 200 trees/s", 1, 200, "command_line_hour"),
        # the benchmark's day volume, with max_pending below the day's trees (about 170,000)
        # and far above the most ever pending at once (a few hundred)
        Backfill("a day of the realistic mix", 24, 2, "command_line_day", max_pending=100_000),
    ),
    cycle_trees_per_s=200,
    cycles=12,
)
# --quick (in the test suite): one cycle and the verbs after it; a backfill is the same
# commands on another file, and each command line costs the suite a JVM start.
QUICK_COMMAND_LINE = CommandLineSizes(
    backfills=(),
    cycle_trees_per_s=0.5,
    cycles=1,
)


def acker_command() -> list[str]:
    """The ``acker`` console script of this interpreter's environment."""
    return [str(Path(sys.executable).with_name("acker"))]


def traffic(
    spark: SparkSession,
    folder: Path,
    hours: float,
    trees_per_s: float,
    seed: int,
    one_file: bool = False,
) -> int:
    """Write ``hours`` of realistic traffic at ``trees_per_s`` as Parquet files in ``folder``,
    one per :data:`CYCLE_S` of event time (by the tree's start), or all of it as one file
    (``one_file``); return the event count."""
    trees = max(1, round(hours * 3600 * trees_per_s))
    copies = max(1, -(-trees // TEMPLATE_TREES))
    spec = WorkloadSpec.realistic(trees // copies, trees_per_s / copies, seed=seed)
    rows = [event.row() for event in generate_workload(spec)]
    schema = to_arrow_schema(ACK_EVENTS_SCHEMA, timezone="UTC")
    template = pa.table(
        [pa.array(column) for column in zip(*rows, strict=True)], names=schema.names
    ).cast(schema)
    template_path = folder.with_name(folder.name + "-template")
    template_path.mkdir(parents=True, exist_ok=True)
    pq.write_table(template, template_path / "part-0.parquet")
    events = spark.read.parquet(str(template_path))
    if copies > 1:  # copy c of each tree starts c trees' intervals after it
        events = copied(events, copies, seed, F.col("copy") / F.lit(trees_per_s))
    if one_file:
        events.coalesce(1).write.mode("overwrite").parquet(str(folder))
    else:
        start_us = int(spec.start.timestamp() * 1e6)
        cycle = F.floor((F.unix_micros("event_time") - F.lit(start_us)) / (CYCLE_S * 1e6))
        events.withColumn("cycle", cycle).repartition("cycle").write.mode("overwrite").partitionBy(
            "cycle"
        ).parquet(str(folder))
    return spark.read.parquet(str(folder)).count()


def cycle_files(folder: Path) -> list[Path]:
    """The traffic's 5-minute files, in time order."""
    return sorted(folder.glob("cycle=*"), key=lambda path: int(path.name.split("=")[1]))


@dataclass(frozen=True)
class FewTrees:
    """A cycle's file cut down to a few of its trees."""

    path: Path
    trees: int
    events: int


# The trees of the cycle that measures a run's cost with almost nothing to apply.
FEW_TREES = 100


def few_trees(spark: SparkSession, cycle: Path, folder: Path, trees: int) -> FewTrees:
    """The events of the first ``trees`` anchors (by id) of the 5-minute file ``cycle``, as
    one file in ``folder``."""
    events = spark.read.parquet(str(cycle))
    anchors = events.select("anchor_id").distinct().orderBy("anchor_id").limit(trees)
    events.join(anchors, "anchor_id", "left_semi").coalesce(1).write.mode("overwrite").parquet(
        str(folder)
    )
    counted = spark.read.parquet(str(folder)).agg(
        F.count_distinct("anchor_id").alias("trees"), F.count("*").alias("events")
    )
    return FewTrees(folder, **counted.collect()[0].asDict())


def write_conf(path: Path, warehouse: Path, max_pending: int | None) -> Path:
    acker = ['clock = "event_time"', f"tick_interval_s = {float(TICK_S)}"]
    if max_pending is not None:
        acker.append(f"max_pending = {max_pending}")
    path.write_text("[acker]\n" + "\n".join(acker) + f'\n\n[warehouse]\npath = "{warehouse}"\n')
    return path


def timed(command: list[str], conf: Path) -> tuple[float, str, str]:
    """Run one ``acker`` command as a new process; return its wall time, stdout and stderr."""
    started = time.monotonic()
    done = subprocess.run(
        [*acker_command(), *command, "--conf", str(conf)],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    took = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"acker {' '.join(command)} failed: {done.stderr[-2000:]}")
    return took, done.stdout, done.stderr


def _jvm_warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "warning" in line.lower()]


def _passes(progress: str) -> dict[str, Any]:
    """A run's micro-batches and the epoch it ended at, from its progress lines on stderr
    (``batch 0, epochs 0 to 479: ...``, ``480 ticks to epoch 480: ...``)."""
    lines = progress.splitlines()
    ticks = [line for line in lines if " to epoch " in line and "tick" in line.split(":")[0]]
    return {
        "passes": sum(line.startswith("batch ") for line in lines),
        "epoch": int(ticks[-1].split(" to epoch ")[1].split(":")[0]) if ticks else 0,
    }


def measure_command_line(
    spark: SparkSession, root: Path, sizes: CommandLineSizes, log: Any
) -> dict[str, Any]:
    """Every measurement of this module, as figures."""
    figures: dict[str, Any] = {"backfills": [], "cycles": {}, "idle": {}, "jvm_warnings": []}
    for number, backfill in enumerate(sizes.backfills):
        folder = root / f"traffic-{number}"
        events = traffic(
            spark, folder, backfill.hours, backfill.trees_per_s, seed=number, one_file=True
        )
        warehouse = root / f"cli-warehouse-{number}"
        conf = write_conf(root / f"cli-{number}.toml", warehouse, backfill.max_pending)
        init_s, _, init_err = timed(["init"], conf)
        ingest_s, _, ingest_err = timed(["ingest", str(folder)], conf)
        run_s, run_out, run_err = timed(["run"], conf)
        row = {
            "name": backfill.name,
            "target": backfill.target,
            "hours": backfill.hours,
            "trees_per_s": backfill.trees_per_s,
            "events": events,
            "max_pending": backfill.max_pending,
            "init_s": round(init_s, 1),
            "ingest_s": round(ingest_s, 1),
            "run_s": round(run_s, 1),
            "ingest_and_run_s": round(ingest_s + run_s, 1),
            "run_says": run_out.strip(),
            **_passes(run_err),
        }
        figures["jvm_warnings"] += _jvm_warnings(init_err + ingest_err + run_err)
        figures["backfills"].append(row)
        log(f"command line: {row}")
    folder = root / "traffic-cycles"
    # one cycle more than are timed, a few of whose trees make the cut-down cycle
    hours = (sizes.cycles + 1) * CYCLE_S / 3600
    traffic(spark, folder, hours, sizes.cycle_trees_per_s, seed=100)
    warehouse = root / "cli-warehouse-cycles"
    conf = write_conf(root / "cli-cycles.toml", warehouse, None)
    timed(["init"], conf)
    one_process: list[float] = []
    two_processes: list[float] = []
    for number, path in enumerate(cycle_files(folder)[: sizes.cycles]):
        if number % 2 == 0:
            run_s, _, run_err = timed(["run", "--ingest", str(path)], conf)
            one_process.append(round(run_s, 1))
            figures["jvm_warnings"] += _jvm_warnings(run_err)
            log(f"command line: cycle {number + 1}: run --ingest {run_s:.1f} s")
            continue
        ingest_s, _, ingest_err = timed(["ingest", str(path)], conf)
        run_s, _, run_err = timed(["run"], conf)
        two_processes.append(round(ingest_s + run_s, 1))
        figures["jvm_warnings"] += _jvm_warnings(ingest_err + run_err)
        log(f"command line: cycle {number + 1}: ingest {ingest_s:.1f} s, run {run_s:.1f} s")
    # What a cycle costs with almost nothing to apply: the same commands, the same warehouse.
    few = few_trees(spark, cycle_files(folder)[sizes.cycles], root / "traffic-few", FEW_TREES)
    few_s, _, few_err = timed(["run", "--ingest", str(few.path)], conf)
    figures["jvm_warnings"] += _jvm_warnings(few_err)
    log(f"command line: a cycle of {few.events} events: run --ingest {few_s:.1f} s")
    figures["cycles"] = {
        "trees_per_s": sizes.cycle_trees_per_s,
        "cycle_s": CYCLE_S,
        "times_s": one_process,
        "median_s": round(statistics.median(one_process), 1),
        "worst_s": max(one_process),
        "two_processes_times_s": two_processes,
        "two_processes_median_s": (
            round(statistics.median(two_processes), 1) if two_processes else None
        ),
        "few_trees": {"trees": few.trees, "events": few.events, "run_s": round(few_s, 1)},
    }
    # A fresh status first (a run refreshes the record only where one was kept), then the verbs
    # a scheduler or an operator calls between cycles.
    timed(["status"], conf)
    for name, command in (
        ("run_nothing_to_do_s", ["run"]),
        ("status_s", ["status"]),
        ("tick_s", ["tick"]),
    ):
        took, _, err = timed(command, conf)
        figures["idle"][name] = round(took, 1)
        figures["jvm_warnings"] += _jvm_warnings(err)
    log(f"command line: {figures['cycles']}, {figures['idle']}")
    return figures
