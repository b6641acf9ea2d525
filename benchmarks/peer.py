"""The peer: the acker's core logic (aggregate, upsert into pending, extract outcomes) in
DuckDB, on the same Parquet events and the same seeded pending trees, for a ratio to ours and a
check that both find the same completed and failed trees."""

from __future__ import annotations

from pathlib import Path

import duckdb
from pyspark.sql import SparkSession

from benchmarks.timing import stopwatch
from pipelines.config import Config

__all__ = ["DuckDBPeer"]


class DuckDBPeer:
    """One DuckDB database under ``root``, on two threads as the acker has two cores."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.duck = duckdb.connect(str(root / "peer.duckdb"))
        self.duck.execute("set threads = 2")

    def seed(self, spark: SparkSession, config: Config) -> None:
        """Give the peer the same pending trees as the acker's ``config`` schema."""
        seed = self.root / "peer-seed"
        spark.table(config.qualified("pending")).select(
            "anchor_id", "checksum", "has_init", "failed"
        ).write.mode("overwrite").parquet(str(seed))
        self.duck.execute(
            "create or replace table pending as select * from read_parquet(?)",
            [str(seed / "*.parquet")],
        )

    def batch(self, events: Path) -> tuple[float, dict[str, int]]:
        """Apply ``events``; return the wall time and how many trees completed and failed."""
        files = str(events / "*.parquet")
        out = self.root / "peer"
        out.mkdir(exist_ok=True)
        with stopwatch() as took:
            self.duck.execute(
                "create or replace temp table batch_state as"
                " with agg as ("
                "  select anchor_id,"
                "   bit_xor(xor_value) filter (where event_type in ('init', 'ack', 'anchor')) as x,"
                "   bool_or(event_type = 'init') as saw_init,"
                "   bool_or(event_type = 'fail') as saw_fail"
                "  from (select distinct anchor_id, event_type, xor_value from read_parquet(?)"
                "   where anchor_id is not null and anchor_id <> 0)"
                "  group by anchor_id)"
                " select a.anchor_id,"
                "  xor(coalesce(p.checksum, 0), coalesce(a.x, 0)) as checksum,"
                "  coalesce(p.has_init, false) or a.saw_init as has_init,"
                "  coalesce(p.failed, false) or a.saw_fail as failed"
                " from agg a left join pending p using (anchor_id)",
                [files],
            )
            for outcome, condition in (
                ("completed", "has_init and not failed and checksum = 0"),
                ("failed", "has_init and failed"),
            ):
                self.duck.execute(
                    f"copy (select * from batch_state where {condition})"
                    f" to '{out / outcome}.parquet' (format parquet)"
                )
            self.duck.execute(
                "merge into pending p using batch_state s on p.anchor_id = s.anchor_id"
                " when matched and s.has_init and (s.failed or s.checksum = 0) then delete"
                " when matched then update set checksum = s.checksum, has_init = s.has_init,"
                "  failed = s.failed"
                " when not matched and not (s.has_init and (s.failed or s.checksum = 0))"
                "  then insert values (s.anchor_id, s.checksum, s.has_init, s.failed)"
            )
        counts = {}
        for outcome in ("completed", "failed"):
            row = self.duck.execute(
                f"select count(*) from read_parquet('{out / outcome}.parquet')"
            ).fetchone()
            counts[outcome] = int(row[0]) if row else 0
        return took(), counts
