"""The acker's two state transitions: applying a micro-batch of events, and a tick.

Both read where the acker stands from the tables, compute everything from one snapshot of
``pending``, write their outputs first and change ``pending`` last, so re-running either after
a crash finishes it without duplicating or losing a row:

- a micro-batch replaces exactly its own rows in every output table (overwrite where
  ``batch_id`` = its id), and ``pending`` is opaque transactional state (each row keeps its
  values before the batch that wrote it), so applying a batch again, with the same or
  different content, leaves what one application would;
- a tick has no input of its own, and each of its writes before the last carries the new
  epoch as its Delta ``txnVersion``, so Delta skips a write the tick already committed; the
  last, the ``ticks`` rows, is where the epoch is read from, so once it commits no run ticks
  that epoch again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from functools import reduce
from typing import Any

from py4j.java_gateway import JavaClass
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.config import Clock, Config
from pipelines.errors import CheckpointMismatch, InterruptedWork, ReplayConflict
from pipelines.faults import crash_point
from pipelines.lease import app_id, check_lease, dml_fence, transaction_id
from pipelines.session import is_connect
from pipelines.sql import (
    OUTCOME_TABLES,
    aggregate_row,
    checkpoint_counted,
    compiled_for_events,
    row_as,
    run_sql,
    run_sql_row,
    session_settings,
)
from pipelines.tables import (
    REBORN_ENTRIES_PROPERTY,
    LogHeads,
    log_heads,
    schema_uri,
    snapshots_warmed_beside,
    table_property,
)

__all__ = [
    "BATCH_SUMMARY",
    "BROADCAST_MERGE_ROWS",
    "FOLD_PLANNING",
    "START",
    "TOUCHED_COUNTS",
    "BatchAnchors",
    "BatchFigures",
    "BatchInput",
    "BatchOutput",
    "BatchPlan",
    "BatchResult",
    "BatchSummary",
    "CrowdedEpoch",
    "EpochScale",
    "FoldedState",
    "PassTooWide",
    "Position",
    "StoredPosition",
    "TickResult",
    "TouchedCounts",
    "TouchedState",
    "WrittenAfter",
    "append_idempotent",
    "classify_events",
    "commit_batch",
    "committed_batch",
    "epoch_parts",
    "fold_batch",
    "fold_events",
    "interrupted_tick",
    "look_up_touched_state",
    "plan_batch",
    "position_after",
    "position_after_ticks",
    "prepare_outcome_lookup",
    "process_batch",
    "read_position",
    "release_checkpoints",
    "select_batch_anchors",
    "summarize_state",
    "tick",
    "unfinished_batch",
]


# Delta's MERGE plans its join without the size of a checkpointed source, so it shuffles all
# of pending, in each of its three scans; broadcasting the batch's new state instead took a
# MERGE into 10^7 pending trees from 5.1-5.8 s to 1.2-3.0 s for a small batch, and from 14.6
# to 10.2 s for a 10^7-event batch's 465,000 rows (7.5 to 4.3 s for a 10^6-event batch's over
# 5·10^6). A row of batch_state holds a tree's new and previous values, about 200 bytes: at
# most 100 MB broadcast, far below what a batch of that many trees holds in memory anyway.
BROADCAST_MERGE_ROWS = 500_000

# The most anchors a micro-batch broadcasts to its read of pending's touched rows: 8 bytes each,
# 32 MB at most. Spark estimates a batch's distinct anchors from its events and broadcasts them
# only below about 1.2 million (a batch of 6 million events); above, the read shuffled all of
# pending to meet them (16.1 s of a 10^7-event batch over 10^7 pending trees, then 8.7 s).
_TOUCHED_ANCHORS_BROADCAST = 4_000_000

# Above this many applied keys a tree's re-deliveries are found by one hashed intersection with
# the batch's keys rather than a search per event (mark_redeliveries.sql): a scan of 64 longs is
# cheaper than building a hash set, a scan of 10^5 per event is not.
_LARGE_TREE_KEYS = 64

# The most late events whose trees select_late_events.sql broadcasts to the batch's events:
# about 40 bytes a tree, 40 MB at most.
_LATE_TREES_BROADCAST = 1_000_000

# The fold aggregates by anchor with collect_set and collect_list, which Spark plans as object
# hash aggregates; each falls back to sorting its rows once a task holds more than 128 groups
# (every fold does), after building a hash map for nothing. Planned as sort aggregates instead,
# the events, already grouped by anchor, are sorted once: the fold of an hour at 200 trees/s
# (5.1 million events) 24.1 s against 29.4 s, of a 5-minute cycle 5.3 s against 6.1 s.
FOLD_PLANNING = {"spark.sql.execution.useObjectHashAggregateExec": "false"}

BATCHES_SCHEMA = T.StructType(
    [
        T.StructField("batch_id", T.LongType()),
        T.StructField("status", T.StringType()),
        T.StructField("epoch", T.LongType()),
        T.StructField("input_fingerprint", T.StringType()),
    ]
    + [T.StructField(name, T.TimestampType()) for name in ("started_at", "finished_at")]
    + [
        T.StructField(name, T.LongType())
        for name in (
            "duration_ms",
            "events_in",
            "events_applied",
            "duplicates",
            "quarantined",
            "late",
            "completed",
            "failed",
            "overflowed",
            "pending_inserted",
            "pending_removed",
            "through_epoch",
        )
    ]
)


@dataclass(frozen=True)
class BatchResult:
    """What one micro-batch did; the same figures as its row in ``batches``."""

    batch_id: int
    status: str
    epoch: int
    input_fingerprint: str
    started_at: datetime
    finished_at: datetime | None
    duration_ms: int | None
    events_in: int | None = None
    events_applied: int | None = None
    duplicates: int | None = None
    quarantined: int | None = None
    late: int | None = None
    completed: int | None = None
    failed: int | None = None
    overflowed: int | None = None
    pending_inserted: int | None = None
    pending_removed: int | None = None
    through_epoch: int | None = None
    """The last epoch whose events the batch applied: its epoch, or a later one for a pass
    that applies several epochs at once (the ticks to it follow the batch)."""


class PassTooWide(Exception):
    """A pass over several epochs that cannot be folded exactly: the capacity guard could fire
    at the end of its epoch ``crowded_epoch``. Raised before the pass writes anything: apply
    the epochs before it as a pass, and that epoch on its own, where the guard is exact."""

    def __init__(self, batch_id: int, epoch: int, through: int, crowded_epoch: int) -> None:
        super().__init__(
            f"micro-batch {batch_id} cannot apply epochs {epoch} to {through} at once: more "
            f"than max_pending trees could be pending at the end of epoch {crowded_epoch}"
        )
        self.crowded_epoch = crowded_epoch


@dataclass(frozen=True)
class TickResult:
    """What one tick did; the same figures as its row in ``ticks``."""

    epoch: int
    ticked_at: datetime
    clock: Clock
    expired_timeout: int
    expired_no_init: int
    last_batch_id: int
    late_no_init: int
    """Entries without init whose anchor already had an outcome: not expired, their events
    written to ``late_events``."""


Progress = Callable[[BatchResult | Sequence[TickResult]], None]
"""Hears every micro-batch as it commits, and the ticks of each tick pass together, as they
commit in one append."""


@dataclass(frozen=True)
class Position:
    """Where the acker stands, read from the tables."""

    epoch: int
    """The current epoch (0 before the first tick)."""
    last_batch_id: int
    """The last committed micro-batch (-1 if none)."""
    started_batch_id: int | None
    """A micro-batch started but not committed: interrupted, to be finished by ``acker run``."""
    unfinished_tick: int | None
    """The epoch of a tick interrupted after it wrote expired rows, to be finished first."""


# Where new tables stand: no tick, no batch.
START = Position(epoch=0, last_batch_id=-1, started_batch_id=None, unfinished_tick=None)


@dataclass(frozen=True)
class EpochScale:
    """Where epoch 0 starts and how long an epoch lasts, in microseconds since 1970: the time
    grid of a clock that follows time (event_time: the events' own; processing_time: the wall
    clock, anchored at its latest tick)."""

    origin_us: int
    interval_us: int

    def epoch_of(self, micros: int) -> int:
        return (micros - self.origin_us) // self.interval_us


def interrupted_tick(epoch: int, last_expired_epoch: int | None) -> int | None:
    """The epoch a run of ticks was heading for when it stopped before its last write: expired
    rows beyond the current epoch are written only by such a run."""
    if last_expired_epoch is not None and last_expired_epoch > epoch:
        return last_expired_epoch
    return None


@dataclass(frozen=True)
class StoredPosition:
    """read_position.sql: where the tables say the acker stands."""

    epoch: int
    last_batch_id: int
    started_batch_id: int | None
    """The ``started`` row an older acker wrote before a batch's first write."""
    last_expired_epoch: int | None
    last_late_tick_epoch: int | None


@dataclass(frozen=True)
class WrittenAfter:
    """find_unfinished_batch.sql: per table a batch writes, its newest batch id after the last
    committed one."""

    pending_batch_id: int | None
    completed_batch_id: int | None
    failed_batch_id: int | None
    late_batch_id: int | None
    quarantine_batch_id: int | None


def read_position(spark: SparkSession, config: Config) -> Position:
    """Read the current epoch, the last committed batch and any work left half-done. A run
    reads it once, or takes it from the run record (:mod:`pipelines.run_record`), and carries
    it from step to step."""
    stored = run_sql_row(spark, config, "read_position", StoredPosition)
    last_written = [stored.last_expired_epoch, stored.last_late_tick_epoch]
    return Position(
        epoch=stored.epoch,
        last_batch_id=stored.last_batch_id,
        started_batch_id=unfinished_batch(
            spark, config, stored.last_batch_id, stored.started_batch_id
        ),
        unfinished_tick=interrupted_tick(
            stored.epoch, max((e for e in last_written if e is not None), default=None)
        ),
    )


def position_after_ticks(position: Position, count: int) -> Position:
    """Where the acker stands once :func:`tick` has ticked ``count`` times from ``position``:
    a run of ticks a crash interrupted is finished first, and its epochs count toward
    ``count``."""
    if count <= 0:
        return position
    reached = max(position.unfinished_tick or position.epoch, position.epoch + count)
    return replace(position, epoch=reached, unfinished_tick=None)


# The outcome tables, whose anchors' events are late, and the columns of their rows the writer
# keeps besides the anchor and the outcome: what a late event's row carries, and the epoch
# that tells a run of ticks which outcomes came before it.
_OUTCOME_KEYS = ("reason", "batch_id", "epoch")

# The columns of late_events that select_ticks.sql counts.
_TICK_LATE_ROWS = T.StructType(
    [T.StructField("tick_epoch", T.LongType()), T.StructField("anchor_id", T.LongType())]
)

# Kept outcomes are a union of checkpointed parts, one per write: adding a write's rows costs
# what they do, not what the history does, and a read of many parts is compacted into one.
_MAX_KEPT_PARTS = 16


@dataclass(frozen=True)
class _KeptOutcomes:
    """Every outcome row (select_outcome_anchors.sql's columns), as the writer last read or
    wrote them, and the outcome tables' log heads after that."""

    heads: LogHeads
    parts: tuple[DataFrame, ...]

    def rows(self) -> DataFrame:
        return reduce(DataFrame.unionByName, self.parts)

    def in_session(self, spark: SparkSession) -> _KeptOutcomes | None:
        """These rows in ``spark``, whose SQL can then read them; ``None`` over Spark Connect,
        where nothing is kept."""
        kept = self.parts[0].sparkSession
        if is_connect(kept) or is_connect(spark):
            return None
        if kept._jsparkSession.equals(spark._jsparkSession):
            return self
        # A stream hands its micro-batches a session of its own, a new one for each run in the
        # process: the kept rows (checkpointed, so their plans read only cached blocks) move
        # to it instead of being read again from the tables (1.4 s per run of one small batch).
        dataset = spark._jvm.org.apache.spark.sql.classic.Dataset  # type: ignore[union-attr]
        parts = tuple(
            DataFrame(
                dataset.ofRows(spark._jsparkSession, part._jdf.queryExecution().logical()), spark
            )
            for part in self.parts
        )
        return replace(self, parts=parts)


# By schema folder. A micro-batch that follows the writer's own last writes looks its anchors up
# here rather than in the three tables: that look-up was 1.9 s of a 10^4-event micro-batch over
# 10^6 pending (8 s), most of it Delta rebuilding each table's snapshot after the last append.
_kept_outcomes: dict[str, _KeptOutcomes] = {}
# The schema folders whose outcomes a micro-batch of this process has looked up. A process's
# first micro-batch reads them without keeping them: a scheduled run applies one pass, and
# reading and keeping a day's outcomes (1.7*10^7 rows) took 24 s in a new process where the
# look-up alone took 11 s. From its second micro-batch on, a process keeps them.
_looked_up_by_a_batch: set[str] = set()


def _outcome_anchors(spark: SparkSession, config: Config, for_batch: bool) -> DataFrame:
    """Every row of ``completed``, ``failed`` and ``expired`` (columns of
    select_outcome_anchors.sql), from memory where the tables are as the writer left them;
    read from the tables, and kept for the next look-ups, where a micro-batch (``for_batch``)
    of this process looked them up before."""
    key = schema_uri(config)
    kept = _kept_outcomes.pop(key, None)
    known = None if kept is None else kept.heads
    heads = None if is_connect(spark) else log_heads(config, OUTCOME_TABLES, known)
    if heads is not None and kept is not None and kept.heads == heads:
        kept = kept.in_session(spark)
    else:
        kept = None
    if kept is not None:
        if len(kept.parts) > _MAX_KEPT_PARTS:
            parts = kept.parts
            kept = replace(kept, parts=(kept.rows().localCheckpoint(),))
            release_checkpoints(spark, parts)
        _kept_outcomes[key] = kept
        return kept.rows()
    rows = run_sql(spark, config, "select_outcome_anchors")
    if heads is None or not for_batch or key not in _looked_up_by_a_batch:
        if for_batch:
            _looked_up_by_a_batch.add(key)
        return rows
    # Kept with the heads from before the read: a commit during it makes the next look-up miss.
    rows = rows.localCheckpoint()
    _kept_outcomes[key] = _KeptOutcomes(heads, (rows,))
    return rows


def prepare_outcome_lookup(spark: SparkSession, config: Config) -> None:
    """Analyse the look-up among every outcome (select_outcome_anchors.sql) once, before a new
    process's first micro-batch: a run does it while its ingest writes. The first analysis of
    the three outcome tables in a new JVM took 1.3 s; the batch's own then took a fraction of
    it (decisions.md, 6 Dec)."""
    run_sql(spark, config, "select_outcome_anchors")


def _outcomes_to_keep(config: Config, rows: DataFrame) -> DataFrame | None:
    """``rows`` (select_outcome_anchors.sql's columns) checkpointed for
    :func:`_keep_outcomes_written`, or ``None`` where the writer keeps no outcomes. A
    micro-batch takes the checkpoint beside its appends, not after them."""
    return rows.localCheckpoint() if schema_uri(config) in _kept_outcomes else None


def _keep_outcomes_written(
    spark: SparkSession,
    config: Config,
    written: DataFrame | None,
    replaced_batch: int | None = None,
) -> None:
    """After the writer appended ``written`` (:func:`_outcomes_to_keep`'s checkpoint) to the
    outcome tables, replacing the completed and failed rows of ``replaced_batch`` (an earlier
    attempt of the batch that wrote them): add them to the kept outcomes, if the writer kept
    them."""
    key = schema_uri(config)
    kept = _kept_outcomes.pop(key, None)
    if kept is not None:
        kept = kept.in_session(spark)
    heads = None if kept is None else log_heads(config, OUTCOME_TABLES, kept.heads)
    if kept is None or heads is None or written is None:
        if written is not None:
            release_checkpoints(spark, (written,))
        return
    parts = kept.parts
    if replaced_batch is not None:
        earlier = kept.rows().where(
            (F.col("outcome") == "expired") | (F.col("batch_id") != replaced_batch)
        )
        parts = (earlier.localCheckpoint(),)
        release_checkpoints(spark, kept.parts)
    _kept_outcomes[key] = _KeptOutcomes(heads, (*parts, written))


def _forget_outcomes_unless_current(config: Config) -> None:
    """Before the writer appends to the outcome tables without a look-up first (a tick's
    expired rows): forget the kept outcomes if another's commit has made them stale."""
    key = schema_uri(config)
    kept = _kept_outcomes.get(key)
    if kept is not None and kept.heads != log_heads(config, OUTCOME_TABLES, kept.heads):
        del _kept_outcomes[key]


def unfinished_batch(
    spark: SparkSession, config: Config, last_batch_id: int, logged_started: int | None
) -> int | None:
    """The micro-batch after ``last_batch_id`` that wrote rows but did not commit, or whose
    ``started`` row an older acker left (``logged_started``); ``None`` if there is none."""
    found = run_sql_row(
        spark, config, "find_unfinished_batch", WrittenAfter, last_batch_id=last_batch_id
    )
    written = [batch for batch in (*asdict(found).values(), logged_started) if batch is not None]
    return max(written, default=None)


def append_idempotent(df: DataFrame, config: Config, table: str, kind: str, version: int) -> None:
    """Append ``df`` to ``table``; Delta skips the write if this (kind, version) was committed."""
    check_lease(config)
    (
        df.write.format("delta")
        .mode("append")
        .option("txnAppId", app_id(config, kind))
        .option("txnVersion", str(version))
        .saveAsTable(config.qualified(table))
    )


def _write_batch_rows(
    df: DataFrame, config: Config, table: str, batch_id: int, replace: bool
) -> None:
    """Write ``df`` as ``table``'s rows for ``batch_id``, in one commit: replacing whatever
    rows an earlier attempt of the batch wrote, or appended when there was none (which spares
    Delta the search for rows to replace)."""
    check_lease(config)
    writer = df.writeTo(config.qualified(table))
    if replace:
        writer.overwrite(F.col("batch_id") == F.lit(batch_id))
    else:
        writer.append()


def _run_idempotent(
    spark: SparkSession, config: Config, kind: str, version: int, name: str, **params: Any
) -> None:
    """Run a DELETE statement that Delta skips if (app id, version) was committed."""
    check_lease(config)
    with transaction_id(spark, app_id(config, kind), version):
        run_sql(spark, config, name, **params).collect()


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _log_batch(spark: SparkSession, config: Config, result: BatchResult, replace: bool) -> None:
    log = _row_in_jvm(spark, BATCHES_SCHEMA, tuple(asdict(result).values()))
    _write_batch_rows(log, config, "batches", result.batch_id, replace)


def _row_in_jvm(
    spark: SparkSession, schema: T.StructType, row: tuple[Any, ...] | None
) -> DataFrame:
    """``row`` (none if ``None``) as a DataFrame of ``schema`` planned from literals: Spark
    reads a DataFrame made from Python rows through a Python worker, whose start costs a new
    process about 2.5 s. Over a VALUES row Spark evaluates the literals as it plans, into a
    table's rows: over a range they were constants of the code it compiles, anew for each
    batch's counts."""
    values = (None,) * len(schema.fields) if row is None else row
    one_row = spark.sql("values (0)")
    return (one_row if row is not None else one_row.where("false")).select(
        *(
            F.lit(value).cast(field.dataType).alias(field.name)
            for field, value in zip(schema.fields, values, strict=True)
        )
    )


def _check_batch_order(config: Config, position: Position, batch_id: int) -> None:
    """Refuse a batch id that cannot follow what the tables hold."""
    if position.unfinished_tick is not None:
        raise InterruptedWork(
            f"the tick to epoch {position.unfinished_tick} was interrupted: "
            "run `acker tick` to finish it before applying micro-batches"
        )
    started = position.started_batch_id
    if started is not None and batch_id != started:
        raise CheckpointMismatch(
            f"micro-batch {started} was interrupted and the stream now offers batch {batch_id}: "
            f"the checkpoint {config.checkpoint_uri} does not belong to these tables"
        )
    if batch_id < position.last_batch_id:
        raise CheckpointMismatch(
            f"micro-batch {batch_id} is older than the last committed batch "
            f"{position.last_batch_id}: the checkpoint {config.checkpoint_uri} was rolled back "
            "or replaced; its events would be applied twice"
        )


def classify_events(
    spark: SparkSession, config: Config, events: DataFrame, kept: bool = True
) -> DataFrame:
    """``events`` (ack_events rows, with or without a ``staged_reason`` decided before the
    batch) tagged by classify_batch_events.sql with the reason each breaks the input contract,
    and checkpointed if ``kept`` (for a caller that reads them more than once)."""
    if "staged_reason" not in events.columns:
        events = events.withColumn("staged_reason", F.lit(None).cast("string"))
    classified = run_sql(spark, config, "classify_batch_events", batch_events=events)
    return classified.localCheckpoint() if kept else classified


def committed_batch(spark: SparkSession, config: Config, batch_id: int) -> BatchResult | None:
    """The batch log's ``committed`` row of ``batch_id`` (``None`` if it has none)."""
    row = (
        spark.table(config.qualified("batches"))
        .where((F.col("batch_id") == batch_id) & (F.col("status") == "committed"))
        .first()
    )
    return None if row is None else row_as(row.asDict(), BatchResult, "the batches table")


def position_after(result: BatchResult) -> Position:
    """Where the acker stands once ``result``'s micro-batch has committed."""
    return Position(
        epoch=result.epoch,
        last_batch_id=result.batch_id,
        started_batch_id=None,
        unfinished_tick=None,
    )


@dataclass(frozen=True)
class BatchFigures:
    """A micro-batch's counts, as its row in ``batches`` and its :class:`BatchResult` hold
    them."""

    events_in: int
    events_applied: int
    duplicates: int
    quarantined: int
    late: int
    completed: int
    failed: int
    overflowed: int
    pending_inserted: int
    pending_removed: int

    def with_late(self, late: int) -> BatchFigures:
        """These figures with ``late`` late events, which also came in."""
        return replace(self, late=late, events_in=self.events_in + late)


@dataclass(frozen=True)
class BatchOutput:
    """One output table's rows of a micro-batch, and how many there are: counted before they
    are written, or, where counting would read the batch's events once more, as they are
    written (an :class:`Observation` of the write)."""

    rows: DataFrame
    count: int = 0
    observed: Observation | None = None
    """Where set, the rows are counted as they are written, and ``count`` is not used."""

    @property
    def may_have_rows(self) -> bool:
        return self.observed is not None or self.count > 0

    def written_count(self) -> int:
        """How many rows there are; for an observed count, once they are written."""
        return self.count if self.observed is None else int(self.observed.get["rows"])


@dataclass(frozen=True)
class BatchPlan:
    """What applying one micro-batch writes, computed by :func:`plan_batch` without writing
    anything; :func:`commit_batch` writes it."""

    batch_id: int
    epoch: int
    through_epoch: int
    again: bool
    """Whether an earlier attempt of this batch id may have written rows, which it replaces."""
    fingerprint: str
    outputs: dict[str, BatchOutput]
    """Per output table, in the order they are written."""
    state: DataFrame
    """The rows merge_pending.sql or overwrite_pending.sql writes to ``pending``
    (:func:`fold_events`' output)."""
    rows_to_merge: int
    pending_rows: int
    """The rows of ``pending`` before the batch, counted from Delta's log."""
    checkpoints: tuple[DataFrame, ...]
    """Every step's checkpoint: the outputs read some (over Spark Connect a checkpoint lasts
    only as long as the DataFrame object that made it), and :func:`process_batch` releases
    them all once the batch is written."""
    figures: BatchFigures
    """The batch's counts but its late events', which :func:`commit_batch` adds as it writes
    them."""
    started: float
    started_at: datetime


def process_batch(
    spark: SparkSession,
    config: Config,
    events: DataFrame,
    batch_id: int,
    position: Position | None = None,
    through_epoch: int | None = None,
) -> BatchResult | None:
    """Apply one micro-batch of ``ack_events`` rows; ``None`` if it was already applied.

    A batch id may be applied again as long as no later batch or tick followed it: with the
    same content it is recognised and skipped, with other content it replaces what the first
    application did. ``position`` is where the acker stands, if the caller knows it (the
    stream does, from its previous batch, as the only writer); otherwise it is read from the
    tables. Example (what ``acker run`` does for each batch of the stream)::

        process_batch(spark, config, spark.table("acker.ack_events"), batch_id=0)

    A *pass* (``through_epoch`` after the current epoch) applies the epochs up to
    ``through_epoch`` at once, each event in its ``event_epoch`` column's epoch, as micro-batches
    of each epoch with a tick between them would; the caller then ticks to ``through_epoch``,
    which expires what the pass left too old. Raises :class:`PassTooWide`, before writing
    anything, where that fold would not be exact.
    """
    if position is None:
        position = read_position(spark, config)
    with compiled_for_events(spark):
        plan = plan_batch(spark, config, events, batch_id, position, through_epoch)
        if plan is None:
            return None
        try:
            return commit_batch(spark, config, plan)
        finally:
            release_checkpoints(spark, plan.checkpoints)


def release_checkpoints(spark: SparkSession, checkpoints: Sequence[DataFrame]) -> None:
    """Drop the blocks of ``checkpoints`` (local checkpoints that nothing reads any more) now.
    Spark drops them only once the JVM has collected their RDDs, which a busy driver may not do
    for several micro-batches: the events of a large one, left in memory, had the next one's
    spilled to disk (classifying 1.08*10^7 events 8.5-8.7 s against 3.8-4.1 s, decisions.md,
    7 Dec). Over Spark Connect a checkpoint goes with its DataFrame object."""
    if is_connect(spark):
        return
    for checkpoint in checkpoints:
        plan = checkpoint._jdf.queryExecution().analyzed()
        if plan.getClass().getSimpleName() == "LogicalRDD":
            plan.rdd().unpersist(False)


@dataclass(frozen=True)
class BatchInput:
    """fingerprint_batch.sql: the batch's content hash and how many of its rows break the
    input contract."""

    fingerprint: str
    quarantined: int


@dataclass(frozen=True)
class TouchedCounts:
    """:data:`TOUCHED_COUNTS`: of the pending rows the batch touches, those an earlier batch
    resolved and those holding more keys than the large-tree threshold."""

    resolved: int
    large: int


# Up to this many anchors a micro-batch counts its touched rows and its folded state as their
# checkpoints write them (:func:`pipelines.sql.checkpoint_counted`), not by a statement after
# each (0.1 s of a 10^4-event batch each). Spark evaluates an observation's aggregates row by
# row, outside its generated code: over a 10^7-event batch's rows that costs more than the
# statement it saves (decisions.md, 7 Dec); a 10^6-event batch's 2*10^5 anchors measured even.
_OBSERVED_COUNTS_ANCHORS = 250_000

# Over the pending rows a micro-batch touches: how many hold an outcome (rows an earlier batch
# resolved, which the count of pending still includes) and how many hold more keys than
# _LARGE_TREE_KEYS (mark_redeliveries.sql then plans its intersection branch).
TOUCHED_COUNTS = (
    "count_if(outcome is not null) as resolved",
    "count_if(greatest(size(applied_keys), size(prev.applied_keys))"
    f" > {_LARGE_TREE_KEYS}) as large",
)


@dataclass(frozen=True)
class BatchSummary:
    """:data:`BATCH_SUMMARY`: the counts of a batch's folded state."""

    rows_in: int
    applied: int
    duplicates: int
    completed: int
    failed: int
    overflowed: int
    pending_inserted: int
    new_trees: int
    pending_removed: int
    pending_adjust: int
    rows_to_merge: int
    late_in_pass: int


# Over a batch's folded state: the counts the batch log and the capacity guard need. new_trees
# counts every tree that enters pending, resolved in the batch or not: with fewer, no epoch of
# a pass can end with more than max_pending pending. pending_adjust corrects the table's current
# pending count to the count before this batch when an earlier attempt of the same batch
# already wrote some rows.
BATCH_SUMMARY = (
    "coalesce(sum(rows_in), 0) as rows_in",
    "coalesce(sum(applied), 0) as applied",
    "coalesce(sum(duplicates), 0) as duplicates",
    "count_if(outcome = 'completed') as completed",
    "count_if(outcome = 'failed') as failed",
    "count_if(reason = 'overflow') as overflowed",
    "count_if(action = 'upsert' and is_new and outcome is null) as pending_inserted",
    "count_if(action = 'upsert' and is_new) as new_trees",
    "count_if(action = 'upsert' and not is_new and outcome is not null) as pending_removed",
    "coalesce(sum(pending_adjust), 0) as pending_adjust",
    "count_if(in_table or outcome is null) as rows_to_merge",
    "coalesce(sum(late_rows), 0) as late_in_pass",
)


@dataclass(frozen=True)
class CrowdedEpoch:
    """find_crowded_epoch.sql: the first epoch of a pass that would end over ``max_pending``."""

    crowded_epoch: int | None


@dataclass(frozen=True)
class TouchedState:
    """What a batch reads of the tables: the earlier outcomes of its anchors (its tombstones)
    and the pending rows it touches, with their counts."""

    tombstones: DataFrame
    has_tombstones: bool
    rows: DataFrame
    counts: TouchedCounts
    counts_observed: bool
    """Whether the batch is small enough for its checkpoints to count their rows
    (:data:`_OBSERVED_COUNTS_ANCHORS`)."""
    pending_rows: int
    """The rows of ``pending`` before the batch, counted from Delta's log."""
    checkpoints: tuple[DataFrame, ...]
    """Every checkpoint the look-up made: the anchors, the tombstones, the rows."""


@dataclass(frozen=True)
class BatchAnchors:
    """select_batch_anchors.sql's rows, checkpointed, and how many there are (``None`` over
    Spark Connect, which reports no observation of a checkpoint)."""

    rows: DataFrame
    count: int | None


@dataclass(frozen=True)
class FoldedState:
    """:func:`fold_events`' rows (what merge_pending.sql applies) and their counts."""

    rows: DataFrame
    summary: BatchSummary


def plan_batch(
    spark: SparkSession,
    config: Config,
    events: DataFrame,
    batch_id: int,
    position: Position,
    through_epoch: int | None = None,
) -> BatchPlan | None:
    """The plan of :func:`process_batch`, step by step, each step's result checkpointed and
    handed to the next: classify the events, recognise a replay, look up the state they touch,
    fold it, apply the capacity guard, and select the outputs. ``None`` for a replay of the
    committed batch with the same content."""
    _check_batch_order(config, position, batch_id)
    epoch = position.epoch
    through = epoch if through_epoch is None else through_epoch
    started = time.monotonic()
    started_at = _now()
    # A batch that is not a pass applies every event in its epoch: aggregate_epochs.sql then
    # gives each anchor one part, without aggregating the anchor's epochs.
    if through == epoch or "event_epoch" not in events.columns:
        events = events.withColumn("event_epoch", F.lit(epoch).cast("bigint"))
    classified = classify_events(spark, config, events)
    # Both read the classified events: side by side, each statement's planning on a core.
    with ThreadPoolExecutor(1, thread_name_prefix="acker-fingerprint") as beside:
        fingerprinted = beside.submit(
            run_sql_row,
            spark,
            config,
            "fingerprint_batch",
            BatchInput,
            classified_events=classified,
        )
        anchors = select_batch_anchors(spark, config, classified)
        batch_input = fingerprinted.result()
    if _is_replay(spark, config, batch_id, position, batch_input.fingerprint):
        release_checkpoints(spark, (classified, anchors.rows))
        return None
    this_batch = run_sql(spark, config, "this_batch", batch_id=batch_id)
    touched = look_up_touched_state(spark, config, anchors, this_batch)
    folded = fold_batch(spark, config, classified, touched, this_batch, epoch, through)
    checkpoints = (classified, *touched.checkpoints, folded.rows)
    pending_rows = touched.pending_rows
    pending_before = pending_rows - touched.counts.resolved + folded.summary.pending_adjust
    if through > epoch:
        try:
            _check_pass_capacity(spark, config, folded, pending_before, batch_id, epoch, through)
        except PassTooWide:
            # the caller applies a narrower pass, with checkpoints of its own
            release_checkpoints(spark, checkpoints)
            raise
    else:
        guarded = _apply_capacity_guard(spark, config, folded, pending_before)
        if guarded is not folded:
            checkpoints = (*checkpoints, guarded.rows)
        folded = guarded
    outputs = _select_outputs(spark, config, classified, touched, folded, batch_input, this_batch)
    summary = folded.summary
    figures = BatchFigures(
        events_in=summary.rows_in + batch_input.quarantined,
        events_applied=summary.applied,
        duplicates=summary.duplicates,
        quarantined=batch_input.quarantined,
        late=0,
        completed=summary.completed,
        failed=summary.failed,
        overflowed=summary.overflowed,
        pending_inserted=summary.pending_inserted,
        pending_removed=summary.pending_removed,
    )
    return BatchPlan(
        batch_id=batch_id,
        epoch=epoch,
        through_epoch=through,
        again=batch_id in (position.last_batch_id, position.started_batch_id),
        fingerprint=batch_input.fingerprint,
        outputs=outputs,
        state=folded.rows,
        rows_to_merge=summary.rows_to_merge,
        pending_rows=pending_rows,
        checkpoints=checkpoints,
        figures=figures,
        started=started,
        started_at=started_at,
    )


def _is_replay(
    spark: SparkSession, config: Config, batch_id: int, position: Position, fingerprint: str
) -> bool:
    """Whether ``batch_id`` is the committed batch again with the same content; the same id
    with other content may replace it only before the next tick."""
    if batch_id != position.last_batch_id:
        return False
    committed = committed_batch(spark, config, batch_id)
    assert committed is not None  # read_position found it committed
    if committed.input_fingerprint == fingerprint:
        return True
    if committed.epoch != position.epoch:
        raise ReplayConflict(
            f"micro-batch {batch_id} is replayed with other content after the tick to "
            f"epoch {position.epoch}; a batch can only be applied again before the next tick"
        )
    return False


def select_batch_anchors(
    spark: SparkSession, config: Config, classified: DataFrame
) -> BatchAnchors:
    """The distinct anchors of the batch's valid events (select_batch_anchors.sql),
    checkpointed and counted as they are."""
    anchors = run_sql(spark, config, "select_batch_anchors", classified_events=classified)
    # Spark Connect reports no observation of a checkpoint: there Spark's estimate decides.
    counted = None if is_connect(spark) else Observation()
    if counted is not None:
        anchors = anchors.observe(counted, F.count(F.lit(1)).alias("rows"))
    anchors = anchors.localCheckpoint()
    return BatchAnchors(anchors, None if counted is None else int(counted.get["rows"]))


def look_up_touched_state(
    spark: SparkSession, config: Config, batch_anchors: BatchAnchors, this_batch: DataFrame
) -> TouchedState:
    """The earlier outcomes of the batch's anchors, and the pending rows they touch (the batch's
    id and time in ``this_batch``, this_batch.sql). The
    outcomes and the rows are read side by side, from different tables: a new process's driver
    plans each statement on one core while the other waits (with the outputs written side by
    side, a cycle of 100 trees 0.6-1.3 s shorter on copies of one warehouse, decisions.md)."""
    anchors = batch_anchors.rows
    outcomes = _outcome_anchors(spark, config, for_batch=True)
    fits = batch_anchors.count is not None and batch_anchors.count <= _TOUCHED_ANCHORS_BROADCAST
    touched_anchors = anchors.hint("broadcast") if fits else anchors
    observed = batch_anchors.count is not None and batch_anchors.count <= _OBSERVED_COUNTS_ANCHORS

    def read_beside() -> tuple[DataFrame, bool, int, bool]:
        """The tombstones and whether there are any; the count of ``pending``, which Delta
        answers from its log without reading the files (every resolved row of ``pending`` is
        among the touched rows, so no scan of it counts them); and whether ``pending`` may hold
        an older acker's reborn entries."""
        tombstones = run_sql(
            spark,
            config,
            "find_batch_tombstones",
            batch_anchors=anchors,
            outcome_anchors=outcomes,
            this_batch=this_batch,
        ).localCheckpoint()
        pending_rows = spark.table(config.qualified("pending")).count()
        reborn = table_property(spark, config, "pending", REBORN_ENTRIES_PROPERTY) != "none"
        return tombstones, not tombstones.isEmpty(), pending_rows, reborn

    with ThreadPoolExecutor(1, thread_name_prefix="acker-tombstones") as beside:
        found = beside.submit(read_beside)
        read = run_sql(
            spark,
            config,
            "select_touched_pending",
            batch_anchors=touched_anchors,
            this_batch=this_batch,
        )
        counts: TouchedCounts | None = None
        if observed:
            rows, counts = checkpoint_counted(read, TouchedCounts, TOUCHED_COUNTS, observed=True)
        else:
            rows = read.localCheckpoint()
        tombstones, has_tombstones, pending_rows, reborn_entries = found.result()
    checkpoints: tuple[DataFrame, ...] = (anchors, tombstones, rows)
    if reborn_entries:
        rows = run_sql(
            spark,
            config,
            "drop_reborn_entries",
            touched_pending=rows,
            batch_tombstones=tombstones,
            this_batch=this_batch,
        ).localCheckpoint()
        checkpoints = (*checkpoints, rows)
    # the rows observed were read before an older acker's reborn entries were dropped
    if counts is None or reborn_entries:
        counts = aggregate_row(rows, TouchedCounts, TOUCHED_COUNTS)
    return TouchedState(
        tombstones, has_tombstones, rows, counts, observed, pending_rows, checkpoints
    )


def fold_batch(
    spark: SparkSession,
    config: Config,
    classified: DataFrame,
    touched: TouchedState,
    this_batch: DataFrame,
    epoch: int,
    through: int,
) -> FoldedState:
    """The events folded into the touched state, epoch by epoch up to ``through``
    (:func:`fold_events`), checkpointed and counted."""
    rows = fold_events(
        spark,
        config,
        classified_events=classified,
        batch_tombstones=touched.tombstones,
        touched_pending=touched.rows,
        this_batch=this_batch,
        epoch=epoch,
        refresh=config.acker.refresh,
        protocol=config.acker.protocol,
        large_tree_keys=_LARGE_TREE_KEYS,
        large_trees=touched.counts.large > 0,
        multi_epoch=through > epoch,
        buckets=config.acker.buckets,
    )
    with session_settings(spark, FOLD_PLANNING):
        rows, summary = checkpoint_counted(
            rows, BatchSummary, BATCH_SUMMARY, touched.counts_observed
        )
    return FoldedState(rows, summary)


def fold_events(
    spark: SparkSession,
    config: Config,
    classified_events: DataFrame,
    batch_tombstones: DataFrame,
    touched_pending: DataFrame,
    jvm_rules: bool | None = None,
    **params: Any,
) -> DataFrame:
    """The fold, the heart of the acker: its four rules, each a SQL file, composed into one
    plan over the events select_fold_events.sql picks. select_base_state.sql takes each touched
    row's base state, mark_redeliveries.sql
    collapses the events per key and marks re-deliveries, aggregate_epochs.sql XORs them per
    anchor and epoch, and fold_epochs.sql folds each anchor's epochs, in order, into its base:
    the rows merge_pending.sql applies. The middle two rules run as :func:`epoch_parts` says
    (``jvm_rules``). ``params`` are the statements' parameters (each takes those it names):
    this_batch (this_batch.sql's DataFrame), epoch, refresh, protocol, large_tree_keys,
    large_trees, multi_epoch and buckets."""
    base_state = run_sql(
        spark, config, "select_base_state", touched_pending=touched_pending, **params
    )
    fold_input = run_sql(
        spark,
        config,
        "select_fold_events",
        classified_events=classified_events,
        batch_tombstones=batch_tombstones,
    )
    parts = epoch_parts(spark, config, fold_input, base_state, jvm_rules, **params)
    return run_sql(spark, config, "fold_epochs", epoch_parts=parts, base_state=base_state, **params)


def epoch_parts(
    spark: SparkSession,
    config: Config,
    fold_input: DataFrame,
    base_state: DataFrame,
    jvm_rules: bool | None = None,
    **params: Any,
) -> DataFrame:
    """aggregate_epochs.sql's rows over mark_redeliveries.sql's, from the batch's events that
    fold (select_fold_events.sql): each anchor's epoch parts. With ``jvm_rules`` (by default,
    wherever the session loaded them), the two rules' Java implementation
    (pipelines/jvm/EpochParts.java) computes them in one pass over each partition's sorted
    events, without Spark's sort aggregates: a 10^7-event micro-batch over 10^7 pending trees
    51-61 s against 62-68 s with them as SQL (decisions.md, 7 Dec). Over Spark Connect, or
    without a Java compiler, the SQL files run."""
    rules = _jvm_epoch_parts(spark)
    if jvm_rules is None:
        jvm_rules = rules is not None
    if not jvm_rules:
        marked_keys = run_sql(
            spark,
            config,
            "mark_redeliveries",
            fold_input=fold_input,
            base_state=base_state,
            **params,
        )
        return run_sql(spark, config, "aggregate_epochs", marked_keys=marked_keys, **params)
    if rules is None:
        raise RuntimeError("the fold's Java rules are not loaded in this session")
    base_keys = base_state.where(F.col("base").isNotNull()).select(
        "anchor_id", F.col("base.applied_keys").alias("applied_keys")
    )
    found = rules.of(spark._jsparkSession, fold_input._jdf, base_keys._jdf)
    return DataFrame(found, spark)


def _jvm_epoch_parts(spark: SparkSession) -> Any:
    """The Java class of the fold's rules where this session's JVM loaded it, else ``None``."""
    if is_connect(spark):
        return None
    found = spark._jvm.org.batchacker.fold.EpochParts  # type: ignore[union-attr]
    return found if isinstance(found, JavaClass) else None


def summarize_state(state: DataFrame) -> BatchSummary:
    """The counts of a folded state (:data:`BATCH_SUMMARY`)."""
    return aggregate_row(state, BatchSummary, BATCH_SUMMARY)


def _check_pass_capacity(
    spark: SparkSession,
    config: Config,
    folded: FoldedState,
    pending_before: int,
    batch_id: int,
    epoch: int,
    through: int,
) -> None:
    """Raise :class:`PassTooWide` where the capacity guard would fire at the end of one of the
    pass's epochs. No epoch is crowded where every new tree of the pass fits."""
    if pending_before + folded.summary.new_trees <= config.acker.max_pending:
        return
    crowded = run_sql_row(
        spark,
        config,
        "find_crowded_epoch",
        CrowdedEpoch,
        batch_state=folded.rows,
        pending_before=pending_before,
        max_pending=config.acker.max_pending,
        buckets=config.acker.buckets,
        through=through,
    ).crowded_epoch
    if crowded is not None:
        raise PassTooWide(batch_id, epoch, through, crowded)


def _apply_capacity_guard(
    spark: SparkSession, config: Config, folded: FoldedState, pending_before: int
) -> FoldedState:
    """A single epoch's state with the trees beyond ``max_pending`` expired as ``overflow``
    (apply_capacity_guard.sql), or as it was where they fit."""
    summary = folded.summary
    excess = pending_before - summary.pending_removed + summary.pending_inserted
    excess -= config.acker.max_pending
    if excess <= 0:
        return folded
    rows = run_sql(
        spark, config, "apply_capacity_guard", batch_state=folded.rows, excess=excess
    ).localCheckpoint()
    return FoldedState(rows, summarize_state(rows))


def _select_outputs(
    spark: SparkSession,
    config: Config,
    classified: DataFrame,
    touched: TouchedState,
    folded: FoldedState,
    batch_input: BatchInput,
    this_batch: DataFrame,
) -> dict[str, BatchOutput]:
    """Per output table, in the order they are written, its rows."""
    late_state = folded.rows.where(F.col("late_from").isNotNull()).select(
        "anchor_id", "late_from", "late_outcome", "late_reason"
    )
    # No more trees than late events, four narrow columns each: where they fit, the trees are
    # broadcast to the batch's events; else both are shuffled. Left to its estimates, Spark
    # broadcast the batch's events instead (5.1 million of them in an hour at 200 trees/s).
    fits = folded.summary.late_in_pass <= _LATE_TREES_BROADCAST
    late_state = late_state.hint("broadcast" if fits else "merge")
    late = run_sql(
        spark,
        config,
        "select_late_events",
        classified_events=classified,
        batch_tombstones=touched.tombstones,
        late_state=late_state,
        this_batch=this_batch,
    )
    # Without tombstones or events a pass left unapplied there are no late events. Where there
    # may be some, their append counts them: a count before it would read every event of the
    # batch once more (0.3 s of a 5-minute cycle), and an append of no rows commits nothing.
    late_rows = None
    if folded.summary.late_in_pass or touched.has_tombstones:
        late_rows = Observation()
        late = late.observe(late_rows, F.count(F.lit(1)).alias("rows"))
    outputs = {
        outcome: BatchOutput(
            run_sql(
                spark,
                config,
                "select_resolved",
                batch_state=folded.rows,
                outcome=outcome,
            ),
            count,
        )
        for outcome, count in (
            ("completed", folded.summary.completed),
            ("failed", folded.summary.failed),
        )
    }
    outputs["late_events"] = BatchOutput(late, observed=late_rows)
    outputs["quarantine"] = BatchOutput(
        run_sql(
            spark,
            config,
            "select_quarantined_events",
            classified_events=classified,
            this_batch=this_batch,
            source=config.qualified("ack_events"),
        ),
        batch_input.quarantined,
    )
    return outputs


def commit_batch(spark: SparkSession, config: Config, plan: BatchPlan) -> BatchResult:
    """Write what ``plan`` computed, in the order that makes a crash between any two writes
    recoverable: the outputs (each replacing its rows of an earlier attempt, side by side), the
    new state into ``pending``, then the ``committed`` row of the batch log. The new state is a
    MERGE, or an overwrite of the whole table where it holds no more rows than the batch
    writes: on a scheduled cycle's few thousand pending trees, one write instead of the MERGE's
    several jobs (1.9-2.2 s against 3.1-3.2 s), and no deletion vectors for the ticks' DELETE
    to read."""
    batch_id, figures = plan.batch_id, plan.figures
    crash_point("batch:aggregated", batch_id)
    # A first attempt has nothing to replace, so it skips empty outputs. Each output is a table
    # of its own, committed on its own: they are written side by side.
    written = [
        (table, output.rows)
        for table, output in plan.outputs.items()
        if output.may_have_rows or plan.again
    ]

    def write_output(table: str, df: DataFrame) -> None:
        _write_batch_rows(df, config, table, batch_id, replace=plan.again)
        crash_point(f"batch:{table}", batch_id)

    # A batch that wrote no outcome leaves the tables, and what the writer keeps, as they were.
    resolves = bool(figures.completed or figures.failed or plan.again)
    resolved = [
        plan.outputs[outcome].rows.select(
            "anchor_id", F.lit(outcome).alias("outcome"), *_OUTCOME_KEYS
        )
        for outcome in ("completed", "failed")
    ]
    with ThreadPoolExecutor(len(written) + 1, thread_name_prefix="acker-output") as writers:
        kept = (
            writers.submit(_outcomes_to_keep, config, resolved[0].unionByName(resolved[1]))
            if resolves
            else None
        )
        writes = [writers.submit(write_output, table, df) for table, df in written]
        kept_rows = None if kept is None else kept.result()
        try:
            for done in writes:
                done.result()
        except BaseException:
            # nothing keeps the rows of a batch that failed to write them
            if kept_rows is not None:
                release_checkpoints(spark, (kept_rows,))
            raise
    figures = figures.with_late(plan.outputs["late_events"].written_count())
    if resolves:
        _keep_outcomes_written(
            spark, config, kept_rows, replaced_batch=batch_id if plan.again else None
        )
    if plan.rows_to_merge:
        with dml_fence(spark, config):
            if plan.pending_rows <= plan.rows_to_merge:
                run_sql(spark, config, "overwrite_pending", batch_state=plan.state).collect()
            else:
                small = plan.rows_to_merge <= BROADCAST_MERGE_ROWS
                state = F.broadcast(plan.state) if small else plan.state
                run_sql(spark, config, "merge_pending", batch_state=state).collect()
        crash_point("batch:merged", batch_id)

    result = BatchResult(
        batch_id=batch_id,
        status="committed",
        epoch=plan.epoch,
        input_fingerprint=plan.fingerprint,
        started_at=plan.started_at,
        finished_at=_now(),
        duration_ms=int((time.monotonic() - plan.started) * 1000),
        through_epoch=plan.through_epoch,
        **asdict(figures),
    )
    # A pass is followed by its ticks, whose first statement reads pending: Delta lists the
    # files the MERGE left beside the batch log's append, not after it.
    warmed = ("pending",) if plan.rows_to_merge and plan.through_epoch > plan.epoch else ()
    with snapshots_warmed_beside(spark, config, warmed):
        _log_batch(spark, config, result, replace=plan.again)
    crash_point("batch:committed", batch_id)
    return result


def tick(
    spark: SparkSession,
    config: Config,
    count: int = 1,
    clock: Clock = "manual",
    scale: EpochScale | None = None,
    position: Position | None = None,
) -> list[TickResult]:
    """Advance the epoch ``count`` times in one pass, expiring what each tick makes too old;
    return one result per tick, dated by ``scale`` (the start of its epoch), or now without one.
    ``position`` is where the acker stands, if the caller knows it; the acker then stands at
    ``position_after_ticks(position, count)``.

    An entry stamped with epoch ``e`` expires at the tick that makes the epoch ``e + buckets``
    (``RotatingMap.rotate()``), into ``expired`` with reason ``timeout`` or ``no_init`` and that
    tick's epoch. No micro-batch runs between the ticks of one call, so ``count`` ticks cost
    about what one does. A run of ticks interrupted earlier is finished whole first, and the
    epochs it reaches count toward ``count``.
    """
    if count <= 0:  # a run whose clock owes no tick: nothing to check, nothing to write
        return []
    if position is None:
        position = read_position(spark, config)
    if position.started_batch_id is not None:
        raise InterruptedWork(
            f"micro-batch {position.started_batch_id} was interrupted before it committed: "
            "run `acker run` to finish it before ticking"
        )
    target = position.epoch + count
    results = []
    # released once the ticks are written, as a micro-batch's are
    checkpoints: list[DataFrame] = []
    try:
        if position.unfinished_tick is not None:
            results = _tick_to(
                spark, config, position, position.unfinished_tick, clock, scale, checkpoints
            )
            position = replace(position, epoch=position.unfinished_tick, unfinished_tick=None)
        if target > position.epoch:
            results += _tick_to(spark, config, position, target, clock, scale, checkpoints)
    finally:
        release_checkpoints(spark, checkpoints)
    return results


def _tick_to(
    spark: SparkSession,
    config: Config,
    position: Position,
    target: int,
    clock: Clock,
    scale: EpochScale | None,
    checkpoints: list[DataFrame],
) -> list[TickResult]:
    """Tick from ``position.epoch`` to ``target``, adding each checkpoint it makes to
    ``checkpoints`` for the caller to release. Every write before the ``ticks`` rows
    carries the run's first new epoch as its Delta ``txnVersion``, so a run finished after a
    crash, which starts from the same epoch, skips what the first attempt committed."""
    first_epoch = position.epoch + 1
    run: dict[str, Any] = {
        "first_epoch": first_epoch,
        "target": target,
        "buckets": config.acker.buckets,
    }
    expired = run_sql(
        spark, config, "select_expired", last_batch_id=position.last_batch_id, **run
    ).localCheckpoint()
    checkpoints.append(expired)
    # An entry without init whose anchor already has an outcome gets no second one: its events
    # are late. Only an older acker, which forgot outcomes after a tombstone window, left such
    # entries (a micro-batch now finds every earlier outcome); finding them looks at every
    # outcome, so only where the run expires an entry without init from a table of that acker.
    reborn = None
    if (
        not expired.where(F.col("reason") == "no_init").isEmpty()
        and table_property(spark, config, "pending", REBORN_ENTRIES_PROPERTY) != "none"
    ):
        outcomes = _outcome_anchors(spark, config, for_batch=False)
        reborn = run_sql(
            spark, config, "reborn_entries", outcome_anchors=outcomes, **run
        ).localCheckpoint()
        checkpoints.append(reborn)
        if reborn.isEmpty():
            reborn = None
        else:
            expired = expired.join(reborn.select("anchor_id"), "anchor_id", "left_anti")

    def select_log(expired_rows: DataFrame, late_rows: DataFrame) -> DataFrame:
        log = run_sql(
            spark,
            config,
            "select_ticks",
            expired_rows=expired_rows,
            late_rows=late_rows,
            first_epoch=first_epoch,
            target=target,
            clock=clock,
            last_batch_id=position.last_batch_id,
            origin_us=None if scale is None else scale.origin_us,
            interval_us=None if scale is None else scale.interval_us,
        ).localCheckpoint()
        checkpoints.append(log)
        return log

    # A run that finishes one a crash interrupted counts what the first attempt wrote as well,
    # after its writes; any other counts what it writes, without reading the tables (about
    # 0.5 s a tick), beside the writes.
    with ThreadPoolExecutor(1, thread_name_prefix="acker-tick-log") as beside:
        log_selected = (
            beside.submit(select_log, expired, _row_in_jvm(spark, _TICK_LATE_ROWS, None))
            if position.unfinished_tick is None and reborn is None
            else None
        )
        if not expired.isEmpty():
            _forget_outcomes_unless_current(config)
            append_idempotent(expired, config, "expired", "tick", first_epoch)
            crash_point("tick:expired", target)
            _keep_outcomes_written(
                spark,
                config,
                _outcomes_to_keep(
                    config,
                    expired.select("anchor_id", F.lit("expired").alias("outcome"), *_OUTCOME_KEYS),
                ),
            )
        if reborn is not None:
            late = run_sql(spark, config, "select_reborn_late_events", reborn_entries=reborn, **run)
            append_idempotent(late, config, "late_events", "tick", first_epoch)
        cutoff = target - config.acker.buckets
        _run_idempotent(spark, config, "tick", first_epoch, "delete_expired", cutoff=cutoff)
        crash_point("tick:deleted", target)
        log = (
            log_selected.result()
            if log_selected is not None
            else select_log(
                spark.table(config.qualified("expired")),
                spark.table(config.qualified("late_events")),
            )
        )
    # Not idempotent by txnVersion: the epoch is read from these rows, so no run writes them
    # twice, and Delta's check of the version rebuilds the table's snapshot (about 0.4 s).
    check_lease(config)
    log.writeTo(config.qualified("ticks")).append()
    crash_point("tick:committed", target)
    return sorted((TickResult(**row.asDict()) for row in log.collect()), key=lambda t: t.epoch)
