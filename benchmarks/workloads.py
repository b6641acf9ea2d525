"""The event sets the benchmark measures: simulated trees (Storm protocol, about 5 events per
tree), large sets as copies of a simulated template with fresh anchor ids, a fifth of each
set's trees continuing a tree seeded into ``pending``; one hot tree; backfills spread over
hours. Each is written as Parquet once and read by the acker, the floors and the peer alike."""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from benchmarks.copies import copied, nonzero
from pipelines.ingest import ACK_EVENTS_SCHEMA
from pipelines.workload import WorkloadSpec, generate_workload

__all__ = [
    "EVENTS_PER_TREE",
    "TEMPLATE_EVENTS",
    "EventSets",
    "seeded_anchor_id",
]

TEMPLATE_EVENTS = 100_000
EVENTS_PER_TREE = 5  # what the simulator makes with max_fanout=3, max_depth=2, Storm protocol
# Trees of a batch that continue a tree already pending (their events land on a seeded row, so
# the MERGE updates rows as well as inserting and deleting them): an assumption, about a batch
# interval a few times a tree's lifetime.
CONTINUED_PERCENT = 20
HOT_ANCHOR = 4242


def seeded_anchor_id(index: Column) -> Column:
    """The anchor id of the seeded pending tree number ``index`` (a bigint column)."""
    return nonzero(F.xxhash64(index, F.lit("seed")))


class EventSets:
    """Event sets written under ``folder``, and which seeded trees they have continued."""

    def __init__(self, spark: SparkSession, folder: Path) -> None:
        self.spark = spark
        self.folder = folder
        # Seeded trees not yet continued by any event set: each set continues trees of its own,
        # so no batch sends events to a seeded tree an earlier batch resolved (those would be
        # late events for the acker, which the peer has no tombstones to tell).
        self.unused_seeded = 0

    def simulate(self, events: int, seed: int) -> Path:
        """Simulated events (Storm protocol) written as one Parquet file, once per size and
        seed (the template of the large batches is asked for again by each of them)."""
        path = self.folder / f"simulated-{events}-{seed}"
        if (path / "part-0.parquet").exists():
            return path
        spec = WorkloadSpec(
            trees=max(1, events // EVENTS_PER_TREE),
            batches=1,
            max_fanout=3,
            max_depth=2,
            fsshelter_share=0.0,
            seed=seed,
        )
        rows = [event.row() for event in generate_workload(spec)]
        columns = list(zip(*rows, strict=True))
        schema = to_arrow_schema(ACK_EVENTS_SCHEMA, timezone="UTC")
        table = pa.table([pa.array(column) for column in columns], names=schema.names)
        table = table.cast(schema)
        path.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path / "part-0.parquet")
        return path

    def events(self, events: int, seed: int) -> tuple[Path, int]:
        """A Parquet folder of about ``events`` events, :data:`CONTINUED_PERCENT` of whose trees
        continue a seeded pending tree; return it and its exact row count."""
        if events <= TEMPLATE_EVENTS:
            simulated = self.spark.read.parquet(str(self.simulate(events, seed)))
        else:
            template = self.spark.read.parquet(str(self.simulate(TEMPLATE_EVENTS, seed=0)))
            simulated = copied(template, math.ceil(events / template.count()), seed)
        continued = F.pmod(F.xxhash64("anchor_id", F.lit("continued")), F.lit(100))
        trees = max(1, events // EVENTS_PER_TREE)
        seeded_index = self.unused_seeded + F.pmod(F.xxhash64("anchor_id", F.lit(seed)), trees)
        self.unused_seeded += trees
        path = self.folder / f"events-{events}-{seed}"
        simulated.withColumn(
            "anchor_id",
            F.when(
                (F.col("anchor_id") != 0) & (continued < CONTINUED_PERCENT),
                seeded_anchor_id(seeded_index.cast("bigint")),
            ).otherwise(F.col("anchor_id")),
        ).write.mode("overwrite").parquet(str(path))
        return path, self.spark.read.parquet(str(path)).count()

    def anchors(self, trees: int) -> DataFrame:
        """``trees`` distinct anchor ids, as a batch of about ``EVENTS_PER_TREE * trees`` events
        holds, :data:`CONTINUED_PERCENT` of them seeded trees no earlier set continued."""
        index = F.col("id")
        continued = F.pmod(index, F.lit(100)) < CONTINUED_PERCENT
        anchors = self.spark.range(trees).select(
            F.when(continued, seeded_anchor_id(index + F.lit(self.unused_seeded)))
            .otherwise(nonzero(F.xxhash64(index, F.lit("floor"), F.lit(self.unused_seeded))))
            .alias("anchor_id")
        )
        self.unused_seeded += trees
        return anchors.localCheckpoint()

    def hot_tree(self, events: int, parts: int) -> list[Path]:
        """One tree of ``events`` events, an init and one ack per edge, split by edge into
        ``parts`` Parquet folders (the init in the first)."""
        acks = self.spark.range(1, events).selectExpr(
            f"{HOT_ANCHOR}L as anchor_id",
            "'ack' as event_type",
            "xxhash64(id, 'edge') as xor_value",
            "cast(null as int) as spout_task",
            "cast(null as string) as source_msg_id",
            "'bolt' as component",
            "timestamp'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id / 1000.0)"
            " as event_time",
            "cast(id as string) as event_id",
            f"id % {parts} as part",
        )
        row = acks.agg(F.bit_xor("xor_value")).first()
        assert row is not None
        init = self.spark.createDataFrame(
            [(HOT_ANCHOR, "init", row[0], 1, "hot", "spout", datetime(2026, 1, 1), "0", 0)],
            acks.schema,
        )
        tree = init.unionByName(acks)
        paths = []
        for part in range(parts):
            path = self.folder / f"hot-{events}-{parts}-{part}"
            tree.where(F.col("part") == part).drop("part").write.mode("overwrite").parquet(
                str(path)
            )
            paths.append(path)
        return paths

    def backfill(self, events: int, hours: int) -> DataFrame:
        """About ``events`` simulated events whose trees start uniformly over ``hours`` hours:
        copies of the simulated template with fresh anchor ids, each tree moved by an offset of
        its own."""
        template = self.spark.read.parquet(str(self.simulate(TEMPLATE_EVENTS, seed=0)))
        template = template.limit(events) if events < TEMPLATE_EVENTS else template
        copies = max(1, round(events / TEMPLATE_EVENTS))
        offset_s = F.pmod(F.xxhash64("anchor_id", F.lit("offset")), F.lit(hours * 3600))
        return copied(template, copies, "backfill", offset_s)
