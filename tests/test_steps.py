"""Single SQL steps of a micro-batch's plan, each run alone on hand-made DataFrames bound by
name, and the binding itself: a statement's DataFrames are visible to it and to nothing else."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession

from pipelines.sql import run_sql
from tests.acker_harness import Harness, ack, init

OUTCOME_COLUMNS = "anchor_id bigint, outcome string, reason string, batch_id bigint"


def test_a_batch_finds_as_tombstones_its_anchors_outcomes_of_earlier_batches_however_old(
    acker: Harness,
) -> None:
    spark = acker.spark
    outcome_anchors = spark.createDataFrame(
        [
            (1, "completed", "acked", 3),
            (2, "failed", "fail", 7),  # this batch's own earlier attempt: recomputed
            (3, "expired", "no_init", 0),  # long before: still the anchor's one outcome
            (4, "completed", "acked", 2),
            (4, "expired", "timeout", 5),  # the later outcome is the one that counts
            (5, "completed", "acked", 4),  # not an anchor of the batch
        ],
        OUTCOME_COLUMNS,
    )
    batch_anchors = spark.createDataFrame([(a,) for a in (1, 2, 3, 4, 6)], "anchor_id bigint")

    found = run_sql(
        spark,
        acker.config,
        "find_batch_tombstones",
        outcome_anchors=outcome_anchors,
        batch_anchors=batch_anchors,
        batch_id=7,
    )

    expected = spark.createDataFrame(
        [(1, "completed", "acked", 3), (3, "expired", "no_init", 0), (4, "expired", "timeout", 5)],
        "anchor_id bigint, outcome string, outcome_reason string, outcome_batch_id bigint",
    )
    assert_df_equality(found, expected, ignore_row_order=True, ignore_nullable=True)


def test_a_statement_needs_every_dataframe_it_names(acker: Harness) -> None:
    anchors = acker.spark.createDataFrame([(1,)], "anchor_id bigint")
    missing = r"needs parameters \['batch_id', 'outcome_anchors'\]"
    with pytest.raises(KeyError, match=missing):
        run_sql(acker.spark, acker.config, "find_batch_tombstones", batch_anchors=anchors)


def temp_views(spark: SparkSession) -> set[str]:
    return {row["viewName"] for row in spark.sql("show views").collect() if row["isTemporary"]}


def test_a_micro_batch_leaves_no_view_in_the_session(spark: SparkSession, acker: Harness) -> None:
    before = temp_views(spark)
    acker.batch(init(1, 5), ack(1, 5), init(2, 6))
    acker.batch(ack(2, 6), ack(1, 5))  # a late ack: every step of a batch runs
    assert temp_views(spark) == before
    assert acker.pending_ids() == set() and acker.table("late_events").count() == 1
