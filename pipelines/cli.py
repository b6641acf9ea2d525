"""The ``acker`` command line: init, ingest, run, tick, status, sql, demo, maintain.

Every verb takes ``--conf FILE`` and ``--warehouse DIR``. Exit code 0 on success; on failure a
one-line reason on stderr and a non-zero code (2 for bad usage or config, 1 otherwise).
"""

from __future__ import annotations

import argparse
import csv
import json
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from datetime import date, datetime
from decimal import Decimal
from functools import partial
from typing import TYPE_CHECKING, Any

from pipelines.config import Config, ConfigError, load_config
from pipelines.lock import writer_lock

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipelines.ingest import IngestReport
    from pipelines.run_record import FileKey

__all__ = ["main"]

_WRITERS = {"init", "run", "tick", "demo", "maintain"}
# Writers that hold the writer lease; init's statements are idempotent, and create the lease.
_LEASED = _WRITERS - {"init"}
# Verbs that run a few small queries and exit: they interpret their queries too.
_SHORT_LIVED = {"status", "sql"}
# Verbs whose queries are as small where they read or apply few events, and those that also
# scan `pending` and the outcome tables, where those are small too.
_SHORT_WITH_FEW_EVENTS = {"init", "ingest"}
_SHORT_WITH_FEW_EVENTS_AND_SMALL_TABLES = {"run", "tick"}
# Writers that end by refreshing the status record where the warehouse keeps one and they
# outdated it: an ingest's appends leave it valid, and demo ends with a status.
_REFRESHING_STATUS = {"run", "tick", "maintain"}
# Verbs that, where they read or apply many events, interpret every query but those over the
# events; a run only where `pending`, which its ticks scan, is small too.
_COMPILING_ONLY_EVENT_QUERIES = {"ingest", "run"}


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--conf", metavar="FILE", help="TOML config (default: embedded local)")
    common.add_argument("--warehouse", metavar="DIR", help="override warehouse.path")
    common.add_argument("--catalog", metavar="NAME", help="override warehouse.catalog")
    common.add_argument("--schema", metavar="NAME", help="override warehouse.schema")
    common.add_argument("--quiet", action="store_true", help="no progress on stderr, only failures")
    common.add_argument(
        "--debug", action="store_true", help="on failure, print the stack trace as well"
    )
    # The verbs that write hold the writer lease (pipelines.lease) while they work.
    leased = argparse.ArgumentParser(add_help=False)
    leased.add_argument(
        "--wait",
        action="store_true",
        help="if another writer holds the writer lease, wait for it instead of failing",
    )
    parser = argparse.ArgumentParser(
        prog="acker",
        description="Storm's XOR tuple-tree acker as micro-batches on Spark and Delta Lake.",
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    verbs.add_parser("init", parents=[common], help="create the schema, tables and views")
    ingest = verbs.add_parser("ingest", parents=[common], help="append event files to ack_events")
    ingest.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help=".jsonl, .csv or .parquet files or folders, local or s3a://",
    )
    ingest.add_argument(
        "--format",
        choices=("jsonl", "csv", "parquet"),
        help="read every file in this format, whatever its extension",
    )
    run = verbs.add_parser(
        "run",
        parents=[common, leased],
        help="process every available event, then tick on the clock",
    )
    run.add_argument(
        "--continuous",
        action="store_true",
        help="keep running: a micro-batch whenever events arrive, ticks on the clock; "
        "SIGTERM or Ctrl-C stops it cleanly",
    )
    run.add_argument(
        "--ingest",
        nargs="+",
        metavar="PATH",
        help="append these event files or folders to ack_events, as `acker ingest` does, "
        "then run, in the same process (the ingest holds no lease: it runs while the run "
        "claims it)",
    )
    run.add_argument(
        "--trigger-interval",
        type=float,
        default=5.0,
        metavar="S",
        help="with --continuous: seconds between checks for new events (default 5)",
    )
    run.add_argument(
        "--log-json",
        action="store_true",
        help="log each micro-batch and tick as one JSON line on stderr (default: a plain line)",
    )
    tick = verbs.add_parser(
        "tick", parents=[common, leased], help="advance the epoch N times (default 1)"
    )
    tick.add_argument("count", nargs="?", type=int, default=1, metavar="N")
    verbs.add_parser(
        "status", parents=[common], help="epoch, last batch, pending and outcome counts"
    )
    sql = verbs.add_parser("sql", parents=[common], help="run a query against the acker's tables")
    sql.add_argument("query", metavar="QUERY")
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table")
    sql.add_argument("--limit", type=int, default=1000, help="rows to print at most (table format)")
    verbs.add_parser(
        "demo", parents=[common, leased], help="generate a workload, process it, print a summary"
    )
    verbs.add_parser(
        "maintain",
        parents=[common, leased],
        help="compact small files (OPTIMIZE), drop old ones (VACUUM)",
    )
    return parser


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat(sep=" ") if isinstance(value, datetime) else value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


def _print_rows(columns: list[str], rows: list[tuple[Any, ...]], fmt: str) -> None:
    out = sys.stdout
    if fmt == "json":
        for row in rows:
            out.write(json.dumps({c: _plain(v) for c, v in zip(columns, row, strict=True)}) + "\n")
        return
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[_plain(v) for v in row] for row in rows])
        return
    cells = [["NULL" if v is None else str(_plain(v)) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    line = "+".join("-" * (w + 2) for w in widths)
    out.write("| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)) + " |\n")
    out.write("|" + line + "|\n")
    for cell_row in cells:
        padded = (v.ljust(w) for v, w in zip(cell_row, widths, strict=True))
        out.write("| " + " | ".join(padded) + " |\n")
    out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n")


def _unfinished(status: Any) -> str:
    lines = []
    if status.started_batch_id is not None:
        lines.append(
            f"half-done: micro-batch {status.started_batch_id} started but did not commit; "
            "`acker run` finishes it"
        )
    if status.unfinished_tick is not None:
        lines.append(
            f"half-done: the tick to epoch {status.unfinished_tick} did not commit; "
            "`acker run` or `acker tick` finishes it"
        )
    return "".join(line + "\n" for line in lines)


def _summary(config: Config, status: Any) -> str:
    return (
        f"epoch {status.epoch}, last batch {status.last_batch_id}\n"
        f"{_unfinished(status)}"
        f"  events     {status.events:>9}\n"
        f"  completed  {status.completed:>9}\n"
        f"  failed     {status.failed:>9}\n"
        f"  expired    {status.expired:>9}\n"
        f"  pending    {status.pending:>9}\n"
        f"  late       {status.late_events:>9}\n"
        f"  quarantine {status.quarantined:>9}\n"
        f"{_headline(status)}"
        f"tables: {config.qualified_schema}.* in {config.warehouse_uri}"
    )


def _headline(status: Any) -> str:
    """The analyst's first questions, each with the view that answers it in full."""
    lines = [f"replay queue {status.replay_queue} trees (select * from replay_queue)"]
    if status.latency_p50_ms is not None:
        lines.append(
            f"latency p50 {status.latency_p50_ms} ms, p99 {status.latency_p99_ms} ms "
            "(select * from latency)"
        )
    if status.oldest_pending_epochs is not None:
        age = status.oldest_pending_epochs
        lines.append(
            f"oldest pending tree {age} epoch{'' if age == 1 else 's'} old "
            "(select * from stuck_trees)"
        )
    return "".join(f"  {line}\n" for line in lines)


def _log_progress(result: Any, as_json: bool) -> None:
    """A line on stderr as a run commits each micro-batch (with the epochs of a pass that
    applies several, and how long it took) and each tick pass (how many trees expired); with
    ``as_json``, one record per micro-batch and per tick."""
    from pipelines.engine import BatchResult

    if isinstance(result, BatchResult):
        records = [{"event": "batch", **vars(result)}]
        resolved = (result.completed or 0) + (result.failed or 0)
        through = result.through_epoch or result.epoch
        epochs = f", epochs {result.epoch} to {through}" if through > result.epoch else ""
        line = (
            f"batch {result.batch_id}{epochs}: {result.events_in} events, "
            f"{resolved} trees resolved, {(result.duration_ms or 0) / 1000:.1f} s"
        )
    else:
        records = [{"event": "tick", **vars(tick)} for tick in result]
        expired = sum(tick.expired_timeout + tick.expired_no_init for tick in result)
        ticks = "tick" if len(result) == 1 else f"{len(result)} ticks"
        line = f"{ticks} to epoch {result[-1].epoch}: {expired} trees expired"
    if as_json:
        line = "\n".join(json.dumps({k: _plain(v) for k, v in r.items()}) for r in records)
    print(line, file=sys.stderr, flush=True)


class _StatusLine:
    """Progress lines on stderr. On a terminal, a line starting with spaces (a count that keeps
    growing, such as rows read) is rewritten in place until the next plain line."""

    def __init__(self) -> None:
        self.live = sys.stderr.isatty()
        self.open = False

    def __call__(self, line: str) -> None:
        if self.live and line.startswith(" "):
            sys.stderr.write("\r\x1b[2K" + line.strip())
            self.open = True
        else:
            sys.stderr.write(("\r\x1b[2K" if self.open else "") + line + "\n")
            self.open = False
        sys.stderr.flush()


def _run_line(report: Any) -> str:
    return (
        f"processed {report.batches} micro-batches, {report.events_in} events: "
        f"{report.completed} completed, {report.failed} failed; {len(report.ticks)} ticks"
    )


def _dispatch(args: argparse.Namespace, config: Config) -> None:
    from pipelines import jobs, lease
    from pipelines.engine import prepare_outcome_lookup
    from pipelines.ingest import IngestReport
    from pipelines.run_record import file_keys, nothing_to_run
    from pipelines.session import build_session, finish_shared_classes
    from pipelines.sql import TABLES
    from pipelines.status_record import note_status_asked
    from pipelines.tables import INGESTED_TABLES

    say = None if args.quiet else _StatusLine()
    progress = (
        None if args.quiet else partial(_log_progress, as_json=getattr(args, "log_json", False))
    )
    if args.verb == "status":
        recorded = jobs.recorded_status(config)
        if recorded is not None:
            note_status_asked(config)
            print(_summary(config, recorded))
            return
    landed = file_keys(config, args.ingest) if args.verb == "run" and args.ingest else []
    if args.verb == "run" and not args.continuous and nothing_to_run(config, landed=landed):
        if say is not None:
            news = "no new file, " if args.ingest else ""
            say(
                f"nothing to do: {news}no event since the last run and no tick due; "
                "Spark not started"
            )
        if args.ingest:
            files = len(landed or ())
            _say_ingested(config, IngestReport(files, 0, 0, files))
        print(_run_line(jobs.RunReport(batches=0, events_in=0, completed=0, failed=0, ticks=[])))
        return
    if say is not None and args.verb == "demo":
        say(f"starting Spark ({config.spark.remote or config.spark.master})")
    lean_jvm, short_lived, events_compiled = _jvm_for(
        args.verb,
        getattr(args, "continuous", False),
        _events_to_apply(args, config, landed),
        *_table_bytes(config),
    )
    spark = build_session(
        config,
        short_lived=short_lived,
        shared_classes=True,
        lean_jvm=lean_jvm,
        events_compiled=events_compiled,
    )
    leased = args.verb in _LEASED
    with (
        _snapshots_warmed_beside(args, spark, config),
        _ingesting_beside(args, config, spark, say) as ingesting,
        lease.writer_lease(spark, config, args.verb, args.wait, say) if leased else nullcontext(),
    ):
        if ingesting is not None:
            # The run attaches its other tables, and analyses its first look-up, while the
            # ingest attaches and writes its own.
            others = [table for table in TABLES if table not in INGESTED_TABLES]
            jobs.open_tables(spark, config, views=(), tables=others)
            prepare_outcome_lookup(spark, config)
            ingesting.result()  # the run applies what it ingested
        _run_verb(args, config, spark, say, progress, landed)
    if args.verb in _REFRESHING_STATUS:
        plain_say = None if getattr(args, "log_json", False) else say
        jobs.refresh_status_record(spark, config, plain_say)
    finish_shared_classes(spark, config, say)


@contextmanager
def _ingesting_beside(
    args: argparse.Namespace,
    config: Config,
    spark: SparkSession,
    say: Callable[[str], None] | None,
) -> Iterator[Future[None] | None]:
    """For ``acker run --ingest``: ingest the files in a thread of their own while the caller
    claims the writer lease, and yield the ingest to wait for (``None`` for any other verb).
    An ingest holds no lease, and the two are the first Delta statements of a new process, which
    overlap on two cores (a 5-minute cycle at 200 trees/s: 12.7 -> 10.1 s to both). The ``with``
    block ends only once the ingest has."""
    if not (args.verb == "run" and args.ingest):
        yield None
        return
    with ThreadPoolExecutor(1, thread_name_prefix="acker-ingest") as pool:
        yield pool.submit(_ingest, spark, config, args.ingest, None, say)


@contextmanager
def _snapshots_warmed_beside(
    args: argparse.Namespace, spark: SparkSession, config: Config
) -> Iterator[None]:
    """For ``acker run`` and ``acker ingest`` in a classic session: load the Delta snapshots
    of the tables the verb reads first in a thread of their own: in a new process each table's
    first read costs about a second (:func:`pipelines.tables.snapshots_warmed_beside`). An
    ingest's append reads the snapshot of ``ack_events`` (the idempotent write looks its file
    up in it), warmed while the ingest attaches the table and reads the file's schema; a run
    looks its anchors up in the outcome tables and ``pending``, warmed while it claims the
    writer lease (and ingests: a 5-minute cycle at 200 trees/s 1.7 s shorter, 4 pairs on
    copies of one warehouse, decisions.md)."""
    from pipelines.sql import OUTCOME_TABLES
    from pipelines.tables import snapshots_warmed_beside

    ingested = ("ack_events",) if args.verb == "ingest" or getattr(args, "ingest", None) else ()
    read = (*OUTCOME_TABLES, "pending") if args.verb == "run" else ()
    with snapshots_warmed_beside(spark, config, (*ingested, *read)):
        yield


def _jvm_for(
    verb: str,
    continuous: bool,
    events: int | None,
    pending_bytes: int | None,
    outcome_bytes: int | None,
) -> tuple[bool, bool, bool]:
    """Whether ``verb`` starts a lean JVM, whether it interprets its queries, and whether it
    compiles those over events all the same (:data:`pipelines.session.EVENT_QUERIES_COMPILED`),
    for about ``events`` events to read or apply, over tables of ``pending_bytes`` (``pending``) and
    ``outcome_bytes`` (the outcome tables); ``None`` where that is not known before Spark
    starts. A verb that ends when its work does starts a lean JVM unless that work is large
    enough for the optimising compiler to pay; a continuous run, which lives for hours, keeps
    the JVM's defaults. One with few events over small tables interprets its queries, as
    status does; a run or ingest of more, where `pending` is small, interprets all but those
    over the events."""
    from pipelines.session import (
        INTERPRETED_EVENTS_AT_MOST,
        INTERPRETED_OUTCOME_BYTES_AT_MOST,
        INTERPRETED_PENDING_BYTES_AT_MOST,
        LEAN_JVM_EVENTS_AT_MOST,
    )

    if continuous:
        return False, False, False
    lean = events is None or events <= LEAN_JVM_EVENTS_AT_MOST
    few = events is not None and events <= INTERPRETED_EVENTS_AT_MOST
    small_pending = pending_bytes is not None and pending_bytes <= INTERPRETED_PENDING_BYTES_AT_MOST
    small_tables = (
        small_pending
        and outcome_bytes is not None
        and outcome_bytes <= INTERPRETED_OUTCOME_BYTES_AT_MOST
    )
    interpreted = verb in _SHORT_LIVED or (
        few
        and (
            verb in _SHORT_WITH_FEW_EVENTS
            or (small_tables and verb in _SHORT_WITH_FEW_EVENTS_AND_SMALL_TABLES)
        )
    )
    events_compiled = (
        not interpreted
        # above the lean JVM's events a verb keeps the JVM's defaults, which interpreting undoes
        and lean
        and events is not None
        and verb in _COMPILING_ONLY_EVENT_QUERIES
        and (verb == "ingest" or small_pending)
    )
    return lean, interpreted or events_compiled, events_compiled


def _table_bytes(config: Config) -> tuple[int | None, int | None]:
    """The bytes of ``pending``'s files and of the outcome tables', from their Delta logs;
    ``None`` where not known."""
    from pipelines.sql import OUTCOME_TABLES
    from pipelines.tables import table_bytes

    outcomes = [table_bytes(config, table) for table in OUTCOME_TABLES]
    known = [size for size in outcomes if size is not None]
    return table_bytes(config, "pending"), sum(known) if len(known) == len(outcomes) else None


def _events_to_apply(
    args: argparse.Namespace, config: Config, landed: Sequence[FileKey] | None
) -> int | None:
    """About how many events the verb reads or applies, known before Spark starts: the files
    it ingests (a run's, ``landed``, already listed) and, for a run, what ``ack_events`` holds
    that the stream has not read; ``None`` where that cannot be told (files on an object store,
    a path ingest will refuse, tables whose logs this process does not read)."""
    from pipelines.ingest import estimated_events
    from pipelines.run_record import unread_events

    if args.verb == "ingest":
        return estimated_events(args.paths, args.format)
    if args.verb == "run":
        if landed is None:
            return None
        files = estimated_events([path for path, _, _ in landed])
        unread = unread_events(config)
        return None if files is None or unread is None else files + unread
    return 0


def _run_verb(
    args: argparse.Namespace,
    config: Config,
    spark: SparkSession,
    say: Callable[[str], None] | None,
    progress: Callable[[Any], None] | None,
    landed: Sequence[FileKey] | None,
) -> None:
    """Do what ``args.verb`` asks, on a session already started."""
    from pipelines import jobs, lease
    from pipelines.sql import TABLES, VIEWS, relations_read

    if args.verb == "init":
        created = jobs.init(spark, config)
        print(
            f"created {len(created)} tables in {config.qualified_schema} at {config.warehouse_uri}"
        )
    elif args.verb == "ingest":
        _ingest(spark, config, args.paths, args.format, say)
    elif args.verb == "run":
        if args.continuous:
            if args.trigger_interval <= 0:
                raise ConfigError(f"--trigger-interval = {args.trigger_interval}: must be > 0")
            stop = threading.Event()
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda *_: stop.set())
            report = jobs.run_continuously(spark, config, stop, args.trigger_interval, progress)
        else:
            report = jobs.run(spark, config, progress, landed or ())
        print(_run_line(report))
    elif args.verb == "tick":
        if args.count < 0:
            raise ConfigError(f"tick N = {args.count}: must be >= 0")
        results = jobs.tick(spark, config, args.count)
        expired = sum(r.expired_timeout + r.expired_no_init for r in results)
        epoch = results[-1].epoch if results else jobs.status(spark, config).epoch
        print(f"epoch {epoch}: {expired} trees expired")
    elif args.verb == "status":
        print(_summary(config, jobs.status(spark, config)))
    elif args.verb == "sql":
        # Only what the query names is attached: each table costs a read of its log, each view
        # an analysis of its query (`select 1`, cold: about 2 s less).
        read = relations_read(args.query)
        jobs.open_tables(spark, config, views=read & VIEWS.keys(), tables=read & TABLES.keys())
        if lease.LEASE_TABLE in args.query:
            lease.attach_lease_table(spark, config)
        df = spark.sql(args.query)
        limit = args.limit if args.format == "table" else None
        rows = [tuple(row) for row in (df.limit(limit) if limit else df).collect()]
        _print_rows(df.columns, rows, args.format)
    elif args.verb == "demo":
        print(_summary(config, jobs.demo(spark, config, progress=progress, say=say)))
    elif args.verb == "maintain":
        for table in jobs.maintain(spark, config):
            print(
                f"{table.table}: {table.files_removed} files compacted into {table.files_added}; "
                f"now {table.files} files, {table.bytes} bytes"
            )


def _ingest(
    spark: SparkSession,
    config: Config,
    paths: list[str],
    fmt: str | None,
    say: Callable[[str], None] | None,
) -> None:
    """Append the event files at ``paths`` to ``ack_events`` and say what was appended."""
    from pipelines import jobs
    from pipelines.sql import session_compiling_events
    from pipelines.tables import INGESTED_TABLES

    # Its own session where the claim beside it interprets its queries and the ingest's are
    # compiled.
    spark = session_compiling_events(spark)
    jobs.open_tables(spark, config, views=(), tables=INGESTED_TABLES)
    _say_ingested(config, jobs.ingest(spark, config, paths, fmt=fmt, progress=say))


def _say_ingested(config: Config, ingested: IngestReport) -> None:
    new_files = ingested.files - ingested.skipped_files
    print(
        f"ingested {new_files} files: {ingested.accepted} events into "
        f"{config.qualified('ack_events')}, {ingested.quarantined} rows quarantined; "
        f"{ingested.skipped_files} files already ingested, skipped"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``acker`` console script."""
    args = _parser().parse_args(argv)
    try:
        config = load_config(
            args.conf, warehouse=args.warehouse, catalog=args.catalog, schema=args.schema
        )
        # Writers take the lock before Spark starts, so a second writer is refused at once.
        with writer_lock(config, args.verb) if args.verb in _WRITERS else nullcontext():
            _dispatch(args, config)
    except ConfigError as error:
        if args.debug:
            traceback.print_exc()
        print(f"acker: config error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # one line for the operator; Spark's own trace went to the log
        if args.debug:
            traceback.print_exc()
        print(f"acker {args.verb}: {type(error).__name__}: {_one_line(error)}", file=sys.stderr)
        return 1
    return 0


def _one_line(error: Exception) -> str:
    """The error's first line; for one raised in the JVM, its deepest cause's, since Py4J's own
    first line names only the call that failed ("An error occurred while calling o123.count")."""
    text = str(error)
    java = getattr(error, "java_exception", None)
    if java is not None:
        try:
            while java.getCause() is not None:
                java = java.getCause()
            text = java.toString()
        except Exception:  # the JVM is gone: Py4J's text is all there is
            pass
    return (text.strip().splitlines() or [type(error).__name__])[0]


if __name__ == "__main__":
    sys.exit(main())
