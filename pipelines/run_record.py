"""Where the last ``acker run`` or ``acker tick`` left the warehouse, kept beside its stream
checkpoint (a local folder's or an object store's: :mod:`pipelines.warehouse_files`), so that
a scheduled run with nothing to do ends without starting Spark, and the next run or tick with
work starts from the recorded position instead of reading it from nine tables (a new process
pays 1-3 s for each table it reads first).

A run has nothing to do when no event arrived since its stream last read ``ack_events`` (the
stream checkpoint's last committed offset lies past the table's newest commit), no other writer
changed the acker's own tables since that run ended (their newest commit files are the ones
recorded), the settings are the same, and, under the processing_time clock, no tick is due yet.
Any doubt (no record, a batch the stream started and did not commit, a catalog's tables, a
remote Spark Connect server, a store that does not answer) sends the run to Spark as usual.

``acker run --ingest PATH`` has nothing to do when, besides, every file at ``PATH`` is one the
last such run found in ``ack_events``: the record keeps each file's path, size and modification
time (not its digest, which would read every file of the landing folder each time), so a file
that is new or changed sends the run to Spark, whose ingest decides by digest.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
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
from pipelines.object_store import is_object_store_path, s3_filesystem
from pipelines.sql import TABLES
from pipelines.tables import log_heads
from pipelines.warehouse_files import WarehouseFiles, commit_name, table_log, warehouse_files

__all__ = [
    "FileKey",
    "file_keys",
    "nothing_to_run",
    "run_record_file",
    "save_run_record",
    "take_recorded_position",
    "unread_events",
    "unread_files",
]

FileKey = tuple[str, int, int]
"""A file's absolute path, size in bytes and modification time in nanoseconds."""


def file_keys(config: Config, paths: Sequence[str | Path]) -> list[FileKey] | None:
    """The key of every file ingest reads at ``paths`` (an object store's as its listing gives
    it); ``None`` where a path is missing or unreadable (ingest then says why)."""
    store = None
    if any(map(is_object_store_path, paths)):
        store = s3_filesystem(config.spark.conf)
    try:
        keys = []
        for file in input_files(paths, store=store):
            if file.local is not None:
                stat = file.local.stat()
                keys.append((str(file.local.resolve()), stat.st_size, stat.st_mtime_ns))
            elif file.listed is not None:
                keys.append((file.name, *file.listed))
    except (OSError, UnreadableInput):
        return None
    return keys


# A Delta checkpoint of the log: the commits before it may since have been cleaned up.
_CHECKPOINT_FILE = re.compile(r"\d{20}\.checkpoint(\.\d+\.\d+)?\.parquet")

# What a run must read of ack_events is told by the stream's offset of it. Every other table,
# quarantine too (a micro-batch may have written its rows and no others when it stopped), must
# be as the last run or tick left it.
_INGESTED = ("ack_events",)
_RUN_TABLES = tuple(table for table in TABLES if table not in _INGESTED)


def run_record_file(config: Config) -> str:
    """Where the run record of ``config``'s schema lives under the warehouse: beside its stream
    checkpoint."""
    return f"{config.checkpoint_folder.rpartition('/')[0]}/last-run.json"


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
    (keys taken before the ingest). Nothing is recorded where this process does not read the
    tables' files or the warehouse cannot be written."""
    files = warehouse_files(config)
    heads = log_heads(config, _RUN_TABLES)
    if files is None or heads is None:
        return
    record: dict[str, Any] = {
        "settings": _settings_digest(config),
        "heads": [list(head) for head in heads],
        "epoch": position.epoch,
        "last_batch_id": position.last_batch_id,
        "scale": None if scale is None else [scale.origin_us, scale.interval_us],
        "ingested": [list(key) for key in ingested],
    }
    files.write_text(run_record_file(config), json.dumps(record))


def _current_record(config: Config, files: WarehouseFiles) -> dict[str, Any] | None:
    """The record, if it was written under these settings and no writer has committed to
    the acker's tables since, but appends to ``ack_events``."""
    try:
        record: dict[str, Any] = json.loads(files.read_text(run_record_file(config)) or "null")
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("settings") != _settings_digest(config):
        return None
    heads = log_heads(config, _RUN_TABLES, record["heads"])
    if heads is None or [list(head) for head in heads] != record["heads"]:
        return None
    return record


def take_recorded_position(config: Config) -> Position | None:
    """Where the last run or tick left the acker, if nothing but appends to ``ack_events``
    were committed since; the record is removed as it is taken (holding the writer lock), so a
    run or tick that stops half-way, whose tables may hold rows it did not commit, leaves
    none."""
    files = warehouse_files(config)
    if files is None:
        return None
    record = _current_record(config, files)
    files.remove(run_record_file(config))
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
    files = warehouse_files(config)
    if files is None or landed is None:
        return False
    record = _current_record(config, files)
    if record is None:
        return False
    recorded = {tuple(key) for key in record.get("ingested", [])}
    if not set(landed) <= recorded:
        return False
    if not _stream_has_read_all(config, files):
        return False
    scale = record["scale"]
    return scale is None or owed_ticks(record["epoch"], EpochScale(*scale), now) == 0


def _stream_has_read_all(config: Config, files: WarehouseFiles) -> bool:
    """Whether the stream's last committed offset of ``ack_events`` lies past the table's
    newest commit, with no batch started after it."""
    try:
        started = _batches(files, "offsets", config)
        if not started or max(started) != max(_batches(files, "commits", config), default=None):
            return False
        offset = _offset(files, config, max(started))
        version = None if offset is None else offset.get("reservoirVersion")
        if offset is None or offset.get("index") != -1 or not isinstance(version, int):
            return False
        # The newest commit, probed from the last one the stream read.
        newest = files.newest_commit(table_log(config, "ack_events"), max(version - 1, 0))
    except OSError:
        return False
    return newest is not None and int(newest[0][:20]) < version


def _batches(files: WarehouseFiles, folder: str, config: Config) -> list[int]:
    """The stream batches whose files the checkpoint's ``folder`` (offsets, commits) holds."""
    names = files.names(f"{config.checkpoint_folder}/{folder}")
    return [int(name) for name in names if name.isdigit()]


def _offset(files: WarehouseFiles, config: Config, batch: int) -> dict[str, Any] | None:
    """The stream's offset of ``ack_events`` for micro-batch ``batch`` (its checkpoint file's
    third line), or ``None`` if the file is not one."""
    lines = (files.read_text(f"{config.checkpoint_folder}/offsets/{batch}") or "").splitlines()
    try:
        offset = json.loads(lines[2])
    except (IndexError, ValueError):
        return None
    return offset if isinstance(offset, dict) else None


def unread_events(config: Config) -> int | None:
    """About how many events of ``ack_events`` the stream has not read: the rows its Delta log
    records as added by the commits from the stream's last offset on (all of them before its
    first run), from the files' statistics; ``None`` where this process does not read the log,
    or it does not say (a commit without statistics, or a first run on a log whose oldest
    commits a checkpoint replaced)."""
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
    where that cannot be told from the log (not read by this process, or a first run on a log
    whose oldest commits a checkpoint replaced)."""
    commits = _unread_commits(config, whole=True)
    if commits is None:
        return None
    return sum(len(_added(commit)) for commit in commits)


def _unread_commits(config: Config, whole: bool = False) -> list[str] | None:
    """The texts of ``ack_events``' commit files from the stream's last offset on (a first
    run's: all of them), or ``None`` where this process does not read the log, or it may lack
    early commits a first run reads (a checkpoint replaced them). If ``whole``, from the last
    offset the stream committed, so that a batch it started and will read again counts too."""
    files = warehouse_files(config)
    if files is None:
        return None
    log = table_log(config, "ack_events")
    try:
        started = _batches(files, "commits" if whole else "offsets", config)
        first_unread: int | None = None
        if started:
            offset = _offset(files, config, max(started)) or {}
            version = offset.get("reservoirVersion")
            first_unread = version if isinstance(version, int) else 0
        # Listed once, before a first run: a checkpoint may stand for its oldest commits.
        if first_unread is None and any(map(_CHECKPOINT_FILE.fullmatch, files.names(log))):
            return None
        first = first_unread or 0
        newest = files.newest_commit(log, max(first - 1, 0))
        if newest is None:
            return None
        commits = []
        for version in range(first, int(newest[0][:20]) + 1):
            commit = files.read_text(f"{log}/{commit_name(version)}")
            if commit is None:  # cleaned up since
                return None
            commits.append(commit)
    except OSError:
        return None
    return commits


def _added(commit: str) -> list[dict[str, Any]]:
    """The files a Delta commit (its file's text) adds as new data."""
    added = []
    with contextlib.suppress(ValueError):
        for line in commit.splitlines():
            add = json.loads(line).get("add")
            if add and add.get("dataChange", True):
                added.append(add)
    return added


def _rows_added(commit: str) -> int | None:
    """The rows a Delta commit (its file's text) adds, by its files' statistics; ``None``
    where a file has none."""
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
