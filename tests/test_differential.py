"""The pipeline against an independent model, on simulated workloads of a few hundred trees:
fan-out, depth, multi-anchoring, fails, lost acks, duplicates, late inits, both protocols."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality

from pipelines import engine
from pipelines.workload import WorkloadSpec, generate_workload
from tests.acker_harness import Harness
from tests.model import AckerModel


# Each setting's values are taken at least once; two workloads rather than one per setting,
# since each costs about two minutes of the suite.
@pytest.mark.parametrize(
    ("seed", "settings", "broadcast_merge"),
    [
        (1, {"buckets": 3, "refresh": "reset", "max_pending": 30}, True),
        # batches too large to broadcast into the MERGE take its shuffled join instead
        (2, {"buckets": 2, "refresh": "activity", "protocol": "fsshelter"}, False),
    ],
)
def test_pipeline_equals_model(  # type: ignore[no-untyped-def]
    acker_factory, monkeypatch, seed: int, settings: dict[str, object], broadcast_merge: bool
) -> None:
    if not broadcast_merge:
        monkeypatch.setattr(engine, "BROADCAST_MERGE_ROWS", 0)
    acker: Harness = acker_factory(**settings)
    model = AckerModel(**settings)  # type: ignore[arg-type]
    spec = WorkloadSpec(trees=300, batches=4, seed=seed)
    events = generate_workload(spec)
    for batch in range(spec.batches):
        chunk = [e for e in events if e.batch == batch]
        acker.batch(*chunk)
        model.batch(batch, chunk)
        acker.tick()
        model.tick()
    acker.tick(3)
    model.tick(3)

    acker.assert_outcomes(**model.outcomes)
    late = acker.table("late_events").select("anchor_id", "event_type", "xor_value", "outcome")
    expected_late = acker.spark.createDataFrame(
        [(e.anchor_id, e.event_type, e.xor_value, kind) for e, kind in model.late], late.schema
    )
    assert_df_equality(
        late, expected_late, ignore_row_order=True, ignore_nullable=True, ignore_metadata=True
    )
    assert acker.pending_ids() == set(model.pending)
    totals = acker.table("batches").agg({"duplicates": "sum", "events_in": "sum"}).first()
    assert totals is not None
    assert totals["sum(duplicates)"] == model.duplicates
    assert totals["sum(events_in)"] == len(events)
    assert all(model.outcomes[name] for name in ("completed", "failed", "expired"))
    if "max_pending" in settings:
        assert any(o.reason == "overflow" for o in model.outcomes["failed"]), "guard never fired"
