"""`acker maintain` compacts and vacuums every table without changing what any table holds, and
the acker goes on afterwards (its stream included)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from chispa import assert_df_equality

from pipelines.cli import main
from pipelines.config import MaintainSettings
from pipelines.sql import TABLES
from pipelines.tables import table_location
from tests.acker_harness import Harness, ack, init, outcome, read_table, write_conf

A, B, C = 31, 32, 33
E1, E2, E3 = 0x0F0F0F0F0F0F0F0F, -0x1234567812345678, 0x2222333344445555


def data_files(folder: Path) -> set[Path]:
    return {path for path in folder.rglob("*.parquet") if "_delta_log" not in path.parts}


def test_maintain_compacts_and_vacuums_without_changing_any_table(
    acker: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    acker.batch(init(A, E1 ^ E2, 0), ack(A, E1, 10), init(B, E3, 20))
    acker.batch(ack(C, E2, 30))
    acker.batch(ack(A, E2, 40))
    before = {name: read_table(acker.spark, acker.config, name).collect() for name in TABLES}
    pending_folder = table_location(acker.config, "pending")
    assert len(data_files(pending_folder)) > 1

    # A week is Delta's floor; a test warehouse has no reader that needs the old files.
    config = replace(acker.config, maintain=MaintainSettings(vacuum_retain_hours=0.0))
    check = "spark.databricks.delta.retentionDurationCheck.enabled"
    acker.spark.conf.set(check, "false")
    try:
        assert main(["maintain", "--conf", str(write_conf(config, tmp_path / "a.toml"))]) == 0
    finally:
        acker.spark.conf.unset(check)
    printed = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in printed] == list(TABLES)

    for name in TABLES:
        after = read_table(acker.spark, acker.config, name)
        assert_df_equality(
            after,
            acker.spark.createDataFrame(before[name], after.schema),
            ignore_row_order=True,
            ignore_nullable=True,
        )
    # compacted into one file each, and the replaced files are gone from disk
    for name in ("ack_events", "pending"):
        assert len(data_files(table_location(acker.config, name))) == 1, name

    acker.batch(init(C, E2, 50))
    acker.assert_outcomes(
        completed=[
            outcome(A, "acked", init_ms=0, first_ms=0, last_ms=40, events=3, batch=2),
            outcome(C, "acked", init_ms=50, first_ms=30, last_ms=50, events=2, batch=3),
        ]
    )
    assert acker.pending_ids() == {B}
