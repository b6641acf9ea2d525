"""The files the acker reads and writes beside its tables without Spark: each table's newest
Delta commit and its checksum file, the stream checkpoint's offsets, the run and status
records. The same calls reach a local warehouse folder and one on an object store (pyarrow's S3
client, set up from the S3A settings as :mod:`pipelines.object_store` does), so that a scheduled
run with nothing to do, and a status asked again, end without starting Spark on either.

No Delta log is listed where it can be helped: on an object store a month of commits is many
pages of listing. A table's newest commit is found from a version known to exist (one a record
noted, else the log's last checkpoint) by probing the versions after it, which Delta writes one
after another: two requests when nothing was committed since.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs as pafs

from pipelines.config import Config
from pipelines.object_store import S3_SCHEME, s3_filesystem

__all__ = [
    "COMMIT_FILE",
    "FileStamp",
    "WarehouseFiles",
    "commit_name",
    "table_log",
    "warehouse_files",
]

FileStamp = tuple[int, int]
"""A file's size in bytes and modification time in nanoseconds (an object store's: to the
second), which a new file of the same name would change."""

# A Delta log's commit file: its version, zero-padded to 20 digits.
COMMIT_FILE = re.compile(r"\d{20}\.json")


def commit_name(version: int) -> str:
    """The name of a Delta log's commit file of ``version``."""
    return f"{version:020d}.json"


def table_log(config: Config, table: str) -> str:
    """Where ``table``'s Delta log is, under the warehouse: Spark's managed-table layout."""
    return f"{config.warehouse.schema}.db/{table}/_delta_log"


@dataclass(frozen=True)
class WarehouseFiles:
    """The files of one warehouse, by their paths under it (``store`` holds them at
    ``root/<path>``; ``local``: a folder, whose files are written beside and renamed, rather
    than an object store, whose put is one step). Reads raise ``OSError`` where the store
    cannot answer; a missing file is ``None``, not an error."""

    store: pafs.FileSystem
    root: str
    local: bool

    def _at(self, path: str) -> str:
        return f"{self.root}/{path}"

    def stamp(self, path: str) -> FileStamp | None:
        """The file's size and modification time, ``None`` where there is no such file."""
        info = self.store.get_file_info(self._at(path))
        if info.type != pafs.FileType.File:
            return None
        return info.size, info.mtime_ns

    def read_text(self, path: str) -> str | None:
        """The file's text, ``None`` where there is no such file."""
        try:
            with self.store.open_input_stream(self._at(path)) as stream:
                return bytes(stream.read()).decode()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def checksum(self, log: str, commit: str) -> dict[str, Any] | None:
        """What the checksum file Delta writes beside the commit file ``commit`` of the log
        ``log`` says of its table at that version (``tableSizeBytes``, ``numFiles``, ...);
        ``None`` where it is missing or unreadable."""
        try:
            found = json.loads(self.read_text(f"{log}/{commit[:20]}.crc") or "null")
        except ValueError:
            return None
        return found if isinstance(found, dict) else None

    def newest_checksum(self, log: str) -> dict[str, Any] | None:
        """What the checksum file of the Delta log ``log``'s newest commit says of its table
        (:meth:`checksum`); ``None`` before the table's first commit, or where that file is
        missing or unreadable."""
        newest = self.newest_commit(log)
        return None if newest is None else self.checksum(log, newest[0])

    def read_rows(self, path: str) -> list[dict[str, Any]]:
        """The rows of the Parquet file at ``path``, as dictionaries (timestamps as Python's
        naive ``datetime``, to the microsecond, as Spark gives them)."""
        table = pq.read_table(self._at(path), filesystem=self.store)
        micros = pa.schema(
            field.with_type(pa.timestamp("us")) if pa.types.is_timestamp(field.type) else field
            for field in table.schema
        )
        rows: list[dict[str, Any]] = table.cast(micros).to_pylist()
        return rows

    def write_rows(self, path: str, schema: pa.Schema, rows: list[dict[str, Any]]) -> int:
        """Write ``rows`` as a new Parquet file at ``path`` (zstd, as Spark writes the acker's
        tables; naive timestamps are UTC); its size in bytes."""
        pq.write_table(
            pa.Table.from_pylist(rows, schema),
            self._at(path),
            filesystem=self.store,
            compression="zstd",
        )
        written = self.stamp(path)
        assert written is not None, path
        return written[0]

    def names(self, folder: str) -> list[str]:
        """The names of the files directly in ``folder``; none where there is no such folder."""
        selector = pafs.FileSelector(self._at(folder), allow_not_found=True)
        return [
            info.base_name
            for info in self.store.get_file_info(selector)
            if info.type == pafs.FileType.File
        ]

    def write_text(self, path: str, text: str) -> None:
        """Write ``text`` to the file in one step (a reader sees the old file or the new one).
        Where the warehouse cannot be written (a reader's read-only mount), nothing is
        written."""
        with contextlib.suppress(OSError):
            if self.local:
                folder, _, name = path.rpartition("/")
                written = f"{folder}/.{name}.{os.getpid()}"
                self.store.create_dir(self._at(folder))
                self._put(written, text)
                self.store.move(self._at(written), self._at(path))
            else:
                self._put(path, text)

    def _put(self, path: str, text: str) -> None:
        with self.store.open_output_stream(self._at(path)) as stream:
            stream.write(text.encode())

    def remove(self, path: str) -> None:
        """Remove the file, if it is there and the warehouse can be written."""
        with contextlib.suppress(OSError):
            if self.stamp(path) is not None:
                self.store.delete_file(self._at(path))

    def newest_commit(self, log: str, known: int | None = None) -> tuple[str, FileStamp] | None:
        """The name and stamp of the Delta log ``log``'s newest commit file, probing the
        versions after ``known`` (a version the caller saw committed), else after the log's
        last checkpoint; the log is listed only where neither is there. ``None`` before the
        table's first commit, or where there is no such table."""
        start = known if known is not None else self._checkpointed_version(log)
        stamp = self.stamp(f"{log}/{commit_name(start)}")
        if stamp is None:
            versions = [int(name[:20]) for name in self.names(log) if COMMIT_FILE.fullmatch(name)]
            if not versions:
                return None
            start = max(versions)
            stamp = self.stamp(f"{log}/{commit_name(start)}")
            if stamp is None:  # the table removed meanwhile
                return None
        # Versions run on without a gap: double the step past the newest, then halve back.
        newest, step = start, 1
        while (found := self.stamp(f"{log}/{commit_name(newest + step)}")) is not None:
            newest, stamp, step = newest + step, found, step * 2
        missing = newest + step
        while missing - newest > 1:
            middle = (newest + missing) // 2
            found = self.stamp(f"{log}/{commit_name(middle)}")
            if found is None:
                missing = middle
            else:
                newest, stamp = middle, found
        return commit_name(newest), stamp

    def _checkpointed_version(self, log: str) -> int:
        """The version of the log's last checkpoint, as its ``_last_checkpoint`` file says; 0
        where it says none."""
        try:
            version = json.loads(self.read_text(f"{log}/_last_checkpoint") or "{}").get("version")
        except ValueError:
            return 0
        return version if isinstance(version, int) and version >= 0 else 0


def warehouse_files(config: Config) -> WarehouseFiles | None:
    """The files of ``config``'s warehouse, local or on S3; ``None`` where its tables are a
    catalog's or a remote Spark Connect server's, whose files this process does not read."""
    if config.warehouse.catalog or config.spark.remote.startswith("sc://"):
        return None
    if config.warehouse_is_local:
        return WarehouseFiles(pafs.LocalFileSystem(), str(config.warehouse_path), local=True)
    if not config.warehouse.path.startswith(S3_SCHEME):
        return None
    root = config.warehouse.path[len(S3_SCHEME) :].rstrip("/")
    return WarehouseFiles(_s3_store(tuple(sorted(config.spark.conf.items()))), root, local=False)


@cache
def _s3_store(settings: tuple[tuple[str, str], ...]) -> pafs.FileSystem:
    """One S3 client a process, for each set of settings."""
    conf: Mapping[str, str] = dict(settings)
    return s3_filesystem(conf)
