"""The least a micro-batch could cost, measured beside it on the same events and state.

- the bare floor: ``bit_xor`` per anchor, nothing else;
- the dedup floor: the same with the duplicate rule, the least any acker that drops
  re-deliveries pays, since every event must meet its tree's other events;
- the Delta floor: the Delta work the engine's shape cannot do without (read the touched rows
  of ``pending``, MERGE a row back for each, append to three tables), and none of its logic.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks.timing import stopwatch
from pipelines.config import Config
from pipelines.engine import BROADCAST_MERGE_ROWS, FOLD_PLANNING
from pipelines.sql import session_settings

__all__ = ["bare_floor", "dedup_floor", "delta_floor"]


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


def delta_floor(spark: SparkSession, config: Config, anchors: DataFrame) -> dict[str, float]:
    """The Delta work a micro-batch over ``anchors`` cannot do without, and nothing else: read
    the rows of ``pending`` they touch, MERGE a row back for each, and append to three tables
    (for ``completed``, ``failed`` and the batch log). No classifying, no fold, no duplicate
    rule, no outcome selection, no crash safety. It runs on a shallow clone of ``pending`` made
    just before, so the acker's own table keeps its files for the measurements after. The
    clone's snapshot is computed before the clock starts, where a micro-batch rebuilds the one
    its last MERGE wrote: if anything, the floor comes out low. Return each part's seconds and
    their sum."""
    schema = config.warehouse.schema
    outputs = {name: f"{schema}.floor_{name}" for name in ("completed", "failed", "batches")}
    for table in outputs.values():
        spark.sql(
            f"create table if not exists {table}"
            " (anchor_id bigint, checksum bigint, batch_id bigint) using delta"
        )
    pending = f"{schema}.floor_pending"
    spark.sql(f"drop table if exists {pending}")
    spark.sql(f"create table {pending} shallow clone {config.qualified('pending')}")
    spark.table(pending).count()  # answered from the log: computes the snapshot
    with stopwatch() as touched_took:
        touched = spark.table(pending).join(F.broadcast(anchors), "anchor_id").localCheckpoint()
    # broadcast when small, as the acker's own MERGE does
    source = F.broadcast(touched) if touched.count() <= BROADCAST_MERGE_ROWS else touched
    with stopwatch() as merge_took:
        spark.sql(
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
