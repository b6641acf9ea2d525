"""Named edge cases of the XOR acker, each run through the real stream over Delta tables and
checked against whole outcome tables written by hand."""

from __future__ import annotations

import shutil

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from pipelines import jobs
from pipelines.engine import BatchResult, TickResult, process_batch
from pipelines.errors import CheckpointMismatch
from pipelines.jobs import ACK_EVENTS_SCHEMA
from pipelines.tables import REBORN_ENTRIES_PROPERTY
from tests.acker_harness import Harness, ack, anchor, fail, init, outcome, reset

A, B, C, D = 101, 202, 303, 404
# Random-looking non-zero 64-bit edge ids, some negative.
E1, E2, E3, E4 = 0x1F2E3D4C5B6A7988, -0x0123456789ABCDEF, 0x7777000011112222, -0x5A5A5A5A5A5A5A5A


def test_empty_batch_writes_a_batch_row_and_no_outcome(acker: Harness) -> None:
    empty = acker.spark.createDataFrame([], ACK_EVENTS_SCHEMA)
    result = process_batch(acker.spark, acker.config, empty, 0)
    assert result is not None
    assert (result.events_in, result.events_applied, result.completed, result.failed) == (
        0,
        0,
        0,
        0,
    )
    assert acker.table("batches").select("batch_id", "events_in").collect() == [(0, 0)]
    assert acker.pending_ids() == set()
    acker.assert_outcomes()


def test_runs_with_no_new_events_change_nothing(acker: Harness) -> None:
    first = acker.batch()  # the stream's first batch sees the empty table
    assert first.events_in == 0
    second = acker.batch()
    assert (second.batches, second.events_in) == (0, 0)
    assert acker.pending_ids() == set()
    acker.assert_outcomes()


def test_tree_closing_inside_one_batch(acker: Harness) -> None:
    acker.batch(init(A, E1 ^ E2, 0), ack(A, E1, 10), ack(A, E2, 25))
    acker.assert_outcomes(
        completed=[outcome(A, "acked", init_ms=0, first_ms=0, last_ms=25, events=3, batch=0)]
    )
    assert acker.pending_ids() == set()


def test_run_tells_progress_of_each_committed_batch(acker: Harness) -> None:
    acker.batch(init(A, E1, 0))
    jobs.append_events(acker.spark, acker.config, [ack(A, E1, 10), init(B, E2, 20)])
    heard: list[BatchResult | TickResult] = []
    jobs.run(acker.spark, acker.config, heard.append)
    assert [
        (r.batch_id, r.status, r.events_in, r.completed, r.pending_inserted)
        for r in heard
        if isinstance(r, BatchResult)
    ] == [(1, "committed", 2, 1, 1)]


def test_a_lost_checkpoint_is_refused_with_the_reason_and_changes_nothing(acker: Harness) -> None:
    acker.batch(init(A, E1, 0))
    acker.batch(ack(A, E1, 5), init(B, E2, 0))
    shutil.rmtree(acker.config.checkpoint_path)
    with pytest.raises(
        CheckpointMismatch, match=r"^micro-batch 0 is older than the last committed batch 1"
    ):
        jobs.run(acker.spark, acker.config)
    assert acker.pending_ids() == {B}
    acker.assert_outcomes(
        completed=[outcome(A, "acked", init_ms=0, first_ms=0, last_ms=5, events=2, batch=1)]
    )


def test_tree_closing_across_two_batches(acker: Harness) -> None:
    acker.batch(init(A, E1 ^ E2, 0), ack(A, E1, 10))
    assert acker.pending_ids() == {A}
    acker.assert_outcomes()
    acker.batch(ack(A, E2, 40))
    acker.assert_outcomes(
        completed=[outcome(A, "acked", init_ms=0, first_ms=0, last_ms=40, events=3, batch=1)]
    )
    assert acker.pending_ids() == set()


def test_ack_before_init_is_held_until_init(acker: Harness) -> None:
    # Acks XOR to zero on their own: no init, so nothing may resolve (Storm holds them too).
    acker.batch(ack(A, E1, 10), ack(A, E2, 20), ack(A, E1 ^ E2, 30))
    assert acker.pending_ids() == {A}
    acker.assert_outcomes()
    # An init of 0 (a spout tuple nobody subscribed to) then completes the tree.
    acker.batch(init(A, 0, 5))
    acker.assert_outcomes(
        completed=[outcome(A, "acked", init_ms=5, first_ms=5, last_ms=30, events=4, batch=1)]
    )


def test_fail_before_init_is_held_then_failed_when_init_arrives(acker: Harness) -> None:
    acker.batch(fail(A, 10))
    assert acker.pending_ids() == {A}
    acker.assert_outcomes()
    acker.batch(init(A, E1, 0))
    acker.assert_outcomes(
        failed=[outcome(A, "fail", init_ms=0, first_ms=0, last_ms=10, events=2, batch=1)]
    )


def test_fail_wins_over_a_zero_checksum(acker: Harness) -> None:
    acker.batch(init(A, E1, 0), ack(A, E1, 10), fail(A, 20))
    acker.assert_outcomes(
        failed=[outcome(A, "fail", init_ms=0, first_ms=0, last_ms=20, events=3, batch=0)]
    )


def test_duplicated_ack_in_same_and_later_batch_is_dropped(acker: Harness) -> None:
    acker.batch(init(A, E1 ^ E2, 0), ack(A, E1, 10), ack(A, E1, 10))
    assert acker.pending_ids() == {A}
    acker.batch(ack(A, E1, 10), ack(A, E2, 30))
    acker.assert_outcomes(
        completed=[outcome(A, "acked", init_ms=0, first_ms=0, last_ms=30, events=3, batch=1)]
    )
    duplicates = acker.table("batches").orderBy("batch_id").select("batch_id", "duplicates")
    assert [tuple(r) for r in duplicates.collect()] == [(0, 1), (1, 1)]


def test_a_tree_holding_many_keys_drops_its_redeliveries_as_a_small_one_does(
    acker: Harness,
) -> None:
    """A tree that holds more than 64 keys finds re-delivered keys by one intersection of its
    keys with the batch's, instead of a scan per key: the same rule, another plan."""
    edges = [(E1 * (i + 1)) & 0x3FFF_FFFF_FFFF_FFFF for i in range(100)]
    checksum = 0
    for edge in edges:
        checksum ^= edge
    acker.batch(init(A, checksum, 0), *(ack(A, e, 10) for e in edges[:80]))
    assert acker.pending_ids() == {A}
    # ten keys of the first batch again (one of them twice), the rest of the edges once
    again = [ack(A, e, 20) for e in edges[:10]] + [ack(A, edges[0], 20)]
    acker.batch(*again, *(ack(A, e, 30) for e in edges[80:]))
    acker.assert_outcomes(
        completed=[outcome(A, "acked", init_ms=0, first_ms=0, last_ms=30, events=101, batch=1)]
    )
    duplicates = acker.table("batches").orderBy("batch_id").select("batch_id", "duplicates")
    assert [tuple(r) for r in duplicates.collect()] == [(0, 0), (1, 11)]


def test_every_fail_and_reset_is_applied_and_none_counts_as_a_duplicate(acker: Harness) -> None:
    acker.batch(reset(A, 0), reset(A, 10), fail(A, 20), fail(A, 30))
    acker.batch(fail(A, 40), reset(A, 50))
    acker.batch(init(A, E1, 60))
    acker.assert_outcomes(
        failed=[outcome(A, "fail", init_ms=60, first_ms=0, last_ms=60, events=7, batch=2)]
    )
    counts = acker.table("batches").where("status = 'committed'").orderBy("batch_id")
    assert [tuple(r) for r in counts.select("events_applied", "duplicates").collect()] == [
        (4, 0),
        (2, 0),
        (1, 0),
    ]
    summary = acker.table("outcome_summary").agg({"duplicate_events": "sum"}).first()
    assert summary is not None and summary[0] == 0


def test_multi_anchoring_one_tuple_in_two_trees(acker: Harness) -> None:
    joined = E3
    acker.batch(
        init(A, E1, 0),
        init(B, E2, 1, task=2),
        ack(A, E1 ^ joined, 10),
        ack(B, E2 ^ joined, 11),
    )
    assert acker.pending_ids() == {A, B}
    acker.batch(ack(A, joined, 20), ack(B, joined, 20))
    acker.assert_outcomes(
        completed=[
            outcome(A, "acked", init_ms=0, first_ms=0, last_ms=20, events=3, batch=1),
            outcome(B, "acked", init_ms=1, first_ms=1, last_ms=20, events=3, batch=1, task=2),
        ]
    )


@pytest.mark.parametrize("refresh", ["reset", "activity"])
def test_expiry_exactly_at_the_buckets_th_tick(acker_factory, refresh: str) -> None:  # type: ignore[no-untyped-def]
    acker = acker_factory(buckets=3, refresh=refresh)
    acker.batch(init(A, E1 ^ E2, 0), ack(B, E3, 5))  # B: an ack whose init never comes
    acker.tick()  # epoch 1
    acker.batch(ack(A, E1, 10))  # activity renews A's stamp to 1; reset does not
    acker.tick()  # epoch 2
    assert acker.pending_ids() == {A, B}
    acker.tick()  # epoch 3 = 0 + buckets: everything stamped 0 expires
    a_timeout = outcome(A, "timeout", init_ms=0, first_ms=0, last_ms=10, events=2, batch=1, epoch=3)
    b_no_init = outcome(
        B, "no_init", init_ms=None, first_ms=5, last_ms=5, events=1, batch=1, epoch=3
    )
    if refresh == "reset":
        assert acker.pending_ids() == set()
        acker.assert_outcomes(expired=[a_timeout, b_no_init])
    else:
        assert acker.pending_ids() == {A}
        acker.assert_outcomes(expired=[b_no_init])
        acker.tick()  # epoch 4 = 1 + buckets
        a_timeout = outcome(
            A, "timeout", init_ms=0, first_ms=0, last_ms=10, events=2, batch=1, epoch=4
        )
        acker.assert_outcomes(expired=[a_timeout, b_no_init])


def test_reset_renews_a_live_entry(acker_factory) -> None:  # type: ignore[no-untyped-def]
    acker = acker_factory(buckets=2, refresh="reset")
    acker.batch(init(A, E1, 0), init(B, E2, 0))
    acker.tick()  # epoch 1
    acker.batch(reset(A, 50))  # A restamped at 1
    acker.tick()  # epoch 2: B (stamp 0) expires, A (stamp 1) lives
    assert acker.pending_ids() == {A}
    acker.tick()  # epoch 3: A expires
    acker.assert_outcomes(
        expired=[
            outcome(B, "timeout", init_ms=0, first_ms=0, last_ms=0, events=1, batch=1, epoch=2),
            outcome(A, "timeout", init_ms=0, first_ms=0, last_ms=50, events=2, batch=1, epoch=3),
        ]
    )


def test_a_held_fail_renews_its_entry_as_a_reset_does(acker_factory) -> None:  # type: ignore[no-untyped-def]
    acker = acker_factory(buckets=2, refresh="reset")
    acker.batch(fail(A, 0), ack(B, E1, 0))  # both held: their init has not come
    acker.tick()  # epoch 1
    acker.batch(fail(A, 50))  # A restamped at 1, as Storm 2.x's acker re-buckets on FAIL
    acker.tick()  # epoch 2: B (stamp 0) expires, A (stamp 1) lives
    assert acker.pending_ids() == {A}
    acker.tick()  # epoch 3: A expires
    acker.assert_outcomes(
        expired=[
            outcome(A, "no_init", init_ms=None, first_ms=0, last_ms=50, events=2, batch=1, epoch=3),
            outcome(B, "no_init", init_ms=None, first_ms=0, last_ms=0, events=1, batch=1, epoch=2),
        ]
    )


def test_late_ack_after_completion_and_after_expiry(acker: Harness) -> None:
    acker.batch(init(A, E1, 0), ack(A, E1, 10), init(B, E2, 0))
    acker.tick(3)  # B expires at epoch 3
    acker.batch(ack(A, E1, 100), ack(B, E2, 100))
    assert acker.pending_ids() == set()
    late = acker.table("late_events").select(
        "anchor_id", "event_type", "outcome", "outcome_reason", "outcome_batch_id", "batch_id"
    )
    expected = acker.spark.createDataFrame(
        [(A, "ack", "completed", "acked", 0, 1), (B, "ack", "expired", "timeout", 0, 1)],
        late.schema,
    )
    assert_df_equality(
        late, expected, ignore_row_order=True, ignore_nullable=True, ignore_metadata=True
    )
    # the batch log counts the late events as their append wrote them
    logged = acker.table("batches").where("batch_id = 1").select("events_in", "late").collect()
    assert [tuple(row) for row in logged] == [(2, 2)]
    acker.assert_outcomes(
        completed=[outcome(A, "acked", init_ms=0, first_ms=0, last_ms=10, events=2, batch=0)],
        expired=[
            outcome(B, "timeout", init_ms=0, first_ms=0, last_ms=0, events=1, batch=0, epoch=3)
        ],
    )


def test_an_anchor_gets_one_outcome_however_late_its_next_events_come(
    acker_factory,  # type: ignore[no-untyped-def]
) -> None:
    acker: Harness = acker_factory(buckets=2)
    acker.batch(init(A, E1, 0), ack(A, E1, 10))  # completes at epoch 0
    acker.batch(ack(B, E2, 20))  # B's ack before its init
    acker.tick(2)  # B expires no_init at epoch 2
    acker.tick(20)
    # Twenty ticks on: an ack of A, and B's init with its ack again, are late, and open no
    # entry that could expire or complete as a second outcome.
    acker.batch(ack(A, E3, 200), init(B, E2, 210, task=2, msg="b"), ack(B, E2, 220))
    assert acker.pending_ids() == set()
    acker.tick(3)

    acker.assert_outcomes(
        completed=[outcome(A, "acked", init_ms=0, first_ms=0, last_ms=10, events=2, batch=0)],
        expired=[
            outcome(B, "no_init", init_ms=None, first_ms=20, last_ms=20, events=1, batch=1, epoch=2)
        ],
    )
    late = acker.table("late_events").select(
        "anchor_id", "event_type", "outcome", "outcome_reason", "outcome_batch_id", "batch_id"
    )
    expected = acker.spark.createDataFrame(
        [
            (A, "ack", "completed", "acked", 0, 2),
            (B, "init", "expired", "no_init", 1, 2),
            (B, "ack", "expired", "no_init", 1, 2),
        ],
        late.schema,
    )
    assert_df_equality(
        late, expected, ignore_row_order=True, ignore_nullable=True, ignore_metadata=True
    )
    # The late init makes B's no_init expiry something its spout can replay, once.
    replay = acker.table("replay_queue").where(f"anchor_id = {B}")
    assert [tuple(r) for r in replay.select("spout_task", "source_msg_id", "reason").collect()] == [
        (2, "b", "no_init")
    ]
    assert acker.table("ticks").where("late_no_init > 0").count() == 0


def test_an_entry_an_older_acker_opened_after_an_outcome_expires_as_late_events(
    acker_factory,  # type: ignore[no-untyped-def]
) -> None:
    acker: Harness = acker_factory(buckets=2)
    _make_pending_an_older_acker_s(acker)
    _plant_entry_opened_after_an_outcome(acker)
    acker.tick(2)  # the tick that would expire A's entry no_init

    assert acker.pending_ids() == set()
    assert acker.table("expired").count() == 0
    late = acker.table("late_events").select(
        "anchor_id", "event_type", "outcome", "outcome_reason", "outcome_batch_id", "tick_epoch"
    )
    expected = acker.spark.createDataFrame([(A, "ack", "completed", "acked", 0, 2)], late.schema)
    assert_df_equality(late, expected, ignore_nullable=True, ignore_metadata=True)
    ticks = acker.table("ticks").select("epoch", "expired_no_init", "late_no_init")
    assert [tuple(r) for r in ticks.orderBy("epoch").collect()] == [(1, 0, 0), (2, 0, 1)]


def test_a_batch_leaves_an_entry_an_older_acker_opened_after_an_outcome_as_it_is(
    acker_factory,  # type: ignore[no-untyped-def]
) -> None:
    acker: Harness = acker_factory(buckets=2)
    _make_pending_an_older_acker_s(acker)
    _plant_entry_opened_after_an_outcome(acker)
    acker.batch(ack(A, E3, 30))  # late, for A completed in batch 0: the entry is not its state

    entry = acker.table("pending").select("anchor_id", "batch_id", "checksum", "event_count")
    assert [tuple(r) for r in entry.collect()] == [(A, 0, E2, 1)]
    late = acker.table("late_events").select(
        "anchor_id", "event_type", "outcome", "outcome_reason", "outcome_batch_id", "batch_id"
    )
    expected = acker.spark.createDataFrame([(A, "ack", "completed", "acked", 0, 1)], late.schema)
    assert_df_equality(late, expected, ignore_nullable=True, ignore_metadata=True)


def _make_pending_an_older_acker_s(acker: Harness) -> None:
    """pending as an older acker created it, without the property saying it holds no entry
    opened for an anchor that already has an outcome."""
    acker.spark.sql(
        f"alter table {acker.config.qualified('pending')} "
        f"unset tblproperties ('{REBORN_ENTRIES_PROPERTY}')"
    )


def _plant_entry_opened_after_an_outcome(acker: Harness) -> None:
    """A's entry without init, opened although A had completed before the batch that opened
    it: what an older acker, which forgot outcomes after a window, could leave."""
    acker.batch(init(B, E1, 0), ack(B, E1, 5), ack(A, E2, 10))  # B completes; A's ack, no init
    earlier = acker.table("completed").where(f"anchor_id = {B}").withColumn("anchor_id", F.lit(A))
    earlier.write.format("delta").mode("append").saveAsTable(acker.config.qualified("completed"))


def test_ticks_on_tables_this_acker_created_do_not_look_for_entries_opened_after_an_outcome(
    acker_factory,  # type: ignore[no-untyped-def]
) -> None:
    # This acker never opens such an entry, so its ticks skip reading every outcome to find
    # them: planted all the same, the entry expires as any entry without init does.
    acker: Harness = acker_factory(buckets=2)
    _plant_entry_opened_after_an_outcome(acker)
    acker.tick(2)

    expired = acker.table("expired").select("anchor_id", "reason", "epoch")
    assert [tuple(row) for row in expired.collect()] == [(A, "no_init", 2)]
    assert acker.table("late_events").count() == 0
    ticks = acker.table("ticks").select("epoch", "expired_no_init", "late_no_init")
    assert [tuple(r) for r in ticks.orderBy("epoch").collect()] == [(1, 0, 0), (2, 1, 0)]


def test_fsshelter_protocol_track_anchor_ok_fail(acker: Harness) -> None:
    # Track (init 0), Anchor for each new tuple id, Ok for each processed tuple.
    t1, t2, t3 = E1, E2, E3
    acker.batch(
        init(A, 0, 0),
        anchor(A, t1, 1),
        anchor(A, t2, 2),
        ack(A, t1, 3),
        anchor(A, t3, 4),
        init(B, 0, 0, task=3),
        anchor(B, t1, 1),
        fail(B, 9),
    )
    assert acker.pending_ids() == {A}
    acker.batch(ack(A, t2, 20), ack(A, t3, 21))
    acker.assert_outcomes(
        completed=[outcome(A, "acked", init_ms=0, first_ms=0, last_ms=21, events=7, batch=1)],
        failed=[outcome(B, "fail", init_ms=0, first_ms=0, last_ms=9, events=3, batch=0, task=3)],
    )


def late_event_rows(acker: Harness) -> list[tuple[int, str, str, int]]:
    late = acker.table("late_events").select("anchor_id", "event_type", "outcome", "batch_id")
    return sorted(tuple(row) for row in late.collect())


def test_under_storm_an_init_of_zero_alone_completes_its_tree(acker: Harness) -> None:
    # Storm 2.x sends init 0 for a spout tuple that no task subscribes to, and acks it at once.
    acker.batch(init(A, 0, 0))
    acker.batch(anchor(A, E1, 10), ack(A, E1, 20))
    acker.assert_outcomes(
        completed=[outcome(A, "acked", init_ms=0, first_ms=0, last_ms=0, events=1, batch=0)]
    )
    assert late_event_rows(acker) == [(A, "ack", "completed", 1), (A, "anchor", "completed", 1)]


def test_under_fsshelter_a_track_alone_waits_for_the_ok_that_balances_it(acker_factory) -> None:  # type: ignore[no-untyped-def]
    # FsShelter's Track always carries 0: only an Ok bringing the checksum back to 0 completes.
    acker = acker_factory(protocol="fsshelter")
    acker.batch(init(A, 0, 0), init(B, 0, 0), anchor(B, E2, 1), ack(B, E2, 2))
    assert acker.pending_ids() == {A}
    acker.batch(anchor(A, E1, 10), ack(A, E1, 20))
    acker.assert_outcomes(
        completed=[
            outcome(B, "acked", init_ms=0, first_ms=0, last_ms=2, events=3, batch=0),
            outcome(A, "acked", init_ms=0, first_ms=0, last_ms=20, events=3, batch=1),
        ]
    )
    assert late_event_rows(acker) == []


def test_storm_protocol_partial_checksums(acker: Harness) -> None:
    # Spout emits to two tasks (edges a, b); the bolt on a emits c and d, acking a^c^d.
    a, b, c, d = E1, E2, E3, E4
    acker.batch(init(A, a ^ b, 0), ack(A, a ^ c ^ d, 10), ack(A, b, 11), ack(A, c, 20))
    assert acker.pending_ids() == {A}
    acker.batch(ack(A, d, 30))
    acker.assert_outcomes(
        completed=[outcome(A, "acked", init_ms=0, first_ms=0, last_ms=30, events=5, batch=1)]
    )


def test_replaying_a_committed_batch_changes_nothing(acker: Harness) -> None:
    events = [init(A, E1 ^ E2, 0), ack(A, E1, 10), ack(A, E2, 20), init(B, E3, 5)]
    acker.batch(*events)
    before = {name: acker.table(name).collect() for name in ("completed", "pending", "batches")}
    replay = acker.spark.createDataFrame([e.row() for e in events], ACK_EVENTS_SCHEMA)
    assert process_batch(acker.spark, acker.config, replay, 0) is None
    for name, rows in before.items():
        after = acker.table(name).collect()
        assert sorted(after, key=repr) == sorted(rows, key=repr), name
    acker.assert_outcomes(
        completed=[outcome(A, "acked", init_ms=0, first_ms=0, last_ms=20, events=3, batch=0)]
    )
    assert acker.pending_ids() == {B}
