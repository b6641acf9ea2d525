"""Where the last ``acker run`` or ``acker tick`` left a local warehouse, kept beside its stream
checkpoint, so that a scheduled run with nothing to do ends without starting Spark, and the
next run or tick with work starts from the recorded position instead of reading it from nine
tables (a new process pays 1-3 s for each table it reads first).

A run has nothing to do when no event arrived since its stream last read ``ack_events`` (the
stream checkpoint's last committed offset lies past the table's newest commit), no other writer
changed the acker's own tables since that run ended (their newest commit files are the ones
recorded), the settings are the same, and, under the processing_time clock, no tick is due yet.
Any doubt (no record, a batch the stream started and did not commit, a catalog's tables, a
remote Spark Connect server) sends the run to Spark as usual.

``acker run --ingest PATH`` has nothing to do when, besides, every file at ``PATH`` is one the
last such run found in ``ack_events``: the record keeps each file's path, size and modification
time (not its digest, which would read every file of the landing folder each time), so a file
that is new or changed sends the run to Spark, whose ingest decides by digest.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from pipelines.clock import owed_ticks
from pipelines.config import Config
from pipelines.engine import EpochScale, Position
from pipelines.errors import UnreadableInput
from pipelines.ingest import input_files
from pipelines.object_store import is_object_store_path
from pipelines.sql import TABLES
from pipelines.status_record import replace_record
from pipelines.tables import COMMIT_FILE, local_log, log_heads

__all__ = [
    "FileKey",
    "file_keys",
    "nothing_to_run",
    "run_record_path",
    "save_run_record",
    "take_recorded_position",
    "unread_events",
    "unread_files",
]

FileKey = tuple[str, int, int]
"""A file's absolute path, size in bytes and modification time in nanoseconds."""


def file_keys(paths: Sequence[str | Path]) -> list[FileKey] | None:
    """The key of every file ingest reads at ``paths``; ``None`` where a path is missing or
    unreadable (ingest then says why), or on an object store (listing it is ingest's work)."""
    if any(map(is_object_store_path, paths)):
        return None
    try:
        found = [file.local for file in input_files(paths) if file.local is not None]
        stats = [(path.resolve(), path.stat()) for path in found]
    except (OSError, UnreadableInput):
        return None
    return [(str(path), stat.st_size, stat.st_mtime_ns) for path, stat in stats]


# A Delta checkpoint of the log: the commits before it may since have been cleaned up.
_CHECKPOINT_FILE = re.compile(r"\d{20}\.checkpoint(\.\d+\.\d+)?\.parquet")

# What a run must read of ack_events is told by the stream's offset of it. Every other table,
# quarantine too (a micro-batch may have written its rows and no others when it stopped), must
# be as the last run or tick left it.
_INGESTED = ("ack_events",)
_RUN_TABLES = tuple(table for table in TABLES if table not in _INGESTED)


def run_record_path(config: Config) -> Path:
    """Where the run record of ``config``'s schema lives: beside its stream checkpoint."""
    return config.checkpoint_path.with_name("last-run.json")


def _settings_digest(config: Config) -> str:
    """The settings a run's work depends on: a record written under others is not read."""
    settings = {"acker": asdict(config.acker), "warehouse": asdict(config.warehouse)}
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def save_run_record(
    config: Config,
    position: Position,
    scale: EpochScale | None,
    ingested: Sequence[FileKey] = (),
) -> None:
    """Record, at the end of a run or tick (holding the writer lock), the acker's tables as it
    left them, its position, under processing_time the clock's grid, and the files ``ingested``
    (keys taken before the ingest). Nothing is recorded where the tables are not local folders
    or the warehouse cannot be written."""
    heads = log_heads(config, _RUN_TABLES)
    if heads is None:
        return
    path = run_record_path(config)
    record: dict[str, Any] = {
        "settings": _settings_digest(config),
        "heads": [list(head) for head in heads],
        "epoch": position.epoch,
        "last_batch_id": position.last_batch_id,
        "scale": None if scale is None else [scale.origin_us, scale.interval_us],
        "ingested": [list(key) for key in ingested],
    }
    replace_record(path, record)


def _current_record(config: Config) -> dict[str, Any] | None:
    """The record, if it was written under these settings and no writer has committed to
    the acker's tables since, but appends to ``ack_events``."""
    if not config.warehouse_is_local:
        return None
    try:
        record: dict[str, Any] = json.loads(run_record_path(config).read_text())
    except (OSError, ValueError):
        return None
    if record.get("settings") != _settings_digest(config):
        return None
    heads = log_heads(config, _RUN_TABLES)
    if heads is None or [list(head) for head in heads] != record["heads"]:
        return None
    return record


def take_recorded_position(config: Config) -> Position | None:
    """Where the last run or tick left the acker, if nothing but appends to ``ack_events``
    were committed since; the
    record is removed as it is taken (holding the writer lock), so a run or tick that stops
    half-way, whose tables may hold rows it did not commit, leaves none."""
    if not config.warehouse_is_local:
        return None
    record = _current_record(config)
    with contextlib.suppress(OSError):
        run_record_path(config).unlink(missing_ok=True)
    if record is None:
        return None
    return Position(
        epoch=record["epoch"],
        last_batch_id=record["last_batch_id"],
        started_batch_id=None,
        unfinished_tick=None,
    )


def nothing_to_run(
    config: Config, now: datetime | None = None, landed: Sequence[FileKey] | None = ()
) -> bool:
    """Whether ``acker run`` (``acker run --ingest`` of the files whose :func:`file_keys` are
    ``landed``; ``None`` where a path is unreadable) would find nothing to ingest or apply and
    no tick to make (``now`` in UTC), from files alone; ``False`` wherever that is not
    certain."""
    record = _current_record(config)
    if record is None or landed is None:
        return False
    recorded = {tuple(key) for key in record.get("ingested", [])}
    if not set(landed) <= recorded:
        return False
    if not _stream_has_read_all(config):
        return False
    scale = record["scale"]
    return scale is None or owed_ticks(record["epoch"], EpochScale(*scale), now) == 0


def _stream_has_read_all(config: Config) -> bool:
    """Whether the stream's last committed offset of ``ack_events`` lies past the table's
    newest commit, with no batch started after it."""
    checkpoint = config.checkpoint_path
    try:
        offsets = [int(name) for name in os.listdir(checkpoint / "offsets") if name.isdigit()]
        commits = [int(name) for name in os.listdir(checkpoint / "commits") if name.isdigit()]
    except FileNotFoundError:
        return False
    if not offsets or max(offsets) != max(commits, default=None):
        return False
    offset = _last_offset(checkpoint, max(offsets))
    heads = log_heads(config, _INGESTED)
    return (
        heads is not None
        and offset is not None
        and offset.get("index") == -1
        and isinstance(offset.get("reservoirVersion"), int)
        and int(heads[0][0][:20]) < offset["reservoirVersion"]
    )


def _last_offset(checkpoint: Path, batch: int) -> dict[str, Any] | None:
    """The stream's offset of ``ack_events`` for micro-batch ``batch`` (its checkpoint file's
    third line), or ``None`` if the file is not one."""
    lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
    try:
        offset = json.loads(lines[2])
    except (IndexError, ValueError):
        return None
    return offset if isinstance(offset, dict) else None


def unread_events(config: Config) -> int | None:
    """About how many events of ``ack_events`` the stream has not read: the rows its Delta log
    records as added by the commits from the stream's last offset on (all of them before its
    first run), from the files' statistics; ``None`` where the log is not a local folder, or
    does not say (a commit without statistics, or a first run on a log whose oldest commits a
    checkpoint replaced)."""
    commits = _unread_commits(config)
    if commits is None:
        return None
    total = 0
    for commit in commits:
        rows = _rows_added(commit)
        if rows is None:
            return None
        total += rows
    return total


def unread_files(config: Config) -> int | None:
    """At least how many files of ``ack_events`` the stream has not read, as for
    :func:`unread_events` (files a stream reads: those its commits add as new data); ``None``
    where that cannot be told from the log (not a local folder, or a first run on a log whose
    oldest commits a checkpoint replaced)."""
    commits = _unread_commits(config, whole=True)
    if commits is None:
        return None
    return sum(len(_added(commit)) for commit in commits)


def _unread_commits(config: Config, whole: bool = False) -> list[Path] | None:
    """The commit files of ``ack_events`` from the stream's last offset on (a first run's: all
    of them), or ``None`` where the log is not a local folder this process reads, or may lack
    early commits a first run reads (a checkpoint replaced them). If ``whole``, from the last
    offset the stream committed, so that a batch it started and will read again counts too."""
    log = local_log(config, "ack_events")
    if log is None:
        return None
    checkpoint = config.checkpoint_path
    first_unread: int | None = None
    with contextlib.suppress(FileNotFoundError):
        started = [
            int(name)
            for name in os.listdir(checkpoint / ("commits" if whole else "offsets"))
            if name.isdigit()
        ]
        if started:
            offset = _last_offset(checkpoint, max(started))
            version = None if offset is None else offset.get("reservoirVersion")
            first_unread = version if isinstance(version, int) else 0
    try:
        names = os.listdir(log)
    except FileNotFoundError:
        return None
    if first_unread is None and any(map(_CHECKPOINT_FILE.fullmatch, names)):
        return None
    return [
        log / name
        for name in names
        if COMMIT_FILE.fullmatch(name) and int(name[:20]) >= (first_unread or 0)
    ]


def _added(commit: Path) -> list[dict[str, Any]]:
    """The files a Delta commit file adds as new data."""
    added = []
    with contextlib.suppress(OSError, ValueError):
        for line in commit.read_text().splitlines():
            add = json.loads(line).get("add")
            if add and add.get("dataChange", True):
                added.append(add)
    return added


def _rows_added(commit: Path) -> int | None:
    """The rows a Delta commit file adds, by its files' statistics; ``None`` where a file has
    none."""
    rows = 0
    try:
        for add in _added(commit):
            stats = json.loads(add.get("stats") or "{}")
            if "numRecords" not in stats:
                return None
            rows += int(stats["numRecords"])
    except ValueError:
        return None
    return rows
