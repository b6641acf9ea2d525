"""Single SQL steps of a micro-batch's plan, each run alone on hand-made DataFrames bound by
name, and the binding itself: a statement's DataFrames are visible to it and to nothing else."""

from __future__ import annotations

from datetime import datetime
from functools import reduce
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines import jobs
from pipelines.engine import (
    TOUCHED_COUNTS,
    BatchFigures,
    BatchInput,
    TouchedCounts,
    fold_events,
    plan_batch,
    read_position,
)
from pipelines.sql import checkpoint_counted, row_as, run_sql, run_sql_row
from pipelines.workload import Event
from tests.acker_harness import Harness, ack, at, fail, init

OUTCOME_COLUMNS = "anchor_id bigint, outcome string, reason string, batch_id bigint"


def this_batch(acker: Harness, batch_id: int) -> DataFrame:
    """The one-row table of the batch's id that the batch's statements read (this_batch.sql)."""
    return run_sql(acker.spark, acker.config, "this_batch", batch_id=batch_id)


@pytest.mark.fast
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
        this_batch=this_batch(acker, 7),
    )

    expected = spark.createDataFrame(
        [(1, "completed", "acked", 3), (3, "expired", "no_init", 0), (4, "expired", "timeout", 5)],
        "anchor_id bigint, outcome string, outcome_reason string, outcome_batch_id bigint",
    )
    assert_df_equality(found, expected, ignore_row_order=True, ignore_nullable=True)


@pytest.mark.fast
def test_a_statement_needs_every_dataframe_it_names(acker: Harness) -> None:
    anchors = acker.spark.createDataFrame([(1,)], "anchor_id bigint")
    missing = r"needs parameters \['outcome_anchors', 'this_batch'\]"
    with pytest.raises(KeyError, match=missing):
        run_sql(acker.spark, acker.config, "find_batch_tombstones", batch_anchors=anchors)


@pytest.mark.fast
def test_a_batch_s_fingerprint_counts_its_rows_and_sums_their_hashes_beyond_64_bits(
    acker: Harness,
) -> None:
    spark, config = acker.spark, acker.config
    columns = "anchor_id bigint, row_hash bigint, quarantine_reason string"
    classified = spark.createDataFrame(
        [
            (1, 5, None),
            (1, 5, None),  # a duplicate row counts twice: an XOR would cancel it
            (1, -2, "invalid_event_type"),
            (2, 2**62, None),
            (2, 2**62, None),  # beyond 64 bits once summed
            (4, -(2**63), None),
            (None, 4, "null_anchor_id"),
        ],
        columns,
    )

    fingerprint = run_sql_row(
        spark, config, "fingerprint_batch", BatchInput, classified_events=classified
    )
    empty = run_sql_row(
        spark,
        config,
        "fingerprint_batch",
        BatchInput,
        classified_events=spark.createDataFrame([], columns),
    )

    assert fingerprint == BatchInput(f"7:{5 + 5 - 2 + 2**62 + 2**62 - 2**63 + 4}", 2)
    assert empty == BatchInput("0:0", 0)


@pytest.mark.fast
@pytest.mark.parametrize("observed", [True, False], ids=["observed", "by_statement"])
def test_the_touched_rows_count_those_resolved_and_those_holding_more_keys_than_the_threshold(
    acker: Harness, observed: bool
) -> None:
    spark = acker.spark
    columns = (
        "anchor_id bigint, outcome string, applied_keys array<bigint>,"
        " prev struct<applied_keys: array<bigint>>"
    )
    many, threshold = list(range(70)), list(range(64))
    touched = spark.createDataFrame(
        [
            (1, None, [1, 2, 3], None),
            (2, "completed", [1], None),
            (3, None, many, None),
            (4, None, [1], (many,)),  # its keys before this batch's earlier attempt
            (5, "failed", many, (many,)),
            (6, None, threshold, (threshold,)),  # at the threshold is not above it
        ],
        columns,
    )

    checkpoint, counts = checkpoint_counted(touched, TouchedCounts, TOUCHED_COUNTS, observed)
    _, empty = checkpoint_counted(
        spark.createDataFrame([], columns), TouchedCounts, TOUCHED_COUNTS, observed
    )

    assert counts == TouchedCounts(resolved=2, large=3)
    assert empty == TouchedCounts(resolved=0, large=0)
    assert_df_equality(checkpoint, touched, ignore_row_order=True)


@pytest.mark.fast
def test_a_step_s_result_is_read_by_a_shape_naming_exactly_its_columns() -> None:
    row = {"fingerprint": "3:12", "quarantined": 1}
    assert row_as(row, BatchInput, "fingerprint_batch.sql") == BatchInput("3:12", 1)
    renamed = {"fingerprint": "3:12", "quarantined_rows": 1}
    with pytest.raises(TypeError, match=r"\['fingerprint', 'quarantined_rows'\].*BatchInput"):
        row_as(renamed, BatchInput, "fingerprint_batch.sql")


@pytest.mark.fast
def test_a_plan_counts_what_each_of_its_steps_found(acker: Harness) -> None:
    """Every step of plan_batch, each read by its typed shape, on a batch with one tree of each
    kind: the plan's figures are the batch log's counts, written by hand."""
    spark, config = acker.spark, acker.config
    events = [
        *(init(1, 5), ack(1, 5), ack(1, 5)),  # completed, with one re-delivered ack
        init(2, 6),  # stays pending
        *(init(3, 7), fail(3)),  # failed
        Event(0, "ack", 3, None, None, "bolt", at(0), None),  # the zero anchor: quarantined
    ]
    rows = spark.createDataFrame([event.row() for event in events], jobs.ACK_EVENTS_SCHEMA)

    plan = plan_batch(spark, config, rows, 0, read_position(spark, config))

    assert plan is not None
    assert plan.figures == BatchFigures(
        events_in=7,
        events_applied=5,
        duplicates=1,
        quarantined=1,
        late=0,
        completed=1,
        failed=1,
        overflowed=0,
        pending_inserted=1,
        pending_removed=0,
    )
    assert plan.rows_to_merge == 1  # tree 2; the trees resolved at once never enter pending
    assert {table: output.written_count() for table, output in plan.outputs.items()} == {
        "completed": 1,
        "failed": 1,
        "late_events": 0,
        "quarantine": 1,
    }


def temp_views(spark: SparkSession) -> set[str]:
    return {row["viewName"] for row in spark.sql("show views").collect() if row["isTemporary"]}


def test_a_micro_batch_leaves_no_view_in_the_session(spark: SparkSession, acker: Harness) -> None:
    before = temp_views(spark)
    acker.batch(init(1, 5), ack(1, 5), init(2, 6))
    acker.batch(ack(2, 6), ack(1, 5))  # a late ack: every step of a batch runs
    assert temp_views(spark) == before
    assert acker.pending_ids() == set() and acker.table("late_events").count() == 1


# The fold alone (its four SQL rules): each branch on hand-made classified events and
# pending rows, against hand-written expected rows.
CLASSIFIED_COLUMNS = (
    "anchor_id bigint, event_type string, xor_value bigint, spout_task int,"
    " source_msg_id string, event_time timestamp, event_epoch bigint, quarantine_reason string"
)
TOMBSTONE_COLUMNS = (
    "anchor_id bigint, outcome string, outcome_reason string, outcome_batch_id bigint"
)
FOLD_COLUMNS = (
    "anchor_id bigint, action string, checksum bigint, has_init boolean, failed boolean,"
    " epoch bigint, outcome string, applied bigint, duplicates bigint, late_from bigint,"
    " late_outcome string"
)


def classified(spark: SparkSession, *events: tuple[int, str, int, int]) -> DataFrame:
    """Valid classified events from (anchor, type, value, epoch), a second apart."""
    rows = [
        (anchor, kind, value, 1, "m", datetime(2026, 1, 1, 0, 0, second), epoch, None)
        for second, (anchor, kind, value, epoch) in enumerate(events)
    ]
    return spark.createDataFrame(rows, CLASSIFIED_COLUMNS)


def touched(acker: Harness, *trees: tuple[int, int, int, str]) -> DataFrame:
    """Rows of ``pending`` a batch touches, from (anchor, checksum, stamp, applied keys as a SQL
    array): trees with their init, last written by batch 3."""
    spark = acker.spark
    pending = spark.table(acker.config.qualified("pending"))
    rows = [
        spark.sql(
            f"select {anchor} as anchor_id, {checksum} as checksum, true as has_init,"
            " false as failed, 1 as spout_task, 'm' as source_msg_id,"
            " timestamp'2026-01-01' as init_time, timestamp'2026-01-01' as first_event_time,"
            f" timestamp'2026-01-01' as last_event_time, size({keys}) as event_count,"
            f" {stamp} as epoch, {keys} as applied_keys, 3 as batch_id, null as outcome,"
            " null as prev"
        )
        for anchor, checksum, stamp, keys in trees
    ]
    return reduce(DataFrame.unionByName, rows).select(
        *(F.col(field.name).cast(field.dataType) for field in pending.schema)
    )


def fold(
    acker: Harness,
    events: DataFrame,
    pending: DataFrame | None = None,
    columns: str = FOLD_COLUMNS,
    jvm_rules: bool = False,
    **settings: Any,
) -> DataFrame:
    spark = acker.spark
    params: dict[str, Any] = {
        "this_batch": this_batch(acker, 7),
        "epoch": 5,
        "refresh": "reset",
        "protocol": "storm",
        "large_tree_keys": 64,
        "large_trees": False,
        "multi_epoch": False,
        "buckets": 10,
        **settings,
    }
    empty = spark.table(acker.config.qualified("pending")).limit(0)
    state = fold_events(
        spark,
        acker.config,
        classified_events=events,
        batch_tombstones=spark.createDataFrame([], TOMBSTONE_COLUMNS),
        touched_pending=empty if pending is None else pending,
        jvm_rules=jvm_rules,
        **params,
    )
    return state.select(*(column.split()[0] for column in columns.split(", ")))


@pytest.fixture(params=[False, True], ids=["sql_rules", "java_rules"])
def jvm_rules(request: pytest.FixtureRequest) -> bool:
    """Whether the fold's second and third rules run as their SQL files or in Java
    (pipelines/jvm/EpochParts.java): each fold test holds for both."""
    return bool(request.param)


def assert_folded(
    acker: Harness, found: DataFrame, rows: list[tuple[Any, ...]], columns: str = FOLD_COLUMNS
) -> None:
    expected = acker.spark.createDataFrame(rows, columns)
    assert_df_equality(found, expected, ignore_row_order=True, ignore_nullable=True)


@pytest.mark.fast
def test_the_base_state_is_a_row_as_it_was_before_this_batch_however_often_it_ran(
    acker: Harness,
) -> None:
    rows = touched(acker, *((anchor, 6, 2, "array()") for anchor in (1, 2, 3, 4)))
    prev_type = rows.schema["prev"].dataType
    before_batch_7 = F.struct(*(F.col(field) for field in prev_type.fieldNames()))
    changed = ("anchor_id", "checksum", "batch_id", "outcome", "prev")
    rows = rows.select(
        "anchor_id",
        # 2: an earlier attempt of batch 7 moved it from checksum 6 to 4; 4: one created it
        F.when(F.col("anchor_id") == 2, 4).otherwise(F.col("checksum")).alias("checksum"),
        *(column for column in rows.columns if column not in changed),
        F.when(F.col("anchor_id").isin(2, 4), 7).otherwise(3).cast("bigint").alias("batch_id"),
        # 3: completed by batch 3, its row purged once this batch commits
        F.when(F.col("anchor_id") == 3, "completed").alias("outcome"),
        F.when(F.col("anchor_id") == 2, before_batch_7).cast(prev_type).alias("prev"),
    )

    base = run_sql(
        acker.spark,
        acker.config,
        "select_base_state",
        touched_pending=rows,
        this_batch=this_batch(acker, 7),
    ).select("anchor_id", "base.checksum", "resolved_earlier", "pending_adjust")

    expected = acker.spark.createDataFrame(
        [(1, 6, False, 0), (2, 6, False, 0), (3, None, True, 0), (4, None, False, -1)],
        "anchor_id bigint, checksum bigint, resolved_earlier boolean, pending_adjust int",
    )
    assert_df_equality(base, expected, ignore_row_order=True, ignore_nullable=True)


@pytest.mark.fast
@pytest.mark.parametrize("refresh", ["reset", "activity"])
def test_the_fold_renews_a_stamp_on_reset_or_on_any_applied_event(
    acker: Harness, jvm_rules: bool, refresh: str
) -> None:
    pending = touched(acker, (1, 6, 2, "array(xxhash64('init', 6L))"), (2, 6, 2, "array()"))
    events = classified(acker.spark, (1, "ack", 4, 5), (2, "reset", 0, 5))
    renewed_by_ack = 5 if refresh == "activity" else 2
    assert_folded(
        acker,
        fold(acker, events, pending, jvm_rules=jvm_rules, refresh=refresh),
        [
            (1, "upsert", 6 ^ 4, True, False, renewed_by_ack, None, 1, 0, None, None),
            (2, "upsert", 6, True, False, 5, None, 1, 0, None, None),
        ],
    )


@pytest.mark.fast
@pytest.mark.parametrize("protocol", ["storm", "fsshelter"])
def test_the_fold_completes_a_lone_init_of_zero_under_storm_only(
    acker: Harness, jvm_rules: bool, protocol: str
) -> None:
    events = classified(
        acker.spark, (1, "init", 0, 5), (2, "init", 0, 5), (2, "anchor", 7, 5), (2, "ack", 7, 5)
    )
    lone = "completed" if protocol == "storm" else None
    assert_folded(
        acker,
        fold(acker, events, jvm_rules=jvm_rules, protocol=protocol),
        [
            (1, "upsert", 0, True, False, 5, lone, 1, 0, None, lone),
            (2, "upsert", 0, True, False, 5, "completed", 3, 0, None, "completed"),
        ],
    )


@pytest.mark.fast
def test_the_fold_of_a_pass_applies_epochs_in_order_until_an_outcome(
    acker: Harness, jvm_rules: bool
) -> None:
    events = classified(
        acker.spark,
        (1, "init", 6, 5),
        (1, "ack", 6, 8),  # after the tick to epoch 7 expired the tree: late
        (2, "init", 6, 5),
        (2, "ack", 6, 6),
        (3, "init", 9, 5),
        (3, "init", 9, 6),  # applied in epoch 5: a re-delivery
        (3, "ack", 9, 6),
    )
    assert_folded(
        acker,
        fold(acker, events, jvm_rules=jvm_rules, multi_epoch=True, buckets=2),
        [
            (1, "upsert", 6, True, False, 5, None, 1, 0, 8, "expired"),
            (2, "upsert", 0, True, False, 5, "completed", 2, 0, None, "completed"),
            (3, "upsert", 0, True, False, 5, "completed", 2, 1, None, "completed"),
        ],
    )


@pytest.mark.fast
def test_a_tree_s_applied_epochs_add_up_and_its_late_ones_are_left_out(
    acker: Harness, jvm_rules: bool
) -> None:
    events = classified(  # an event a second, from 00:00:00, in this order
        acker.spark,
        (1, "init", 6, 5),
        (1, "ack", 2, 6),
        (1, "ack", 5, 6),  # 6 ^ 2 ^ 5 = 1: pending
        (2, "init", 6, 5),
        (2, "ack", 6, 6),  # completes it in epoch 6
        (2, "ack", 9, 7),  # late
        (3, "init", 5, 6),  # one epoch, its own
    )
    columns = (
        "anchor_id bigint, first_epoch bigint, init_time timestamp, first_event_time timestamp,"
        " last_event_time timestamp, event_count bigint, rows_in bigint,"
        " applied_keys array<bigint>, late_from bigint, late_rows bigint"
    )
    found = fold(acker, events, jvm_rules=jvm_rules, columns=columns, multi_epoch=True)

    def keys(*events: tuple[str, int]) -> list[int]:
        hashed = [F.xxhash64(F.lit(kind), F.lit(value).cast("bigint")) for kind, value in events]
        row = acker.spark.range(1).select(F.array_sort(F.array(*hashed))).first()
        assert row is not None
        return list(row[0])

    def tree(
        anchor: int, first_epoch: int, seconds: tuple[int, int, int], events: int
    ) -> tuple[Any, ...]:
        init, first, last = (datetime(2026, 1, 1, 0, 0, second) for second in seconds)
        return (anchor, first_epoch, init, first, last, events, events)

    assert_folded(
        acker,
        found.withColumn("applied_keys", F.array_sort("applied_keys")),
        [
            (*tree(1, 5, (0, 0, 2), 3), keys(("init", 6), ("ack", 2), ("ack", 5)), None, 0),
            (*tree(2, 5, (3, 3, 4), 2), keys(("init", 6), ("ack", 6)), 7, 1),
            (*tree(3, 6, (6, 6, 6), 1), keys(("init", 5)), None, 0),
        ],
        columns,
    )


@pytest.mark.fast
def test_a_tree_takes_its_spout_task_and_message_id_from_its_latest_init_whatever_the_order(
    acker: Harness, jvm_rules: bool
) -> None:
    noon, later = datetime(2026, 1, 1, 12), datetime(2026, 1, 1, 12, 0, 1)
    rows = [  # (anchor, init value, spout task, message id, time), in this order
        # copies of one init at the same time: the greatest message id, then spout task
        (1, 6, 3, "m-a", noon),
        (1, 6, 1, "m-c", noon),
        (1, 6, 2, "m-c", noon),
        # a message id above none
        (2, 6, 5, None, noon),
        (2, 6, 4, "m-a", noon),
        # two inits of one tree at the same time: the same rule
        (3, 9, 2, "m-a", noon),
        (3, 6, 1, "m-b", noon),
        # a later copy above a greater message id
        (4, 6, 2, "m-a", later),
        (4, 6, 1, "m-z", noon),
    ]
    events = acker.spark.createDataFrame(
        [
            (anchor, "init", value, task, msg, time, 5, None)
            for anchor, value, task, msg, time in rows
        ],
        CLASSIFIED_COLUMNS,
    )
    columns = "anchor_id bigint, spout_task int, source_msg_id string"
    assert_folded(
        acker,
        fold(acker, events, jvm_rules=jvm_rules, columns=columns),
        [(1, 2, "m-c"), (2, 4, "m-a"), (3, 1, "m-b"), (4, 2, "m-a")],
        columns,
    )


@pytest.mark.fast
@pytest.mark.parametrize("keys_held", [65, 64])
def test_a_large_tree_finds_its_re_deliveries_by_intersection_as_a_small_one_does_by_search(
    acker: Harness, jvm_rules: bool, keys_held: int
) -> None:
    # the plan passes large_trees when a touched tree holds more than large_tree_keys keys
    keys = f"transform(sequence(1L, {keys_held}L), v -> xxhash64('ack', v))"
    pending = touched(acker, (9, 1000, 4, keys))
    events = classified(acker.spark, (9, "ack", 3, 5), (9, "ack", 66, 5))
    assert_folded(
        acker,
        fold(acker, events, pending, jvm_rules=jvm_rules, large_trees=keys_held > 64),
        [(9, "upsert", 1000 ^ 66, True, False, 4, None, 1, 1, None, None)],
    )


# Writing the new state: the MERGE and the overwrite that replaces it on a small pending, each
# alone on the same hand-made pending rows and batch state, against hand-written rows.
@pytest.mark.fast
@pytest.mark.parametrize("statement", ["merge_pending", "overwrite_pending"])
def test_the_new_state_is_written_to_pending_as_each_row_s_action_says(
    acker: Harness, statement: str
) -> None:
    spark, config = acker.spark, acker.config
    # trees 1-4 and 8 pending (checksum 6), written by batch 3
    touched(acker, *((anchor, 6, 2, "array(11)") for anchor in (1, 2, 3, 4, 8))).writeTo(
        config.qualified("pending")
    ).append()
    changes = {  # anchor: (action, new checksum, outcome) of batch 7
        1: ("upsert", 4, None),  # still pending: updated
        2: ("upsert", 0, "completed"),  # resolved: its row stays, marked, until the next batch
        3: ("purge", 6, None),  # resolved by an earlier batch: removed
        4: ("drop", 6, None),  # only an earlier attempt of this batch made it: removed
        5: ("upsert", 9, None),  # new and pending: inserted
        6: ("upsert", 0, "completed"),  # new and resolved at once: never gets a row
        7: ("drop", 6, None),  # nothing to remove
    }
    trees = touched(acker, *((anchor, 6, 2, "array(11)") for anchor in changes))
    actions = spark.createDataFrame(
        [(anchor, *change) for anchor, change in changes.items()],
        "anchor_id bigint, action string, checksum bigint, outcome string",
    )
    state = (
        trees.drop("checksum", "outcome")
        .join(actions, "anchor_id")
        .withColumn("batch_id", F.lit(7).cast("bigint"))
        .withColumn("in_table", F.col("anchor_id").isin(1, 2, 3, 4))
    )

    run_sql(spark, config, statement, batch_state=state).collect()

    found = acker.table("pending").select("anchor_id", "checksum", "batch_id", "outcome")
    expected = spark.createDataFrame(
        [(1, 4, 7, None), (2, 0, 7, "completed"), (5, 9, 7, None), (8, 6, 3, None)],
        "anchor_id bigint, checksum bigint, batch_id bigint, outcome string",
    )
    assert_df_equality(
        found, expected, ignore_row_order=True, ignore_nullable=True, ignore_metadata=True
    )


@pytest.mark.fast
def test_a_batch_overwrites_a_pending_no_larger_than_it_and_merges_into_a_larger_one(
    acker: Harness,
) -> None:
    acker.batch(init(1, 5), init(2, 6), init(3, 7))  # 3 rows into an empty pending
    acker.batch(ack(1, 5))  # 1 row into 3
    history = acker.spark.sql(f"describe history {acker.config.qualified('pending')}")
    operations = [row["operation"] for row in history.orderBy("version").collect()]
    assert operations[-2:] == ["WRITE", "MERGE"]
    assert acker.pending_ids() == {2, 3}
