"""The simulator's edge log agrees with the events it generates: what the notebooks rely on to
say which tuples of a tree were never acked."""

from __future__ import annotations

from collections import defaultdict

import pytest

from pipelines.workload import WorkloadSpec, generate_edges, generate_workload
from tests.model import AckerModel

pytestmark = pytest.mark.fast

SPEC = WorkloadSpec(trees=800, batches=4, seed=11)


def _xor(values: object) -> int:
    result = 0
    for value in values:  # type: ignore[attr-defined]
        result ^= value
    return result


def test_a_trees_checksum_is_the_xor_of_its_unacked_edges() -> None:
    # Every edge id enters the checksum once when created and once when acked, so the distinct
    # init/ack/anchor values of a tree XOR to its failed edges. A lost Storm ack also never
    # reports the children it created, so a tree with a lost edge can only be said to be nonzero.
    values: dict[int, set[tuple[str, int]]] = defaultdict(set)
    for event in generate_workload(SPEC):
        if event.event_type in ("init", "ack", "anchor"):
            assert event.anchor_id is not None and event.xor_value is not None
            values[event.anchor_id].add((event.event_type, event.xor_value))
    edges = generate_edges(SPEC)
    assert {edge.anchor_id for edge in edges} == set(values)
    assert {edge.fate for edge in edges} == {"acked", "failed", "lost"}
    failed_edges: dict[int, list[int]] = defaultdict(list)
    with_lost_edge = {edge.anchor_id for edge in edges if edge.fate == "lost"}
    for edge in edges:
        if edge.fate == "failed":
            failed_edges[edge.anchor_id].append(edge.edge_id)
    checksums = {anchor: _xor(v for _, v in tree_values) for anchor, tree_values in values.items()}
    assert [
        anchor
        for anchor, checksum in checksums.items()
        if anchor not in with_lost_edge and checksum != _xor(failed_edges[anchor])
    ] == []
    assert [anchor for anchor in with_lost_edge if checksums[anchor] == 0] == []


def test_edge_fates_explain_the_outcomes() -> None:
    model = AckerModel()
    events = generate_workload(SPEC)
    for batch in range(SPEC.batches):
        model.batch(batch, [e for e in events if e.batch == batch])
        model.tick()
    model.tick(3)
    fates: dict[int, set[str]] = defaultdict(set)
    for edge in generate_edges(SPEC):
        fates[edge.anchor_id].add(edge.fate)
    completed = {o.anchor_id for o in model.outcomes["completed"]}
    failed = {o.anchor_id for o in model.outcomes["failed"]}
    timed_out = {o.anchor_id for o in model.outcomes["expired"] if o.reason == "timeout"}
    all_acked = {anchor for anchor, f in fates.items() if f == {"acked"}}
    assert all_acked <= completed
    assert failed <= {anchor for anchor, f in fates.items() if "failed" in f}
    assert timed_out <= {anchor for anchor, f in fates.items() if "lost" in f}
    assert timed_out and failed and all_acked
