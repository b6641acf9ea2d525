"""explain_tree's sentence for each way a tree resolves, from tree_events-shaped rows."""

from __future__ import annotations

import pandas as pd
import pytest

from pipelines.analysis import explain_tree
from tests.acker_harness import at

EVENT_COLUMNS = ["event_seq", "event_time", "event_type", "component", "is_redelivery"]


def events(*rows: tuple[str, str, bool, int]) -> pd.DataFrame:
    """(event_type, component, is_redelivery, running_checksum) rows, 10 ms apart."""
    return pd.DataFrame(
        [
            (seq, at(10 * seq), kind, component, redelivery, checksum)
            for seq, (kind, component, redelivery, checksum) in enumerate(rows, start=1)
        ],
        columns=[*EVENT_COLUMNS, "running_checksum"],
    )


LOST = pd.DataFrame(
    [(7, 99, "spout", "bolt-1", "lost"), (7, 98, "bolt-1", "bolt-2", "lost")],
    columns=["anchor_id", "edge_id", "emitted_by", "processed_by", "fate"],
)


@pytest.mark.parametrize(
    ("tree", "reason", "unacked", "sentence"),
    [
        (
            events(("init", "spout", False, 5), ("ack", "bolt-1", False, 0)),
            "acked",
            None,
            "completed: every tuple was acked, the checksum reached 0",
        ),
        (
            events(("init", "spout", False, 5), ("ack", "b", False, 4), ("ack", "b", True, 4)),
            None,
            None,
            "still pending: checksum 0x4 after 3 events; 1 re-delivered event dropped",
        ),
        (
            events(("init", "spout", False, 5), ("fail", "bolt-2", False, 5)),
            "fail",
            None,
            "failed: bolt-2 sent a fail at 2026-03-01 12:00:00.020000; a fail wins whatever "
            "the checksum",
        ),
        (
            events(("init", "spout", False, -1)),
            "timeout",
            LOST,
            "expired: the checksum was still 0xffffffffffffffff when it timed out, so some "
            "tuple was never acked; 2 tuples never acked (lost, at bolt-1, bolt-2); last event "
            "at 2026-03-01 12:00:00.010000",
        ),
        (
            events(("ack", "bolt-1", False, 3)),
            "no_init",
            None,
            "expired: its init never arrived; 1 event waited for it",
        ),
        (
            events(("init", "spout", False, 3)),
            "overflow",
            None,
            "failed: the capacity guard refused it, pending was full (max_pending)",
        ),
        (events(), "acked", None, "no valid event of this tree is in ack_events"),
    ],
)
def test_explain_tree(
    tree: pd.DataFrame, reason: str | None, unacked: pd.DataFrame | None, sentence: str
) -> None:
    assert explain_tree(tree, reason, unacked) == sentence
