"""The benchmark's report: each figure judged by its target (benchmarks/targets.py), the
figures printed side by side, and a chart of cost against batch size and against pending."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.floors import PLANS
from benchmarks.measurements import Figures
from benchmarks.targets import TARGETS

__all__ = ["chart", "judge", "print_report"]

Check = tuple[str, float, str]
"""(the figure as this run measured it, its value, the key of its target)"""


def judge(figures: Figures) -> None:
    """Compare the figures with their targets."""
    checks = (in_process_checks(figures) if figures.end_to_end else []) + command_line_checks(
        figures.command_line
    )
    figures.targets = [
        {
            "target": name,
            "value": value,
            "goal": TARGETS[key].stated(),
            "met": TARGETS[key].met(value),
        }
        for name, value, key in checks
    ]


def in_process_checks(figures: Figures) -> list[Check]:
    """The targets of the warm, in-process measurements."""
    largest = max(figures.end_to_end, key=lambda row: row["events"])
    keys = figures.state_size["applied_keys_per_tree"]
    checks: list[Check] = [
        (
            f"{largest['events']:,}-event micro-batch over {largest['pending']:,} pending"
            " / (dedup floor + Delta floor)",
            largest["over_floors"],
            "largest_over_floors",
        ),
    ]
    for row in sorted(figures.state_scaling, key=lambda row: row["pending"]):
        checks.append(
            (
                f"{row['events']:,}-event micro-batch over {row['pending']:,} pending"
                " / (dedup floor + Delta floor)",
                row["over_floors"],
                "scaling_over_floors",
            )
        )
    for small in (figures.small_batches_less_state, figures.small_batches):
        checks.append(
            (
                f"{small['events']:,}-event micro-batch over {small['pending']:,} pending,"
                f" median of {small['runs']} / Delta floor",
                small["over_delta_floor"],
                "small_over_delta_floor",
            )
        )
    checks += [
        (
            f"{largest['events']:,}-event micro-batch / DuckDB",
            largest["ours_over_duckdb"],
            "largest_over_duckdb",
        ),
        (
            "Delta commits per small micro-batch",
            figures.small_batches["delta_commits_total"],
            "small_commits",
        ),
        (
            "scans of pending per small micro-batch, outside Delta's MERGE",
            figures.small_batches["pending_scans"]["outside_merge"],
            "pending_scans",
        ),
        (
            f"bytes per pending tree / (8 x (2 + {keys} keys))",
            figures.state_size["over_information"],
            "bytes_over_information",
        ),
        (
            f"{figures.ticks['overdue_ticks']} overdue ticks / one tick",
            figures.ticks["overdue_ratio"],
            "overdue_ticks",
        ),
        (
            f"hot tree over {figures.hot_tree['batches']} batches: slowest / fastest batch",
            figures.hot_tree["slowest_over_fastest"],
            "hot_tree",
        ),
    ]
    for backfill in figures.backfills:
        checks.append(
            (
                f"backfill of {backfill['hours']} h ({backfill['events']:,} events) seconds",
                backfill["run_s"],
                backfill["target"],
            )
        )
    return checks


def command_line_checks(command_line: dict[str, Any]) -> list[Check]:
    """The targets of the acker as a scheduler runs it (benchmarks/command_line.py)."""
    if not command_line:
        return []
    checks: list[Check] = [
        (
            f"command line: {backfill['name']} ({backfill['events']:,} events),"
            " ingest + run seconds",
            backfill["ingest_and_run_s"],
            backfill["target"],
        )
        for backfill in command_line["backfills"]
    ]
    cycles = command_line["cycles"]
    checks += [
        ("command line: 5-minute cycle, median seconds", cycles["median_s"], "cycle_median"),
        ("command line: 5-minute cycle, worst seconds", cycles["worst_s"], "cycle_worst"),
        (
            "command line: acker run with nothing to do, seconds",
            command_line["idle"]["run_nothing_to_do_s"],
            "idle_run",
        ),
        (
            "command line: passes beyond one per one-file backfill",
            sum(backfill["passes"] - 1 for backfill in command_line["backfills"]),
            "extra_passes",
        ),
        (
            "command line: JVM warnings printed",
            len(command_line["jvm_warnings"]),
            "jvm_warnings",
        ),
    ]
    return checks


def print_report(figures: Figures) -> None:
    if figures.end_to_end:
        print_in_process(figures)
    if figures.command_line:
        print_command_line(figures.command_line)
    print("\ntargets")
    for target in figures.targets:
        verdict = "met" if target["met"] else "MISSED"
        print(f"  {target['target']}: {target['value']} (goal {target['goal']}) {verdict}")


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
        f"  5-minute cycles at {cycles['trees_per_s']:g} trees/s, run --ingest FILE:"
        f" median {cycles['median_s']} s, worst {cycles['worst_s']} s"
        f" ({', '.join(str(t) for t in cycles['times_s'])})"
    )
    if cycles["two_processes_times_s"]:
        print(
            "  the cycles between them as ingest FILE, then run:"
            f" median {cycles['two_processes_median_s']} s"
            f" ({', '.join(str(t) for t in cycles['two_processes_times_s'])})"
        )
    few = cycles["few_trees"]
    print(
        f"  a cycle of {few['trees']} trees ({few['events']:,} events), run --ingest FILE:"
        f" {few['run_s']} s"
    )
    idle = command_line["idle"]
    print(
        f"  then: run with nothing to do {idle['run_nothing_to_do_s']} s,"
        f" status {idle['status_s']} s, tick {idle['tick_s']} s;"
        f" JVM warnings printed: {len(command_line['jvm_warnings'])}"
    )


def _both_plans(row: dict[str, Any]) -> str:
    """A row's Delta floor in each plan: reading then merging, the MERGE computing the state."""
    today, merging = (row[f"{plan}_floor_s"] for plan in PLANS)
    return (
        f"reading then merging {today:.2f} s, the MERGE computing the state {merging:.2f} s"
        f" (each counting pending's snapshot, {row['pending_snapshot_s']:.2f} s)"
    )


def print_in_process(figures: Figures) -> None:
    print("\nend-to-end (pending {:,})".format(figures.end_to_end[0]["pending"]))
    print(
        f"{'events':>12} {'batch s':>9} {'events/s':>11} {'floor s':>8} {'ratio':>6}"
        f" {'dedup s':>8} {'dedup/floor':>11} {'duckdb s':>9} {'ours/duckdb':>11}"
        f" {'Delta floor s':>13} {'ours/dedup':>10} {'ours/floors':>11}"
    )
    for row in figures.end_to_end:
        print(
            f"{row['events']:>12,} {row['micro_batch_s']:>9.2f} {row['events_per_s']:>11,}"
            f" {row['floor_s']:>8.2f} {row['floor_ratio']:>6.2f} {row['dedup_floor_s']:>8.2f}"
            f" {row['dedup_floor_ratio']:>11.2f} {row['duckdb_s']:>9.2f}"
            f" {row['ours_over_duckdb']:>11.2f} {row['delta_floor_s']:>13.2f}"
            f" {row['dedup_ratio']:>10.2f} {row['over_floors']:>11.2f}"
        )
    for row in figures.end_to_end:
        print(f"  Delta floor of {row['events']:,} events, the lower of {_both_plans(row)}")
    print("\nstate scaling")
    for row in figures.state_scaling:
        print(
            f"  {row['events']:,} events over {row['pending']:>12,} pending:"
            f" {row['micro_batch_s']:.2f} s; dedup floor {row['dedup_floor_s']:.2f} s,"
            f" Delta floor {row['delta_floor_s']:.2f} s ({_both_plans(row)}):"
            f" {row['over_floors']:.2f} x both"
        )
    small = figures.small_batches
    print(
        f"\nsmall batches of {small['events']:,} events over {small['pending']:,} pending:"
        f" median {small['median_s']:.2f} s,"
        f" p95 {small['p95_s']:.2f} s over {small['runs']} runs;"
        f" {small['delta_commits_total']} Delta commits each"
        f" ({', '.join(f'{t} {n}' for t, n in small['delta_commits'].items())});"
        f" scans of pending: {small['pending_scans']['outside_merge']} outside Delta's MERGE,"
        f" {small['pending_scans']['in_merge']} inside it;"
        f" {small['statements']} statements (and {small['view_bindings']} views binding their"
        f" DataFrames) running {small['spark_jobs']} Spark jobs"
    )
    less = figures.small_batches_less_state
    print(
        f"small batches of {less['events']:,} events over {less['pending']:,} pending:"
        f" median {less['median_s']:.2f} s over {less['runs']} runs"
    )
    for batches in (small, less):
        today, merging = (batches["delta_floors"][plan] for plan in PLANS)
        print(
            f"  Delta floors over {batches['pending']:,} pending, medians:"
            f" reading then merging {today['total_s']:.2f} s (pending's snapshot"
            f" {today['snapshot_s']:.2f} s, touched rows {today['touched_s']:.2f} s,"
            f" MERGE {today['merge_s']:.2f} s, three appends"
            f" {today['appends_s']:.2f} s); the MERGE computing the state"
            f" {merging['total_s']:.2f} s (MERGE {merging['merge_s']:.2f} s, the same"
            f" snapshot, its rows read back {merging['read_back_s']:.2f} s, three appends"
            f" {merging['appends_s']:.2f} s);"
            f" the batches {batches['over_delta_floor']:.2f} x the lower"
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
