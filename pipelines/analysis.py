"""What the notebooks call: open a warehouse, read a view as pandas, explain one tree's outcome.

The notebooks stay thin: the queries are the views in ``acker_sql/``, the session comes from
:func:`pipelines.session.build_session`, and the reasoning about one tree lives here, where a
test checks it.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import SparkSession

from pipelines.config import Config, load_config
from pipelines.jobs import open_tables
from pipelines.session import build_session
from pipelines.sql import sql_with_args
from pipelines.workload import Edge

__all__ = ["TreeStory", "explain_tree", "open_warehouse", "read_view", "tree_story"]

# PySpark 4.2 warns on every toPandas under pandas 3; the pinned pair is tested together, and the
# warning would otherwise follow every table a notebook shows.
warnings.filterwarnings(
    "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
)


def open_warehouse(
    warehouse: str | Path, conf: str | Path | None = None
) -> tuple[SparkSession, Config]:
    """A session on an initialised warehouse, with its tables and views attached.

    Example: ``spark, config = open_warehouse("warehouse")``.
    """
    config = load_config(conf, warehouse=warehouse)
    spark = build_session(config)
    open_tables(spark, config)
    return spark, config


def read_view(spark: SparkSession, query: str, **params: Any) -> pd.DataFrame:
    """A query over the acker's tables and views as a pandas DataFrame; values bound by name.

    Example: ``read_view(spark, "select * from tree_events where anchor_id = :a", a=42)``.
    """
    return sql_with_args(spark, query, params).toPandas()


@dataclass(frozen=True)
class TreeStory:
    """One tree as an investigator sees it: its events, its outcome and the edges never acked."""

    anchor_id: int
    events: pd.DataFrame
    outcome: str | None
    reason: str | None
    unacked_edges: pd.DataFrame | None
    explanation: str


def tree_story(
    spark: SparkSession, anchor_id: int, edges: Sequence[Edge] | None = None
) -> TreeStory:
    """The events of one tree (the ``tree_events`` view), its outcome, and, when the simulator's
    ``edges`` are given, the tuples that were never acked; with a sentence saying why it
    resolved as it did."""
    events = read_view(
        spark,
        "select * from tree_events where anchor_id = :anchor order by event_seq",
        anchor=anchor_id,
    )
    outcome = read_view(
        spark,
        "select outcome, reason from outcomes where anchor_id = :anchor order by resolved_at",
        anchor=anchor_id,
    )
    resolved = outcome.iloc[-1] if len(outcome) else None
    reason = None if resolved is None else resolved["reason"]
    tree_edges = [edge for edge in edges or [] if edge.anchor_id == anchor_id]
    unacked = None  # unknown, unless the simulator generated this tree
    if tree_edges:
        unacked = pd.DataFrame(
            [vars(edge) for edge in tree_edges if edge.fate != "acked"],
            columns=["anchor_id", "edge_id", "emitted_by", "processed_by", "fate"],
        )
    return TreeStory(
        anchor_id=anchor_id,
        events=events,
        outcome=None if resolved is None else resolved["outcome"],
        reason=reason,
        unacked_edges=unacked,
        explanation=explain_tree(events, reason, unacked),
    )


def explain_tree(events: pd.DataFrame, reason: str | None, unacked: pd.DataFrame | None) -> str:
    """Why a tree resolved as it did, from its ``tree_events`` rows and its outcome reason."""
    if events.empty:
        return "no valid event of this tree is in ack_events"
    last = events.iloc[-1]
    checksum = int(last["running_checksum"]) & 0xFFFF_FFFF_FFFF_FFFF  # shown unsigned, as hex
    redelivered = int(events["is_redelivery"].sum())
    noted = f"; {_counted(redelivered, 're-delivered event')} dropped" if redelivered else ""
    unacked_note = ""
    if unacked is not None and len(unacked):
        where = ", ".join(sorted(set(unacked["processed_by"])))
        kinds = ", ".join(sorted(set(unacked["fate"])))
        unacked_note = f"; {_counted(len(unacked), 'tuple')} never acked ({kinds}, at {where})"
    if reason is None:
        return (
            f"still pending: checksum {checksum:#x} after {_counted(len(events), 'event')}{noted}"
        )
    if reason == "acked":
        return f"completed: every tuple was acked, the checksum reached 0{noted}"
    if reason == "fail":
        fails = events[events["event_type"] == "fail"]
        first = fails.iloc[0] if len(fails) else last
        return (
            f"failed: {first['component']} sent a fail at {first['event_time']}; a fail wins "
            f"whatever the checksum{unacked_note}{noted}"
        )
    if reason == "overflow":
        return "failed: the capacity guard refused it, pending was full (max_pending)"
    if reason == "no_init":
        waited = _counted(len(events), "event")
        return f"expired: its init never arrived; {waited} waited for it{noted}"
    return (
        f"expired: the checksum was still {checksum:#x} when it timed out, so some tuple was "
        f"never acked{unacked_note}; last event at {last['event_time']}{noted}"
    )


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
