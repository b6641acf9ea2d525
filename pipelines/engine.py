"""The acker's two state transitions: applying a micro-batch of events, and a tick.

Both read the current epoch from the tables, compute everything from one snapshot of
``pending``, write their outputs first and change ``pending`` last, each write idempotent
(Delta ``txnAppId``/``txnVersion``): re-running a batch or a tick after a crash finishes it
without duplicating or losing a row.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pipelines.config import Config
from pipelines.sql import run_sql

__all__ = [
    "BatchResult",
    "TickResult",
    "append_idempotent",
    "current_position",
    "process_batch",
    "tick",
]

_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"

BATCHES_SCHEMA = T.StructType(
    [T.StructField("batch_id", T.LongType()), T.StructField("epoch", T.LongType())]
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
        )
    ]
)

TICKS_SCHEMA = T.StructType(
    [
        T.StructField("epoch", T.LongType()),
        T.StructField("ticked_at", T.TimestampType()),
        T.StructField("clock", T.StringType()),
        T.StructField("expired_timeout", T.LongType()),
        T.StructField("expired_no_init", T.LongType()),
        T.StructField("last_batch_id", T.LongType()),
    ]
)


@dataclass(frozen=True)
class BatchResult:
    """What one micro-batch did; the same figures as its row in ``batches``."""

    batch_id: int
    epoch: int
    started_at: datetime
    finished_at: datetime
    duration_ms: int
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


@dataclass(frozen=True)
class TickResult:
    """What one tick did; the same figures as its row in ``ticks``."""

    epoch: int
    ticked_at: datetime
    clock: str
    expired_timeout: int
    expired_no_init: int
    last_batch_id: int


def _app_id(config: Config, kind: str) -> str:
    return f"batch-acker/{config.qualified_schema}/{kind}"


def current_position(spark: SparkSession, config: Config) -> tuple[int, int]:
    """The current epoch (0 before any tick) and the last committed batch id (-1 if none)."""
    row = run_sql(spark, config, "read_current_epoch").first()
    assert row is not None
    return int(row["epoch"]), int(row["last_batch_id"])


def append_idempotent(df: DataFrame, config: Config, table: str, kind: str, version: int) -> None:
    """Append ``df`` to ``table``; Delta skips the write if this (kind, version) was committed."""
    (
        df.write.format("delta")
        .mode("append")
        .option("txnAppId", _app_id(config, kind))
        .option("txnVersion", str(version))
        .saveAsTable(config.qualified(table))
    )


def _run_idempotent(
    spark: SparkSession, config: Config, kind: str, version: int, name: str, **params: Any
) -> None:
    """Run a MERGE/DELETE statement that Delta skips if (app id, version) was committed."""
    spark.conf.set(_TXN_APP_ID, _app_id(config, kind))
    spark.conf.set(_TXN_VERSION, str(version))
    try:
        run_sql(spark, config, name, **params).collect()
    finally:
        spark.conf.unset(_TXN_VERSION)
        spark.conf.unset(_TXN_APP_ID)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def process_batch(
    spark: SparkSession, config: Config, events: DataFrame, batch_id: int
) -> BatchResult | None:
    """Apply one micro-batch of ``ack_events`` rows; ``None`` if it was already committed.

    Example (what ``acker run`` does for each batch of the stream)::

        process_batch(spark, config, spark.table("acker.ack_events"), batch_id=0)
    """
    epoch, last_batch_id = current_position(spark, config)
    if batch_id <= last_batch_id:
        return None
    started = time.monotonic()
    started_at = _now()
    events.createOrReplaceTempView("batch_events")
    classified = run_sql(spark, config, "classify_batch_events").localCheckpoint()
    classified.createOrReplaceTempView("classified_events")
    tombstones = run_sql(
        spark,
        config,
        "find_batch_tombstones",
        batch_id=batch_id,
        min_epoch=epoch - config.acker.tombstone_epochs,
    ).localCheckpoint()
    tombstones.createOrReplaceTempView("batch_tombstones")
    state = run_sql(
        spark,
        config,
        "aggregate_batch",
        batch_id=batch_id,
        epoch=epoch,
        refresh=config.acker.refresh,
    ).localCheckpoint()
    state.createOrReplaceTempView("batch_state")
    summary = run_sql(spark, config, "summarize_batch_state").first()
    assert summary is not None
    live = spark.table(config.qualified("pending")).count()
    excess = live - summary["pending_removed"] + summary["pending_inserted"]
    excess -= config.acker.max_pending
    if excess > 0:
        state = run_sql(spark, config, "apply_capacity_guard", excess=excess).localCheckpoint()
        state.createOrReplaceTempView("batch_state")
        summary = run_sql(spark, config, "summarize_batch_state").first()
        assert summary is not None

    quarantined = run_sql(
        spark,
        config,
        "select_quarantined_events",
        batch_id=batch_id,
        source=config.qualified("ack_events"),
    )
    late = run_sql(spark, config, "select_late_events", batch_id=batch_id)
    counts = {
        "quarantined": classified.where("quarantine_reason is not null").count(),
        "late": late.count(),
    }
    outputs = {
        "completed": summary["completed"],
        "failed": summary["failed"],
    }
    for outcome, rows in outputs.items():
        if rows:
            resolved = run_sql(
                spark, config, "select_resolved", outcome=outcome, batch_id=batch_id, epoch=epoch
            )
            append_idempotent(resolved, config, outcome, "batch", batch_id)
    if counts["late"]:
        append_idempotent(late, config, "late_events", "batch", batch_id)
    if counts["quarantined"]:
        append_idempotent(quarantined, config, "quarantine", "batch", batch_id)
    if summary["rows_in"]:
        _run_idempotent(spark, config, "batch", batch_id, "merge_pending")

    duration_ms = int((time.monotonic() - started) * 1000)
    result = BatchResult(
        batch_id=batch_id,
        epoch=epoch,
        started_at=started_at,
        finished_at=_now(),
        duration_ms=duration_ms,
        events_in=int(summary["rows_in"]) + counts["quarantined"] + counts["late"],
        events_applied=int(summary["applied"]),
        duplicates=int(summary["duplicates"]),
        quarantined=counts["quarantined"],
        late=counts["late"],
        completed=int(summary["completed"]),
        failed=int(summary["failed"]),
        overflowed=int(summary["overflowed"]),
        pending_inserted=int(summary["pending_inserted"]),
        pending_removed=int(summary["pending_removed"]),
    )
    log = spark.createDataFrame([tuple(asdict(result).values())], BATCHES_SCHEMA)
    append_idempotent(log, config, "batches", "batch", batch_id)
    for view in ("batch_events", "classified_events", "batch_tombstones", "batch_state"):
        spark.catalog.dropTempView(view)
    return result


def tick(
    spark: SparkSession, config: Config, count: int = 1, clock: str = "manual"
) -> list[TickResult]:
    """Advance the epoch ``count`` times, expiring what each tick makes too old.

    An entry stamped with epoch ``e`` expires at the tick that makes the epoch ``e + buckets``
    (``RotatingMap.rotate()``), into ``expired`` with reason ``timeout`` or ``no_init``.
    """
    results = []
    for _ in range(count):
        epoch, last_batch_id = current_position(spark, config)
        new_epoch = epoch + 1
        cutoff = new_epoch - config.acker.buckets
        expired = run_sql(
            spark,
            config,
            "select_expired",
            cutoff=cutoff,
            epoch=new_epoch,
            last_batch_id=last_batch_id,
        ).localCheckpoint()
        reasons = {
            row["reason"]: row["n"]
            for row in expired.groupBy("reason").count().withColumnRenamed("count", "n").collect()
        }
        if reasons:
            append_idempotent(expired, config, "expired", "tick", new_epoch)
            _run_idempotent(spark, config, "tick", new_epoch, "delete_expired", cutoff=cutoff)
        result = TickResult(
            epoch=new_epoch,
            ticked_at=_now(),
            clock=clock,
            expired_timeout=int(reasons.get("timeout", 0)),
            expired_no_init=int(reasons.get("no_init", 0)),
            last_batch_id=last_batch_id,
        )
        log = spark.createDataFrame([tuple(asdict(result).values())], TICKS_SCHEMA)
        append_idempotent(log, config, "ticks", "tick", new_epoch)
        results.append(result)
    return results
