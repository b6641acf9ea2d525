"""Ticks: a run of many ticks is one pass that expires each tree at the tick its stamp
gives, as ticking one by one would."""

from __future__ import annotations

from pipelines import jobs
from tests.acker_harness import ack, init, outcome, reset

A, B, C = 101, 202, 303
E1, E2, E3 = 0x1F2E3D4C5B6A7988, -0x0123456789ABCDEF, 0x7777000011112222


def test_many_ticks_in_one_pass_expire_each_tree_at_its_own_tick(acker_factory) -> None:  # type: ignore[no-untyped-def]
    acker = acker_factory(buckets=2, refresh="reset")
    acker.batch(init(A, E1, 0), init(B, E2, 0))
    acker.tick()  # epoch 1
    acker.batch(reset(A, 50), ack(C, E3, 60))  # A restamped at 1; C, without init, stamped 1
    ticks = jobs.tick(acker.spark, acker.config, 4)  # epochs 2 to 5 in one pass
    assert [(t.epoch, t.expired_timeout, t.expired_no_init) for t in ticks] == [
        (2, 1, 0),  # B: stamp 0 + 2 buckets
        (3, 1, 1),  # A and C: stamp 1 + 2 buckets
        (4, 0, 0),
        (5, 0, 0),
    ]
    rows = acker.table("ticks").select("epoch", "expired_timeout", "expired_no_init")
    assert sorted(tuple(r) for r in rows.collect()) == [
        (1, 0, 0),
        (2, 1, 0),
        (3, 1, 1),
        (4, 0, 0),
        (5, 0, 0),
    ]
    acker.assert_outcomes(
        expired=[
            outcome(B, "timeout", init_ms=0, first_ms=0, last_ms=0, events=1, batch=1, epoch=2),
            outcome(A, "timeout", init_ms=0, first_ms=0, last_ms=50, events=2, batch=1, epoch=3),
            outcome(
                C, "no_init", init_ms=None, first_ms=60, last_ms=60, events=1, batch=1, epoch=3
            ),
        ]
    )
    assert jobs.status(acker.spark, acker.config).epoch == 5
