"""Storm's own acking integration tests (TopologyIntegrationTest, TestingTest), replayed as
the acker messages their topologies send, with the outcomes Storm asserts."""

from __future__ import annotations

import random

from pipelines.workload import new_id
from tests.acker_harness import Harness, ack, fail, init, outcome

R = random.Random(1729)


def ids(n: int) -> list[int]:
    return [new_id(R) for _ in range(n)]


def test_acking_branching_bolts_and_aggregator(acker: Harness) -> None:
    """testAcking, step 2: both trees complete only after the last ack."""
    a_root, b_root = 11, 22
    a, b = ids(2)
    x1, x2, y1, y2, y3, y4 = ids(6)
    g1, g2, g3, h1, h2 = ids(5)
    k2, k3, k4, m1, m2 = ids(5)
    first = [
        init(a_root, a, 0),
        ack(a_root, a ^ x1 ^ x2, 1),  # bolt 4 branches A into 2
        init(b_root, b, 0, task=2),
        ack(b_root, b ^ y1 ^ y2 ^ y3 ^ y4, 1),  # bolt 5 into 4
        # bolt 7 aggregates A1, A2, B1 into G (ids {A: g1^g2, B: g3}) and acks them
        ack(a_root, x1 ^ g1, 2),
        ack(a_root, x2 ^ g2, 2),
        ack(b_root, y1 ^ g3, 2),
        # bolt 8 emits H1, H2 anchored to G: the same edges under both roots
        ack(a_root, g1 ^ g2 ^ h1 ^ h2, 3),
        ack(b_root, g3 ^ h1 ^ h2, 3),
        ack(a_root, h1, 4),
        ack(b_root, h1, 4),
        ack(a_root, h2, 4),
        ack(b_root, h2, 4),
        # bolt 7 aggregates B2..B4 into K; bolt 8 emits M1, M2
        ack(b_root, y2 ^ k2, 5),
        ack(b_root, y3 ^ k3, 5),
        ack(b_root, y4 ^ k4, 5),
        ack(b_root, k2 ^ k3 ^ k4 ^ m1 ^ m2, 6),
        ack(b_root, m1, 7),
    ]
    acker.batch(*first)
    assert acker.pending_ids() == {b_root}, "A is complete; B waits for its last ack"
    acker.batch(ack(b_root, m2, 8))
    acker.assert_outcomes(
        completed=[
            outcome(a_root, "acked", init_ms=0, first_ms=0, last_ms=4, events=7, batch=0),
            outcome(b_root, "acked", init_ms=0, first_ms=0, last_ms=8, events=12, batch=1, task=2),
        ]
    )


def test_acking_self_anchor_twice(acker: Harness) -> None:
    """testAckingSelfAnchor: emit anchored to [t, t] makes two edges that XOR together."""
    root = 33
    a, x, y = ids(3)
    acker.batch(init(root, a, 0), ack(root, a ^ x ^ y, 1), ack(root, x ^ y, 2))
    acker.assert_outcomes(
        completed=[outcome(root, "acked", init_ms=0, first_ms=0, last_ms=2, events=3, batch=0)]
    )


def test_timeout_ack_every_other(acker: Harness) -> None:
    """testTimeout: a bolt acks tuples 1 and 3 and ignores 2, which times out."""
    r1, r2, r3 = 41, 42, 43
    e1, e2, e3 = ids(3)
    acker.batch(init(r1, e1, 0), ack(r1, e1, 1), init(r2, e2, 2), init(r3, e3, 3), ack(r3, e3, 4))
    acker.tick(2)
    assert acker.pending_ids() == {r2}, "2 is not failed before the timeout"
    acker.tick()
    acker.assert_outcomes(
        completed=[
            outcome(r1, "acked", init_ms=0, first_ms=0, last_ms=1, events=2, batch=0),
            outcome(r3, "acked", init_ms=3, first_ms=3, last_ms=4, events=2, batch=0),
        ],
        expired=[
            outcome(r2, "timeout", init_ms=2, first_ms=2, last_ms=2, events=1, batch=0, epoch=3)
        ],
    )


def test_fan_out_to_six_tasks_plus_capture(acker: Harness) -> None:
    """testMultiTasksPerCluster: one tuple to 6 tasks and a capturer; done once all 7 ack."""
    root = 55
    edges = ids(6)
    captured = ids(6)
    capture_edge = ids(1)[0]
    init_value = capture_edge
    for edge in edges:
        init_value ^= edge
    first = [init(root, init_value, 0), ack(root, capture_edge, 1)]
    first += [ack(root, e ^ c, 2) for e, c in zip(edges, captured, strict=True)]
    first += [ack(root, c, 3) for c in captured[:-1]]
    acker.batch(*first)
    assert acker.pending_ids() == {root}
    acker.batch(ack(root, captured[-1], 4))
    acker.assert_outcomes(
        completed=[outcome(root, "acked", init_ms=0, first_ms=0, last_ms=4, events=14, batch=1)]
    )


def test_hooks_last_bolt_acks_two_fails_two(acker: Harness) -> None:
    """testHooks: four trees; the last bolt acks 1 and 3 and fails 2 and 4."""
    roots = [61, 62, 63, 64]
    hooks = ids(4)
    caps = ids(4)
    events = []
    for root, h, cap in zip(roots, hooks, caps, strict=True):
        events += [init(root, h ^ cap, 0), ack(root, cap, 1)]
    events += [ack(61, hooks[0], 2), fail(62, 2), ack(63, hooks[2], 2), fail(64, 2)]
    acker.batch(*events)
    acker.assert_outcomes(
        completed=[
            outcome(61, "acked", init_ms=0, first_ms=0, last_ms=2, events=3, batch=0),
            outcome(63, "acked", init_ms=0, first_ms=0, last_ms=2, events=3, batch=0),
        ],
        failed=[
            outcome(62, "fail", init_ms=0, first_ms=0, last_ms=2, events=3, batch=0),
            outcome(64, "fail", init_ms=0, first_ms=0, last_ms=2, events=3, batch=0),
        ],
    )
