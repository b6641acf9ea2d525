"""Large event sets as copies of a simulated template: each copy's trees get fresh anchor ids
(and source ids), so every copy is a distinct, equally realistic set of tuple trees."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

__all__ = ["copied", "nonzero"]


def nonzero(anchor_id: Column) -> Column:
    """``anchor_id``, with 0 (not a valid anchor id) replaced by 1."""
    return F.when(anchor_id == 0, F.lit(1).cast("bigint")).otherwise(anchor_id)


def copied(
    template: DataFrame, copies: int, salt: str | int, shift_s: Column | None = None
) -> DataFrame:
    """``copies`` copies of ``template`` (``ack_events`` rows): copy ``copy`` hashes each
    anchor id with ``copy`` and ``salt``, and moves each event by ``shift_s`` seconds, an
    expression that may read the new ``anchor_id`` and ``copy`` (none: in place)."""
    copy_ids = template.sparkSession.range(copies).withColumnRenamed("id", "copy")
    anchor = nonzero(F.xxhash64("anchor_id", "copy", F.lit(salt)))
    rows = template.crossJoin(copy_ids).withColumn(
        "anchor_id", F.when(F.col("anchor_id").isNull(), None).otherwise(anchor)
    )
    event_time = F.col("event_time")
    if shift_s is not None:
        event_time = event_time + F.make_interval(secs=shift_s)
    return rows.select(
        "anchor_id",
        "event_type",
        "xor_value",
        "spout_task",
        F.concat_ws("-", "source_msg_id", "copy").alias("source_msg_id"),
        "component",
        event_time.alias("event_time"),
        F.concat_ws("-", "event_id", "copy").alias("event_id"),
    )
