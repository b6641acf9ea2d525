"""The figures `acker status` last computed, kept beside a local warehouse's tables with the
commit each table was at, so that a status asked again before a table changes is read without
starting Spark.

A record holds the newest commit file of every acker table (:func:`pipelines.tables.log_heads`).
It answers as long as each table's newest commit file is still the one recorded. The one change
it follows is an append to a table that `acker ingest` writes and status only counts: each new
commit file of such a table states the rows it added, so the record adds them up instead of
being dropped. Any other commit, and any table it cannot read as a local folder (a catalog's,
a remote Spark Connect server's), sends status back to the tables.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from functools import cache
from pathlib import Path
from typing import Any

from pipelines.config import Config
from pipelines.sql import TABLES, VIEWS, load_sql
from pipelines.tables import LogHeads, log_heads, table_location

__all__ = [
    "REFRESH_WINDOW_S",
    "current_heads",
    "load_status_figures",
    "note_status_asked",
    "replace_record",
    "save_status_figures",
    "status_asked_within",
    "status_record_path",
]

# How long after a status was asked the writers keep refreshing the record: a refresh is a
# status in the writer's session (about 20 s of a 50 s `acker tick` in a new process, 28 Nov),
# worth paying while someone reads the answers, not on every scheduled run of a warehouse
# nobody watches.
REFRESH_WINDOW_S = 3600.0

# Tables that `acker ingest` appends to, each with the status figure that counts its rows and
# nothing else in status reads.
_COUNTED_APPENDS = {"ack_events": "events", "quarantine": "quarantined"}
# What a plain append's commit file holds besides the files it adds.
_APPEND_BOOKKEEPING = {"commitInfo", "txn"}


def status_record_path(config: Config) -> Path:
    """Where the status record of ``config``'s schema lives: beside its stream checkpoints."""
    return config.warehouse_path / "_status" / f"{config.warehouse.schema}.json"


def _asked_marker(config: Config) -> Path:
    return status_record_path(config).with_suffix(".asked")


def note_status_asked(config: Config) -> None:
    """Note that ``config``'s status was asked now (of a local warehouse, which keeps a record):
    the writers refresh the record for :data:`REFRESH_WINDOW_S` after. Where the folder cannot
    be written, nothing is noted."""
    marker = _asked_marker(config)
    with contextlib.suppress(OSError):
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()


def status_asked_within(config: Config, seconds: float) -> bool:
    """Whether ``config``'s status was asked in the last ``seconds``."""
    try:
        asked = _asked_marker(config).stat().st_mtime
    except OSError:
        return False
    return time.time() - asked <= seconds


@cache
def _figures_definition() -> str:
    """A digest of the SQL that computes status: a record another version of it wrote is not
    read."""
    names = ["summarize_status", "read_position", *VIEWS.values()]
    return hashlib.sha256("\n".join(load_sql(name) for name in names).encode()).hexdigest()


def current_heads(config: Config) -> LogHeads | None:
    """Every acker table's newest commit file, or ``None`` where status cannot be recorded."""
    return log_heads(config, TABLES)


def save_status_figures(config: Config, heads: LogHeads, figures: dict[str, Any]) -> None:
    """Record ``figures``, computed from the tables at ``heads`` (taken before they were read:
    a commit during the read makes the record out of date at once, never wrong). Where the
    warehouse folder cannot be written (a reader's read-only mount) nothing is recorded, and
    status keeps reading the tables."""
    path = status_record_path(config)
    record = {
        "definition": _figures_definition(),
        "heads": dict(zip(TABLES, heads, strict=True)),
        "figures": figures,
    }
    replace_record(path, record)


def replace_record(path: Path, record: dict[str, Any]) -> None:
    """Write ``record`` as JSON to ``path`` in one step (a reader sees the old file or the new
    one); where the folder cannot be written, write nothing."""
    written = path.with_name(f".{path.name}.{os.getpid()}")
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        written.write_text(json.dumps(record))
        os.replace(written, path)


def load_status_figures(config: Config, heads: LogHeads | None = None) -> dict[str, Any] | None:
    """The recorded figures brought up to the tables' current commits (``heads``, where the
    caller has just listed them), or ``None`` where only the tables can tell them."""
    if heads is None:
        heads = current_heads(config)
    if heads is None:
        return None
    try:
        record = json.loads(status_record_path(config).read_text())
    except (OSError, ValueError):
        return None
    if record.get("definition") != _figures_definition():
        return None
    figures = dict(record["figures"])
    for table, head in zip(TABLES, heads, strict=True):
        recorded = tuple(record["heads"].get(table) or ())
        if recorded == head:
            continue
        appended = (
            _rows_appended(config, table, recorded, head) if table in _COUNTED_APPENDS else None
        )
        if appended is None:
            return None
        figures[_COUNTED_APPENDS[table]] += appended
    return figures


def _rows_appended(
    config: Config, table: str, recorded: tuple[Any, ...], head: tuple[str, int, int]
) -> int | None:
    """The rows the commits of ``table`` after the recorded one added, if each of them only
    appended files (the recorded commit file still in place); else ``None``."""
    log = table_location(config, table) / "_delta_log"
    if len(recorded) != 3:
        return None
    name, inode, mtime_ns = recorded
    try:
        kept = (log / name).stat()
    except FileNotFoundError:
        return None
    if (kept.st_ino, kept.st_mtime_ns) != (inode, mtime_ns):
        return None
    rows = 0
    for version in range(int(name[:20]) + 1, int(head[0][:20]) + 1):
        try:
            lines = (log / f"{version:020d}.json").read_text().splitlines()
        except FileNotFoundError:
            return None
        for line in filter(None, lines):
            ((kind, action),) = json.loads(line).items()
            if kind in _APPEND_BOOKKEEPING:
                continue
            if kind != "add" or not action.get("dataChange") or action.get("deletionVector"):
                return None
            stats = json.loads(action.get("stats") or "{}")
            if "numRecords" not in stats:
                return None
            rows += int(stats["numRecords"])
    return rows
