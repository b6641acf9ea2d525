"""The jobs behind the CLI verbs, as plain functions for notebooks and schedulers.

Each takes ``spark`` first and a validated :class:`~pipelines.config.Config`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from pipelines import engine
from pipelines.clock import (
    SLICE_SPAN,
    STAGED_CLOCKS,
    Arrivals,
    Stager,
    drain,
    event_time_started,
    processing_clock,
    tick_due,
    tick_on_clock,
)
from pipelines.config import Config
from pipelines.engine import (
    BatchResult,
    Position,
    Progress,
    TickResult,
    position_after,
    position_after_ticks,
    process_batch,
    read_position,
)
from pipelines.errors import (
    REFUSALS,
    AckerError,
    ClockMismatch,
    NotInitialised,
    StreamFailed,
    UnsupportedSession,
)
from pipelines.ingest import ACK_EVENTS_SCHEMA, IngestReport, ingest
from pipelines.lease import LEASE_TABLE, check_lease, create_lease_table
from pipelines.lock import writer_lock
from pipelines.run_record import (
    FileKey,
    save_run_record,
    take_recorded_position,
    unread_files,
)
from pipelines.session import is_connect
from pipelines.sql import TABLES, VIEWS, quoted_table, relations_read_by, run_sql_figures
from pipelines.status_record import (
    REFRESH_WINDOW_S,
    current_heads,
    has_status_record,
    load_status_figures,
    note_status_asked,
    save_status_figures,
    status_asked_within,
)
from pipelines.tables import (
    apply_table_properties,
    attach_tables,
    create_tables,
    needs_upgraded_tables,
    upgrade_tables,
)
from pipelines.workload import Event, WorkloadSpec, generate_workload

__all__ = [
    "ACK_EVENTS_SCHEMA",
    "AckerError",
    "BatchApplier",
    "IngestReport",
    "Progress",
    "RunReport",
    "Status",
    "StopRequested",
    "TableMaintenance",
    "append_events",
    "demo",
    "ingest",
    "init",
    "maintain",
    "open_tables",
    "recorded_status",
    "refresh_status_record",
    "run",
    "run_continuously",
    "status",
    "tick",
]


@dataclass(frozen=True)
class RunReport:
    """What one ``acker run`` did."""

    batches: int
    events_in: int
    completed: int
    failed: int
    ticks: list[TickResult]


@dataclass(frozen=True)
class Status:
    """Headline numbers of a warehouse."""

    epoch: int
    last_batch_id: int
    started_batch_id: int | None
    unfinished_tick: int | None
    pending: int
    completed: int
    failed: int
    expired: int
    late_events: int
    quarantined: int
    events: int
    latency_p50_ms: int | None
    latency_p99_ms: int | None
    replay_queue: int
    oldest_pending_epochs: int | None


def init(spark: SparkSession, config: Config) -> list[str]:
    """Create the schema, tables and views that do not exist yet; return the tables created.
    Where it created them all, it records where they stand, so that the first run or tick
    need not read it from them (:mod:`pipelines.run_record`)."""
    with writer_lock(config, "init"):
        created = create_tables(spark, config)
        create_lease_table(spark, config)
        apply_table_properties(spark, config, [LEASE_TABLE])
        if set(created) == set(TABLES):
            save_run_record(config, engine.START, None)
        return created


def open_tables(
    spark: SparkSession,
    config: Config,
    views: Collection[str] = tuple(VIEWS),
    tables: Collection[str] = tuple(TABLES),
) -> None:
    """Attach an existing warehouse with ``tables`` and ``views`` (by default all), or stop with
    a clear message if it was never initialised."""
    missing = attach_tables(spark, config, views, tables)
    if missing:
        raise NotInitialised(
            f"warehouse {config.warehouse.path} has no table {config.qualified(missing[0])}: "
            "run `acker init` first"
        )


def append_events(spark: SparkSession, config: Config, events: Iterable[Event]) -> int:
    """Append events to ``ack_events`` (as any producer would); return how many."""
    rows = [event.row() for event in events]
    if rows:
        df = spark.createDataFrame(rows, ACK_EVENTS_SCHEMA)
        df.write.format("delta").mode("append").saveAsTable(config.qualified("ack_events"))
    return len(rows)


class _Heard:
    """Keeps the micro-batches a run commits, for its report, and passes every micro-batch and
    tick on to the run's ``progress``."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.batches: list[BatchResult] = []

    def __call__(self, result: BatchResult | Sequence[TickResult]) -> None:
        if isinstance(result, BatchResult):
            self.batches.append(result)
        if self.progress is not None:
            self.progress(result)


class StopRequested(Exception):
    """Raised inside a micro-batch that arrives after a stop was requested: it writes nothing,
    and the stream replays it on the next start."""


def _start_stream(
    spark: SparkSession,
    config: Config,
    apply: Callable[[DataFrame, int], None],
    trigger: dict[str, Any],
    change_feed: bool,
) -> tuple[StreamingQuery, list[AckerError]]:
    """Start the stream over ``ack_events`` (its change data feed if ``change_feed``, whose rows
    carry their commit's timestamp); return it and the list its refusals land in."""
    reader = spark.readStream.format("delta")
    if change_feed:
        reader = reader.option("readChangeFeed", "true")
    events = reader.option("maxFilesPerTrigger", config.acker.max_files_per_batch).table(
        config.qualified("ack_events")
    )
    refusals: list[AckerError] = []

    def apply_batch(batch: DataFrame, batch_id: int) -> None:
        try:
            apply(batch, batch_id)
        except AckerError as refusal:
            refusals.append(refusal)
            raise

    query = (
        events.writeStream.foreachBatch(apply_batch)
        .trigger(**trigger)
        .option("checkpointLocation", config.checkpoint_uri)
        .start()
    )
    return query, refusals


class BatchApplier:
    """Applies the stream's micro-batches, carrying where the acker stands from one to the
    next: the run holds the writer lock, so after a committed batch the position is known
    without reading three tables again (1-3 s per small batch). ``position`` is where the
    acker stands before the first batch, if the caller knows it; the caller that ticks
    between batches sets it to where the ticks left the acker."""

    def __init__(self, config: Config, position: Position | None = None) -> None:
        self.config = config
        self.position: Position | None = position

    def apply(self, batch: DataFrame, batch_id: int) -> BatchResult | None:
        spark = batch.sparkSession
        position = self.position or read_position(spark, self.config)
        # After a staged clock, whose slices of stream batch S have ids from S * 2**20, each
        # stream batch keeps that numbering.
        if position.last_batch_id >= SLICE_SPAN:
            batch_id *= SLICE_SPAN
        result = process_batch(spark, self.config, batch, batch_id, position)
        if result is not None:
            self.position = position_after(result)
        return result


def _stream_applier(config: Config, position: Position) -> BatchApplier | Stager:
    """What the stream does with each micro-batch: apply it, starting from ``position``, or,
    under a clock that follows time, stage it for the drain that applies events in time
    order. Either carries where the acker stands as ``position``."""
    if config.acker.clock in STAGED_CLOCKS:
        return Stager(config, position)
    return BatchApplier(config, position)


_MISSING_CHANGE_DATA = "DELTA_MISSING_CHANGE_DATA"


def _process_available(
    spark: SparkSession,
    config: Config,
    progress: Progress,
    position: Position,
    applier: BatchApplier | Stager | Arrivals | None = None,
) -> Position:
    """Run the stream over what ``ack_events`` holds now, from ``position``, each micro-batch
    applied by ``applier`` (by default :func:`_stream_applier`'s); return where the acker then
    stands."""
    applier = applier or _stream_applier(config, position)
    # Over Spark Connect the micro-batches run in a Python worker on the server, where the
    # caller's progress cannot reach: it hears of them from the batch log once the stream ends.
    connect = is_connect(spark)

    def apply(batch: DataFrame, batch_id: int) -> None:
        result = applier.apply(batch, batch_id)
        if result is not None and not connect:
            progress(result)

    change_feed = config.acker.clock == "processing_time"
    try:
        _await_available(spark, config, apply, change_feed)
    except Exception as failure:
        if not (change_feed and _MISSING_CHANGE_DATA in str(failure)):
            raise
        # Rows appended before the feed was enabled (a warehouse of an older acker) have no
        # commit date in it, and a stream restarting on the feed reads its last committed
        # batch again: until a batch of rows appended since has been read, runs read without
        # the feed and stage what they read as arriving now, as the clock took them before.
        _await_available(spark, config, apply, change_feed=False)
    finally:
        committed = _committed_since(spark, config, position.last_batch_id) if connect else []
        for result in committed:
            progress(result)
    if committed:  # the server's applier carried the position, out of this process's reach
        return position_after(committed[-1])
    return applier.position or position


def _await_available(
    spark: SparkSession,
    config: Config,
    apply: Callable[[DataFrame, int], None],
    change_feed: bool,
) -> None:
    """Run the stream over what ``ack_events`` holds now, to its end."""
    query, refusals = _start_stream(spark, config, apply, {"availableNow": True}, change_feed)
    try:
        query.awaitTermination()
    except Exception as failure:
        # The stream wraps a refusal in its own failure; the operator needs the refusal.
        if refusals:
            raise refusals[0] from None
        refusal = _refusal_in(str(failure))
        if refusal is not None:
            raise refusal from None
        raise


_REFUSAL = re.compile(r"\b(" + "|".join(REFUSALS) + r"): (.+)")


def _refusal_in(failure: str) -> AckerError | None:
    """The refusal a micro-batch raised on a Spark Connect server, as its own class, from the
    stream's failure, which carries only the worker's traceback as text."""
    found = _REFUSAL.search(failure)
    return None if found is None else REFUSALS[found.group(1)](found.group(2).strip())


def _committed_since(spark: SparkSession, config: Config, last_batch_id: int) -> list[BatchResult]:
    """The committed micro-batches after ``last_batch_id``, from the batch log, in order."""
    rows = (
        spark.table(config.qualified("batches"))
        .where((F.col("batch_id") > last_batch_id) & (F.col("status") == "committed"))
        .orderBy("batch_id")
        .collect()
    )
    return [BatchResult(**row.asDict()) for row in rows]


def _resume(
    spark: SparkSession, config: Config, progress: Progress | None
) -> tuple[Position, list[TickResult], bool]:
    """Attach the tables, take where the acker stands (from the run record, where the last run
    or tick left one: :mod:`pipelines.run_record`, else from the tables), finish a tick a crash
    interrupted (an interrupted micro-batch is finished by the stream, which replays it), and
    return where the acker then stands, the ticks it made, and whether the position was
    recorded (then no work was left half-done)."""
    recorded = take_recorded_position(config)
    open_tables(spark, config, views=())
    upgrade_tables(spark, config)
    position = recorded or read_position(spark, config)
    if config.acker.clock != "event_time" and event_time_started(spark, config):
        raise ClockMismatch(
            f"acker.clock = {config.acker.clock!r}, but these tables were run under the "
            "event_time clock, whose micro-batch ids and staged events the other clocks "
            "cannot follow: keep acker.clock = 'event_time'"
        )
    if position.unfinished_tick is None:
        return position, [], recorded is not None
    anchored = processing_clock(spark, config)
    scale = None if anchored is None else anchored[1]
    finished, position = tick_on_clock(spark, config, 1, position, progress, scale)
    return position, finished, False


def run(
    spark: SparkSession,
    config: Config,
    progress: Progress | None = None,
    ingested: Sequence[FileKey] = (),
) -> RunReport:
    """Process every available event as micro-batches, then tick as the clock says.

    Holds the writer lock throughout. Work a crash left half-done is finished first: an
    interrupted tick here, an interrupted micro-batch by the stream, which replays it.
    ``progress`` hears of every micro-batch and tick as it commits; ``ingested``: the files
    ingested just before (:func:`pipelines.run_record.file_keys`), for the run record.
    """
    heard = _Heard(progress)
    with writer_lock(config, "run"):
        position, finished, settled = _resume(spark, config, heard)
        arrivals = (
            Arrivals(config, position, heard, settled) if _drains_arrivals(spark, config) else None
        )
        position = _process_available(spark, config, heard, position, arrivals)
        ticks = [] if arrivals is None else arrivals.ticks
        # The drain after the stream applies what was staged, and, where no stream batch
        # arrived, what earlier runs left staged.
        if config.acker.clock in STAGED_CLOCKS and (
            arrivals is None or arrivals.staged or not arrivals.drained
        ):
            settled = settled or (arrivals is not None and arrivals.drained)
            drained, position = drain(spark, config, position, heard, settled)
            ticks = ticks + drained
        ticked, position = tick_due(spark, config, position, heard)
        _record_where_it_stands(spark, config, position, ingested)
        return _run_report(heard.batches, finished + ticks + ticked)


def _drains_arrivals(spark: SparkSession, config: Config) -> bool:
    """Whether a run drains its stream batch as it arrives (:class:`Arrivals`): under
    event_time, where the stream will read one batch (it has no more unread files of
    ``ack_events`` than one batch takes), so that the drain applies what a drain after the
    stream would; not over Spark Connect, whose server runs the stream's batches out of reach
    of this run's progress."""
    if config.acker.clock != "event_time" or is_connect(spark):
        return False
    files = unread_files(config)
    return files is not None and files <= config.acker.max_files_per_batch


def _record_where_it_stands(
    spark: SparkSession, config: Config, position: Position, ingested: Sequence[FileKey] = ()
) -> None:
    """After a run or tick: record where the acker stands, for the next one."""
    anchored = processing_clock(spark, config)
    save_run_record(config, position, None if anchored is None else anchored[1], ingested)


def run_continuously(
    spark: SparkSession,
    config: Config,
    stop: threading.Event,
    trigger_interval_s: float,
    progress: Progress | None = None,
) -> RunReport:
    """Keep the stream running, a micro-batch every ``trigger_interval_s`` when events have
    arrived, and tick on the clock even when none arrive, until ``stop`` is set.

    A micro-batch and a tick never overlap. On stop, the micro-batch in progress finishes and
    commits; one that starts later raises :class:`StopRequested` before writing anything, so
    the next run replays it. Nothing is lost or applied twice.
    """
    if is_connect(spark):
        raise UnsupportedSession(
            "continuous mode needs a classic Spark session, and spark.remote = "
            f"{config.spark.remote!r} makes a Spark Connect one: its micro-batches would run on "
            "the server, out of reach of this run's stop and ticks; run `acker run` on a schedule"
        )
    heard = _Heard(progress)
    with writer_lock(config, "run"):
        position, ticks, settled = _resume(spark, config, heard)
        work = threading.Lock()
        applier = _stream_applier(config, position)

        def apply(batch: DataFrame, batch_id: int) -> None:
            nonlocal settled
            with work:
                if stop.is_set():
                    raise StopRequested(f"micro-batch {batch_id} left for the next run")
                result = applier.apply(batch, batch_id)
                if isinstance(applier, Stager):
                    drained, applier.position = drain(
                        spark, config, applier.position, heard, settled
                    )
                    settled = True  # this process's drain removed every row it applied
                    ticks.extend(drained)
            if result is not None:
                heard(result)

        trigger = {"processingTime": f"{trigger_interval_s} seconds"}
        change_feed = config.acker.clock == "processing_time"
        query, refusals = _start_stream(spark, config, apply, trigger, change_feed)
        try:
            while not stop.wait(timeout=min(1.0, trigger_interval_s)):
                if not query.isActive:
                    break
                with work:
                    check_lease(config)  # an idle run keeps its lease too
                    standing = applier.position or read_position(spark, config)
                    ticked, applier.position = tick_due(spark, config, standing, heard)
                    ticks += ticked
        finally:
            stop.set()
            with work:  # the micro-batch in progress, if any, commits first
                pass
            query.stop()
        failure = query.exception()
        if refusals:
            raise refusals[0]
        if failure is not None and _MISSING_CHANGE_DATA in str(failure):
            raise StreamFailed(
                "ack_events holds rows appended before its change data feed was enabled: run "
                "`acker run` once to apply them, then start the continuous run again"
            )
        if failure is not None and "StopRequested" not in str(failure):
            raise StreamFailed(f"the stream failed: {str(failure).splitlines()[0]}")
        return _run_report(heard.batches, ticks)


def _run_report(batches: list[BatchResult], ticks: list[TickResult]) -> RunReport:
    return RunReport(
        batches=len(batches),
        events_in=sum(batch.events_in or 0 for batch in batches),
        completed=sum(batch.completed or 0 for batch in batches),
        failed=sum(batch.failed or 0 for batch in batches),
        ticks=ticks,
    )


def tick(spark: SparkSession, config: Config, count: int = 1) -> list[TickResult]:
    """Advance the epoch ``count`` times by hand (``acker tick N``), holding the writer lock."""
    with writer_lock(config, "tick"):
        recorded = take_recorded_position(config)
        open_tables(spark, config, views=())
        upgrade_tables(spark, config)
        position = recorded or read_position(spark, config)
        ticked = engine.tick(spark, config, count, position=position)
        _record_where_it_stands(spark, config, position_after_ticks(position, count))
        return ticked


def status(spark: SparkSession, config: Config) -> Status:
    """Headline numbers: epoch, last committed batch, pending and outcome counts. A local
    warehouse records them (:mod:`pipelines.status_record`), and notes that they were asked."""
    return _status(spark, config, asked=True)


def _status(spark: SparkSession, config: Config, asked: bool) -> Status:
    # Taken before the tables are read: a commit during the read outdates the record at once.
    heads = current_heads(config)
    open_tables(spark, config, views=relations_read_by("summarize_status") & VIEWS.keys())
    # The position's two statements depend on each other; beside the figures' statements
    # rather than after them (a cold probe on the demo warehouse: 10.4 s against 11.8 s).
    with needs_upgraded_tables(spark, config), ThreadPoolExecutor(1) as beside:
        reading = beside.submit(read_position, spark, config)
        figures = run_sql_figures(spark, config, "summarize_status")
        position = reading.result()
    found = Status(**asdict(position), **figures)
    if heads is not None:
        save_status_figures(config, heads, asdict(found))
        if asked:
            note_status_asked(config)
    return found


def refresh_status_record(
    spark: SparkSession, config: Config, say: Callable[[str], None] | None = None
) -> bool:
    """Bring the status record up to the tables after a write, if :func:`status` has recorded
    one for this warehouse, a status was asked within the refresh window
    (:data:`~pipelines.status_record.REFRESH_WINDOW_S`), and the write outdated the record: a
    warehouse whose status is being read keeps answering it without Spark, at the cost of a
    status per write; one whose status nobody asked lately pays nothing, and its next status
    reads the tables. Returns whether it refreshed; ``say`` hears that it does."""
    if not has_status_record(config) or not status_asked_within(config, REFRESH_WINDOW_S):
        return False
    if load_status_figures(config) is not None:  # still current (`tick 0` ends with one)
        return False
    if say is not None:
        say("refreshing the status record, which `acker status` reads without Spark")
    _status(spark, config, asked=False)
    return True


def recorded_status(config: Config) -> Status | None:
    """The status :func:`status` recorded, if no table has changed since but by appends it can
    count without Spark (:mod:`pipelines.status_record`); ``None`` otherwise."""
    figures = load_status_figures(config)
    return Status(**figures) if figures is not None else None


@dataclass(frozen=True)
class TableMaintenance:
    """What ``acker maintain`` did to one table: files compacted, and its size after."""

    table: str
    files_removed: int
    files_added: int
    files: int
    bytes: int


def maintain(
    spark: SparkSession, config: Config, tables: Collection[str] = tuple(TABLES)
) -> list[TableMaintenance]:
    """Compact the small files of ``tables`` (by default every table) with OPTIMIZE, then
    delete files no version younger than ``maintain.vacuum_retain_hours`` needs (VACUUM). Holds
    the writer lock, so no batch runs meanwhile; readers of older versions within the retention
    are unaffected."""
    with writer_lock(config, "maintain"):
        open_tables(spark, config, views=())
        done = []
        for table in (table for table in TABLES if table in tables):
            name = quoted_table(config, table)
            check_lease(config)
            compaction = spark.sql(f"optimize {name}").first()
            metrics = compaction["metrics"] if compaction is not None else None
            hours = config.maintain.vacuum_retain_hours
            spark.sql(f"vacuum {name} retain {hours:f} hours").collect()
            detail = spark.sql(f"describe detail {name}").first()
            assert detail is not None  # DESCRIBE DETAIL returns one row per table
            done.append(
                TableMaintenance(
                    table=table,
                    files_removed=int(metrics["numFilesRemoved"]) if metrics else 0,
                    files_added=int(metrics["numFilesAdded"]) if metrics else 0,
                    files=int(detail["numFiles"]),
                    bytes=int(detail["sizeInBytes"]),
                )
            )
        return done


def demo(
    spark: SparkSession,
    config: Config,
    spec: WorkloadSpec | None = None,
    progress: Progress | None = None,
    say: Callable[[str], None] | None = None,
) -> Status:
    """Generate a workload (if the warehouse has no events yet), process it batch by batch
    with a tick after each, then tick until every unfinished tree has expired.

    ``say`` hears each step as it starts, ``progress`` every micro-batch and tick as it commits.
    """

    def step(line: str) -> None:
        if say is not None:
            say(line)

    def tick_and_tell(count: int) -> None:
        results = tick(spark, config, count)
        if progress is not None and results:
            progress(results)

    with writer_lock(config, "demo"):
        step(f"creating the tables of {config.qualified_schema} in {config.warehouse_uri}")
        init(spark, config)
        spec = spec or WorkloadSpec(trees=5000, batches=4, seed=2026)
        if spark.table(config.qualified("ack_events")).isEmpty():
            step(f"generating {spec.trees} tuple trees, in {spec.batches} chunks of events")
            events = generate_workload(spec)
            for batch in range(spec.batches):
                appended = append_events(spark, config, (e for e in events if e.batch == batch))
                step(f"chunk {batch + 1}/{spec.batches}: {appended} events appended to ack_events")
                run(spark, config, progress)
                tick_and_tell(1)
        run(spark, config, progress)
        step(f"ticking {config.acker.buckets} times: every tree still pending expires")
        tick_and_tell(config.acker.buckets)
        return status(spark, config)
