"""The least a micro-batch could cost, measured beside it on the same events and state.

- the bare floor: ``bit_xor`` per anchor, nothing else;
- the dedup floor: the same with the duplicate rule, the least any acker that drops
  re-deliveries pays, since every event must meet its tree's other events;
- the Delta floors: the Delta work the engine's shape cannot do without, and none of its
  logic, in two plans: today's (read the touched rows of ``pending``, MERGE a row back for
  each, append to three tables) and one whose MERGE computes each tree's state from the row it
  matches, its rows read back for the outcomes. A batch is judged against the lower. Each
  plan pays once for Delta computing ``pending``'s snapshot after a micro-batch's MERGE (today's
  at the next batch's read of the touched rows, the other at its read of the rows back): both
  count it as the acker's own table took it, a clone's log being shorter and its snapshot
  cheaper.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks.timing import stopwatch
from pipelines.config import Config
from pipelines.engine import BROADCAST_MERGE_ROWS, FOLD_PLANNING
from pipelines.sql import session_settings

__all__ = [
    "PLANS",
    "bare_floor",
    "dedup_floor",
    "delta_floors",
    "lower_floor_s",
    "merge_state_floor",
    "pending_snapshot_s",
    "read_then_merge_floor",
]


def _time_to_parquet(df: DataFrame, path: Path) -> float:
    """Seconds to compute ``df`` and write it as Parquet to ``path``."""
    with stopwatch() as took:
        df.write.mode("overwrite").parquet(str(path))
    return took()


def bare_floor(spark: SparkSession, events: Path, scratch: Path) -> float:
    """The bare aggregate: ``bit_xor`` per anchor of the events, written to Parquet."""
    aggregate = (
        spark.read.parquet(str(events))
        .groupBy("anchor_id")
        .agg(F.bit_xor("xor_value").alias("checksum"))
    )
    return _time_to_parquet(aggregate, scratch / "floor")


def dedup_floor(spark: SparkSession, events: Path, scratch: Path) -> float:
    """The bare aggregate with the duplicate rule: one row per (anchor, type, value), then
    ``bit_xor`` and the sorted set of event keys per anchor, written to Parquet; planned as the
    fold is (:data:`pipelines.engine.FOLD_PLANNING`), which lowers it too."""
    aggregate = (
        spark.read.parquet(str(events))
        .select("anchor_id", "event_type", "xor_value")
        .distinct()
        .groupBy("anchor_id")
        .agg(
            F.bit_xor("xor_value").alias("checksum"),
            F.array_sort(F.collect_set(F.xxhash64("event_type", "xor_value"))).alias("keys"),
        )
    )
    with session_settings(spark, FOLD_PLANNING):
        return _time_to_parquet(aggregate, scratch / "dedup_floor")


def _clone_pending(spark: SparkSession, config: Config, name: str) -> str:
    """A shallow clone of ``pending`` named ``name`` for a floor to write to (the acker's table
    keeps its files for the measurements after), its snapshot computed before any clock
    starts."""
    clone = f"{config.warehouse.schema}.{name}"
    spark.sql(f"drop table if exists {clone}")
    spark.sql(f"create table {clone} shallow clone {config.qualified('pending')}")
    spark.table(clone).count()  # answered from the log: computes the snapshot
    return clone


def _output_tables(spark: SparkSession, config: Config, prefix: str) -> dict[str, str]:
    """The floor's own ``completed``, ``failed`` and batch log tables, created if new."""
    tables = {
        name: f"{config.warehouse.schema}.{prefix}_{name}"
        for name in ("completed", "failed", "batches")
    }
    for table in tables.values():
        spark.sql(
            f"create table if not exists {table}"
            " (anchor_id bigint, checksum bigint, batch_id bigint) using delta"
        )
    return tables


def _append_outputs(tables: dict[str, str], rows: dict[str, DataFrame]) -> None:
    """Append each of ``rows`` to its table of ``tables``."""
    for name, df in rows.items():
        df.select(
            "anchor_id", F.lit(0).alias("checksum"), F.lit(-2).alias("batch_id")
        ).write.format("delta").mode("append").saveAsTable(tables[name])


def _broadcast_if_small(df: DataFrame) -> DataFrame:
    """``df`` broadcast to the MERGE when small, as the acker's own MERGE does."""
    return F.broadcast(df) if df.count() <= BROADCAST_MERGE_ROWS else df


def pending_snapshot_s(spark: SparkSession, config: Config) -> float:
    """The seconds Delta takes to compute ``pending``'s snapshot as the acker's last commit
    left it, which the next micro-batch's first read of the table pays. Only the first read
    after a commit pays it: call this before anything else reads ``pending``."""
    with stopwatch() as took:
        spark.table(config.qualified("pending")).count()  # answered from the log
    return took()


def read_then_merge_floor(
    spark: SparkSession, config: Config, anchors: DataFrame, snapshot_s: float
) -> dict[str, float]:
    """The Delta work a micro-batch over ``anchors`` cannot do without in today's plan, and
    nothing else: read the rows of ``pending`` they touch, MERGE a row back for each, and
    append to three tables (for ``completed``, ``failed`` and the batch log). No classifying,
    no fold, no duplicate rule, no outcome selection, no crash safety. The read starts from a
    snapshot of a clone computed before the clock; the ``snapshot_s`` that computing
    ``pending``'s after the last micro-batch took (:func:`pending_snapshot_s`) stands for it.
    Return each part's seconds and their sum."""
    outputs = _output_tables(spark, config, "floor")
    pending = _clone_pending(spark, config, "floor_pending")
    with stopwatch() as touched_took:
        touched = spark.table(pending).join(F.broadcast(anchors), "anchor_id").localCheckpoint()
    source = _broadcast_if_small(touched)
    with stopwatch() as merge_took:
        spark.sql(
            "merge into identifier(:pending) as t using {source} as s"
            " on t.anchor_id = s.anchor_id"
            " when matched then update set * when not matched then insert *",
            {"pending": pending},
            source=source,
        ).collect()
    with stopwatch() as appends_took:
        _append_outputs(
            outputs,
            {
                "completed": anchors.select("anchor_id"),
                "failed": touched.select("anchor_id"),
                "batches": anchors.limit(1),
            },
        )
    parts = {
        "snapshot_s": snapshot_s,
        "touched_s": touched_took(),
        "merge_s": merge_took(),
        "appends_s": appends_took(),
    }
    return {**parts, "total_s": sum(parts.values())}


# Above every batch id of the acker's: the files the floor's MERGE writes are the only ones
# whose statistics admit it, so reading its rows back skips every other file.
_FLOOR_BATCH_ID = 2**62

# Each touched tree's new state computed by the MERGE itself from the row it matches: the
# plan in which the acker reads `pending` only inside Delta's MERGE (issue 42).
_MERGE_COMPUTING_STATE = """
merge into identifier(:pending) as t
using {source} as s
on t.anchor_id = s.anchor_id
when matched then update set
    checksum = t.checksum ^ s.xor_delta,
    has_init = t.has_init or s.saw_init,
    failed = t.failed or s.saw_fail,
    last_event_time = greatest(t.last_event_time, s.last_time),
    event_count = t.event_count + s.applied,
    epoch = s.epoch,
    applied_keys = array_union(t.applied_keys, s.new_keys),
    batch_id = :batch_id,
    outcome = case
        when t.failed or s.saw_fail then 'failed'
        when t.checksum ^ s.xor_delta = 0 then 'completed'
    end,
    prev = struct(
        t.checksum, t.has_init, t.failed, t.spout_task, t.source_msg_id, t.init_time,
        t.first_event_time, t.last_event_time, t.event_count, t.epoch, t.applied_keys
    )
when not matched then insert (
    anchor_id, checksum, has_init, failed, first_event_time, last_event_time, event_count,
    epoch, applied_keys, batch_id
) values (
    s.anchor_id, s.xor_delta, s.saw_init, s.saw_fail, s.first_time, s.last_time, s.applied,
    s.epoch, s.new_keys, :batch_id
)
"""


def merge_state_floor(
    spark: SparkSession, config: Config, anchors: DataFrame, snapshot_s: float
) -> dict[str, float]:
    """The Delta work of the plan in which the MERGE computes each touched tree's new state
    from the row it matches, so that nothing reads ``pending`` outside it: the MERGE of one
    partial row per anchor of ``anchors``, the rows it wrote read back (their outcomes), and
    the same three appends as :func:`read_then_merge_floor`'s. Reading the rows back first
    computes the snapshot the MERGE committed: the clone's is computed before that clock, and
    ``snapshot_s`` (:func:`pending_snapshot_s`) stands for it, as in today's plan. Return each
    part's seconds and their sum."""
    outputs = _output_tables(spark, config, "merge_state_floor")
    pending = _clone_pending(spark, config, "merge_state_floor_pending")
    source = _broadcast_if_small(
        anchors.selectExpr(
            "anchor_id",
            "xxhash64(anchor_id, 'xor') as xor_delta",
            "array(xxhash64(anchor_id, 'key')) as new_keys",
            "true as saw_init",
            "false as saw_fail",
            "timestamp'2026-01-01 00:00:00' as first_time",
            "timestamp'2026-01-01 00:00:01' as last_time",
            "5L as applied",
            "1L as epoch",
        )
    )
    with stopwatch() as merge_took:
        spark.sql(
            _MERGE_COMPUTING_STATE,
            {"pending": pending, "batch_id": _FLOOR_BATCH_ID},
            source=source,
        ).collect()
    spark.table(pending).count()  # computes the snapshot the MERGE committed
    with stopwatch() as read_back_took:
        written = (
            spark.table(pending)
            .where(F.col("batch_id") == _FLOOR_BATCH_ID)
            .select("anchor_id", "prev")
            .localCheckpoint()
        )
    with stopwatch() as appends_took:
        # as many rows as read_then_merge_floor appends: every tree, the touched ones, one log row
        _append_outputs(
            outputs,
            {
                "completed": written,
                "failed": written.where(F.col("prev").isNotNull()),
                "batches": written.limit(1),
            },
        )
    parts = {
        "merge_s": merge_took(),
        "snapshot_s": snapshot_s,
        "read_back_s": read_back_took(),
        "appends_s": appends_took(),
    }
    return {**parts, "total_s": sum(parts.values())}


PLANS = ("read_then_merge", "merge_computes_state")
"""The two plans' floors, in the order :func:`delta_floors` returns them."""


def delta_floors(
    spark: SparkSession,
    config: Config,
    anchors: DataFrame,
    snapshot_s: float,
    merge_state_first: bool = False,
) -> dict[str, dict[str, float]]:
    """Both plans' Delta floors of a micro-batch over ``anchors``, measured in the order asked
    (callers alternate it, so that neither always runs on a warmer JVM), returned in the order
    of :data:`PLANS`; ``snapshot_s`` is :func:`pending_snapshot_s`'s, after the last batch."""
    floor_of = {
        "read_then_merge": lambda: read_then_merge_floor(spark, config, anchors, snapshot_s),
        "merge_computes_state": lambda: merge_state_floor(spark, config, anchors, snapshot_s),
    }
    order = reversed(PLANS) if merge_state_first else PLANS
    measured = {plan: floor_of[plan]() for plan in order}
    return {plan: measured[plan] for plan in PLANS}


def lower_floor_s(floors: dict[str, dict[str, float]]) -> float:
    """The lower of the plans' Delta floors: the per-batch targets are taken against it."""
    return min(floor["total_s"] for floor in floors.values())
