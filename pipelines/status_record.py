"""The figures `acker status` last computed, kept beside the warehouse's tables (a local
folder's or an object store's: :mod:`pipelines.warehouse_files`) with the commit each table was
at, so that a status asked again before a table changes is read without starting Spark.

A record holds the newest commit file of every acker table (:func:`pipelines.tables.log_heads`).
It answers as long as each table's newest commit file is still the one recorded. The one change
it follows is an append to a table that `acker ingest` writes and status only counts: each new
commit file of such a table states the rows it added, so the record adds them up instead of
being dropped. Any other commit, and any table whose files it cannot read (a catalog's, a
remote Spark Connect server's), sends status back to the tables.
"""

from __future__ import annotations

import hashlib
import json
import time
from functools import cache
from typing import Any

from pipelines.config import Config
from pipelines.sql import TABLES, VIEWS, load_sql
from pipelines.tables import LogHeads, log_heads
from pipelines.warehouse_files import WarehouseFiles, commit_name, table_log, warehouse_files

__all__ = [
    "REFRESH_WINDOW_S",
    "current_heads",
    "has_status_record",
    "load_status_figures",
    "note_status_asked",
    "save_status_figures",
    "status_asked_within",
    "status_record_file",
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


def status_record_file(config: Config) -> str:
    """Where the status record of ``config``'s schema lives under the warehouse."""
    return f"_status/{config.warehouse.schema}.json"


def _asked_marker(config: Config) -> str:
    return f"_status/{config.warehouse.schema}.asked"


def note_status_asked(config: Config) -> None:
    """Note that ``config``'s status was asked now (where the warehouse keeps a record): the
    writers refresh the record for :data:`REFRESH_WINDOW_S` after. Where the warehouse cannot be
    written, nothing is noted."""
    files = warehouse_files(config)
    if files is not None:
        files.write_text(_asked_marker(config), "")


def status_asked_within(config: Config, seconds: float) -> bool:
    """Whether ``config``'s status was asked in the last ``seconds``."""
    files = warehouse_files(config)
    try:
        asked = None if files is None else files.stamp(_asked_marker(config))
    except OSError:
        return False
    return asked is not None and time.time() - asked[1] / 1e9 <= seconds


@cache
def _figures_definition() -> str:
    """A digest of the SQL that computes status: a record another version of it wrote is not
    read."""
    names = ["summarize_status", "read_position", *VIEWS.values()]
    return hashlib.sha256("\n".join(load_sql(name) for name in names).encode()).hexdigest()


def current_heads(config: Config) -> LogHeads | None:
    """Every acker table's newest commit file, or ``None`` where status cannot be recorded."""
    return log_heads(config, TABLES)


def has_status_record(config: Config) -> bool:
    """Whether a status record of ``config``'s schema is there, current or not."""
    files = warehouse_files(config)
    try:
        return files is not None and files.stamp(status_record_file(config)) is not None
    except OSError:
        return False


def save_status_figures(config: Config, heads: LogHeads, figures: dict[str, Any]) -> None:
    """Record ``figures``, computed from the tables at ``heads`` (taken before they were read:
    a commit during the read makes the record out of date at once, never wrong). Where the
    warehouse cannot be written (a reader's read-only mount) nothing is recorded, and status
    keeps reading the tables."""
    files = warehouse_files(config)
    if files is None:
        return
    record = {
        "definition": _figures_definition(),
        "heads": dict(zip(TABLES, heads, strict=True)),
        "figures": figures,
    }
    files.write_text(status_record_file(config), json.dumps(record))


def load_status_figures(config: Config) -> dict[str, Any] | None:
    """The recorded figures brought up to the tables' current commits (probed from the ones
    recorded), or ``None`` where only the tables can tell them."""
    files = warehouse_files(config)
    if files is None:
        return None
    try:
        record = json.loads(files.read_text(status_record_file(config)) or "null")
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("definition") != _figures_definition():
        return None
    recorded_heads = [tuple(record["heads"].get(table) or ()) for table in TABLES]
    heads = log_heads(config, TABLES, recorded_heads)
    if heads is None:
        return None
    figures = dict(record["figures"])
    try:
        for table, recorded, head in zip(TABLES, recorded_heads, heads, strict=True):
            if recorded == head:
                continue
            appended = (
                _rows_appended(files, config, table, recorded, head)
                if table in _COUNTED_APPENDS
                else None
            )
            if appended is None:
                return None
            figures[_COUNTED_APPENDS[table]] += appended
    except OSError:
        return None
    return figures


def _rows_appended(
    files: WarehouseFiles,
    config: Config,
    table: str,
    recorded: tuple[Any, ...],
    head: tuple[str, int, int],
) -> int | None:
    """The rows the commits of ``table`` after the recorded one added, if each of them only
    appended files (the recorded commit file still in place); else ``None``."""
    log = table_log(config, table)
    if len(recorded) != 3:
        return None
    name, size, mtime_ns = recorded
    if files.stamp(f"{log}/{name}") != (size, mtime_ns):
        return None
    rows = 0
    for version in range(int(name[:20]) + 1, int(head[0][:20]) + 1):
        text = files.read_text(f"{log}/{commit_name(version)}")
        if text is None:
            return None
        for line in filter(None, text.splitlines()):
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
