"""Benchmarks of the acker's micro-batch, on this machine, in one run.

Run ``./dev bench`` (the default sizes, about 25 minutes on 2 cores) or ``./dev bench --quick``
(tiny sizes, to check that every measurement runs). Figures are printed as a table and saved as
JSON and a PNG chart in ``--out`` (default ``benchmarks/results``).

Events come from the project's workload simulator (benchmarks/workloads.py). Pending trees are
seeded straight into the ``pending`` table, and a fifth of each batch's trees continue one of
them (so the MERGE updates rows, not only inserts and deletes). Beside a micro-batch, its floors
(benchmarks/floors.py): the dedup floor of the same events, and the Delta floor of a batch of
the same size over the same ``pending``, which no micro-batch of the engine's shape goes below:
the lower of two plans' (reading the touched rows then merging, or a MERGE that computes each
tree's state from the row it matches).

Measurements (the targets are in benchmarks/targets.py):

1. end-to-end events/s of a micro-batch over a large pending table, against the dedup floor
   (the least the duplicate rule costs: one row per anchor, type and value, then ``bit_xor``
   and the sorted key set per anchor, to Parquet) plus the Delta floor; the bare ``bit_xor``
   GROUP BY floor beside them
2. state scaling: one batch size against growing pending tables, each against its floors
3. small-batch latency: median and p95 of small micro-batches over the large pending table
   and over the smallest scaling table, each against its Delta floor; the Delta commits of one,
   per table, from the tables' logs
4. state size: bytes on disk per pending tree once ``acker maintain`` compacted it, against the
   information it must hold, 8 bytes x (2 + applied keys)
5. peer: the same core logic in DuckDB on the same Parquet events, as a ratio to ours
6. overdue ticks: 100 ticks in one call against one tick, over the same pending table
7. ingest log: one more file's idempotent append to ``ack_events`` whose log holds the
   transaction ids of 10^4 ingested files, against the same log once the idempotency window
   has dropped them
8. hot tree: one tree of 10^6 events (an init and an ack per edge) in one micro-batch, and
   spread over ten, each checked against the keys the tree already holds
9. backfill: a day (10^6 events, 2,880 epochs of 30 s) and a week (7 x 10^6 events, 20,160
   epochs) of events under the event_time clock, on a fresh warehouse, as one ``acker run``
10. the command line, as a scheduler runs it (benchmarks/command_line.py)

The package: workloads.py (the event sets), measurements.py (the acker's), floors.py, peer.py
(DuckDB), command_line.py, targets.py, report.py; this module runs them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.command_line import (
    DEFAULT_COMMAND_LINE,
    QUICK_COMMAND_LINE,
    measure_command_line,
)
from benchmarks.measurements import (
    BENCH_SPARK_CONF,
    DEFAULT_SIZES,
    QUICK_SIZES,
    QUICK_SPARK_CONF,
    Figures,
    measure_all,
)
from benchmarks.report import chart, judge, print_report
from benchmarks.timing import log
from pipelines.config import parse_config
from pipelines.session import build_session


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
            measure_all(spark, work, sizes, figures)
        figures.command_line = measure_command_line(spark, work, command_line_sizes, log)
    finally:
        spark.stop()
    judge(figures)
    print_report(figures)
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
