"""Storm itself as the oracle: build the task hook (clients/storm-hook), run the conformance
topology in Storm's LocalCluster with it, read what it wrote, and say what Storm decided.

A capture is a folder: the hook's ``ack-events-*.jsonl`` (what each acker task executed, in
order), its ``_acker-log-*.jsonl`` (each acker tick, with how many rows the task had written
before it, and each verdict the acker sent a spout) and the spout's ``_spout-verdicts-*.jsonl``
(its ``ack`` and ``fail`` callbacks). The recorded captures in ``tests/data/storm`` were made by
``python -m tests.storm_conformance record``.

The replay is tick-exact: the rows each acker task executed between its k-th and k+1-th tick
are micro-batch k, and each tick is one ``acker tick`` under the manual clock. Storm's verdict
on a message is its spout's: ``ack`` is ``completed``; ``fail`` is ``failed`` when the acker had
sent the spout a fail for the tree before it, else ``timeout`` (the spout's own pending map
expired it). Storm's acker's own verdict: the ack or fail it sent the spout, else ``timeout``
(it dropped the entry).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pipelines.workload import Event

ROOT = Path(__file__).resolve().parent.parent
HOOK_MODULE = ROOT / "clients" / "storm-hook"
RECORDED = ROOT / "tests" / "data" / "storm"
TOPOLOGY = "org.batchacker.storm.ConformanceTopology"

# The recorded captures: scenario -> (messages, seconds of emitting, message timeout, seed).
SCENARIOS: dict[str, tuple[int, int, int, int]] = {
    "chain": (240, 8, 3, 11),
    "fail": (240, 8, 3, 12),
    "timeout": (240, 8, 3, 13),
    "reset": (240, 8, 3, 14),
    "slow": (240, 8, 3, 16),
    "parallel": (300, 8, 3, 15),
}

# How the acker mirrors Storm for the comparison: Storm 2.x renews an entry on reset and fail; a
# spout's pending map has 2 buckets and decides the timeout its spout is told of, while the
# acker's own map has 3 (the acker's default).
STORM_SPOUT_SETTINGS = {"buckets": 2, "refresh": "reset"}
STORM_ACKER_SETTINGS = {"buckets": 3, "refresh": "reset"}


def build_hook() -> str:
    """Build the hook and the conformance topology (``./dev hook``: Maven, downloads cached in
    ``.cache/m2``); return the classpath that runs the topology."""
    subprocess.run([str(ROOT / "dev"), "hook"], check=True)
    return (HOOK_MODULE / "target" / "run-classpath.txt").read_text().strip()


def run_topology(
    classpath: str,
    scenario: str,
    folder: Path,
    messages: int,
    emit_seconds: int,
    timeout_s: int,
    seed: int,
) -> None:
    """Run the conformance topology in LocalCluster until every message has its verdict."""
    folder.mkdir(parents=True, exist_ok=True)
    args = [scenario, str(folder), str(messages), str(emit_seconds), str(timeout_s), str(seed)]
    with (folder.parent / f"{folder.name}-storm.log").open("wb") as log:
        subprocess.run(
            ["java", "-cp", classpath, TOPOLOGY, *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            check=True,
            timeout=emit_seconds + 4 * timeout_s + 120,
        )


@dataclass(frozen=True)
class Row:
    """One ``ack_events`` row the hook wrote: its acker task and place in that task's order."""

    acker_task: int
    sequence: int
    fields: dict[str, object]


@dataclass(frozen=True)
class Capture:
    rows: list[Row]
    ticks: dict[int, list[int]]  # acker task -> rows it had written before each of its ticks
    acker_failed: dict[int, datetime]  # root id -> when the acker first sent its spout a fail
    acker_acked: set[int]  # root ids the acker sent their spout an ack for
    spout: dict[str, tuple[str, datetime]]  # message id -> (acked | failed, when)


def _lines(folder: Path, pattern: str) -> list[dict[str, object]]:
    rows = []
    for path in sorted(folder.glob(pattern)):
        rows += [json.loads(line) for line in path.read_text().splitlines()]
    return rows


def _time(text: object) -> datetime:
    return datetime.fromisoformat(str(text))


def read_capture(folder: Path) -> Capture:
    """Read the files a capture's hook and spout wrote; leftover hidden files mean a worker
    stopped without closing its files, which a capture must not have."""
    assert not list(folder.glob(".*")), f"{folder}: files the hook did not close"
    rows = []
    for fields in _lines(folder, "ack-events-*.jsonl"):
        task, sequence = str(fields["event_id"]).split("-")
        rows.append(Row(int(task), int(sequence), fields))
    ticks: dict[int, list[int]] = {}
    acker_failed: dict[int, datetime] = {}
    acker_acked: set[int] = set()
    for entry in _lines(folder, "_acker-log-*.jsonl"):
        if entry["kind"] == "tick":
            task = int(str(entry["acker_task"]))
            ticks.setdefault(task, []).append(int(str(entry["events_before"])))
        elif entry["kind"] == "failed":
            acker_failed.setdefault(int(str(entry["anchor_id"])), _time(entry["at"]))
        elif entry["kind"] == "acked":
            acker_acked.add(int(str(entry["anchor_id"])))
    spout = {}
    for entry in _lines(folder, "_spout-verdicts-*.jsonl"):
        at = datetime.fromtimestamp(int(str(entry["at_ms"])) / 1000, UTC).replace(tzinfo=None)
        spout.setdefault(str(entry["msg_id"]), (str(entry["verdict"]), at))
    return Capture(rows, ticks, acker_failed, acker_acked, spout)


def micro_batches(capture: Capture) -> list[list[Row]]:
    """Batch k holds what each acker task executed after its k-th tick and up to its k+1-th;
    the last one what came after the last tick. There is one tick between batches."""
    count = 1 + max((len(t) for t in capture.ticks.values()), default=0)
    batches: list[list[Row]] = [[] for _ in range(count)]
    for row in capture.rows:
        before = capture.ticks.get(row.acker_task, [])
        batches[sum(1 for limit in before if row.sequence > limit)].append(row)
    return batches


def _roots(capture: Capture) -> dict[str, int]:
    return {
        str(row.fields["source_msg_id"]): int(str(row.fields["anchor_id"]))
        for row in capture.rows
        if row.fields["event_type"] == "init"
    }


def storm_verdicts(capture: Capture) -> dict[str, str]:
    """Each spout message's verdict: completed, failed or timeout (see the module doc), but
    for a message its spout timed out and its acker then completed: the spout's ticks come from
    its own timer, which no hook sees, so whether the replay's tick (the acker's) comes before
    the completion or after it cannot be told."""
    roots = _roots(capture)
    verdicts = {}
    for message, (callback, at) in capture.spout.items():
        if callback == "acked":
            verdicts[message] = "completed"
        elif roots.get(message) in capture.acker_acked:
            continue
        else:
            sent = capture.acker_failed.get(roots.get(message, 0))
            verdicts[message] = "failed" if sent is not None and sent <= at else "timeout"
    return verdicts


def storm_acker_verdicts(capture: Capture) -> dict[str, str]:
    """What Storm's acker itself decided on each tree: completed or failed when it sent the
    spout an ack or a fail, else timeout (its three buckets dropped the entry, silently)."""
    verdicts = {}
    for message, root in _roots(capture).items():
        if root in capture.acker_acked:
            verdicts[message] = "completed"
        else:
            verdicts[message] = "failed" if root in capture.acker_failed else "timeout"
    return verdicts


def side_by_side(captures: dict[str, Capture]) -> list[list[dict[str, object]]]:
    """The micro-batches of several captures replayed as one: batch k holds every capture's
    batch k, each message id prefixed with its capture's name (``chain/m4-0``). Trees of two
    captures never meet (root ids are random 64-bit values), so each sees its own batches and
    ticks, and the captures share one acker's micro-batches and ticks."""
    merged: list[list[dict[str, object]]] = []
    for name, capture in captures.items():
        for number, batch in enumerate(micro_batches(capture)):
            if number == len(merged):
                merged.append([])
            for row in batch:
                fields = dict(row.fields)
                if fields.get("source_msg_id") is not None:
                    fields["source_msg_id"] = f"{name}/{fields['source_msg_id']}"
                merged[number].append(fields)
    return merged


def as_event(fields: dict[str, object]) -> Event:
    """A row the hook wrote, as the event ``acker ingest`` would append for it."""
    return Event(
        anchor_id=int(str(fields["anchor_id"])),
        event_type=str(fields["event_type"]),
        xor_value=int(str(fields["xor_value"])) if "xor_value" in fields else None,
        spout_task=int(str(fields["spout_task"])) if "spout_task" in fields else None,
        source_msg_id=str(fields["source_msg_id"]) if "source_msg_id" in fields else None,
        component=str(fields["component"]),
        event_time=_time(fields["event_time"]),
        event_id=str(fields["event_id"]),
    )


def record(names: list[str]) -> None:
    """Run each scenario's topology afresh and keep its files as the recorded capture."""
    classpath = build_hook()
    for name in names:
        messages, emit_seconds, timeout_s, seed = SCENARIOS[name]
        folder = RECORDED / name
        shutil.rmtree(folder, ignore_errors=True)
        run_topology(classpath, name, folder, messages, emit_seconds, timeout_s, seed)
        (RECORDED / f"{name}-storm.log").unlink()
        print(f"{name}: {len(read_capture(folder).rows)} rows", file=sys.stderr)


if __name__ == "__main__" and sys.argv[1:2] == ["record"]:
    record(sys.argv[2:] or list(SCENARIOS))
