"""The files the acker reads beside its tables without Spark, on a real local folder: a Delta
log's newest commit found by probing from a known version (two requests when nothing was
committed since, no listing), from the last checkpoint, or by listing where neither is there;
the records written in one step."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pyarrow import fs as pafs

from pipelines.warehouse_files import WarehouseFiles, commit_name

pytestmark = pytest.mark.fast

LOG = "acker.db/pending/_delta_log"


class _CountingHandler(pafs.FileSystemHandler):  # type: ignore[misc]
    """The local file system, counting the probes and listings made through it."""

    def __init__(self) -> None:
        self.local = pafs.LocalFileSystem()
        self.probes = 0
        self.listings = 0

    def get_type_name(self) -> str:
        return "counting"

    def normalize_path(self, path: str) -> str:
        return path

    def equals(self, other: Any) -> bool:
        return other is self

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        self.probes += len(paths)
        return self.local.get_file_info(paths)  # type: ignore[no-any-return]

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        self.listings += 1
        return self.local.get_file_info(selector)  # type: ignore[no-any-return]

    def open_input_stream(self, path: str) -> Any:
        return self.local.open_input_stream(path)

    def open_output_stream(self, path: str, metadata: Any) -> Any:
        return self.local.open_output_stream(path)

    def create_dir(self, path: str, recursive: bool) -> None:
        self.local.create_dir(path, recursive=recursive)

    def move(self, src: str, dest: str) -> None:
        self.local.move(src, dest)

    def delete_file(self, path: str) -> None:
        self.local.delete_file(path)

    def _unused(self, *args: Any) -> None:
        raise NotImplementedError

    delete_dir = delete_dir_contents = delete_root_dir_contents = _unused
    copy_file = open_input_file = open_append_stream = _unused


def _files(root: Path) -> tuple[WarehouseFiles, _CountingHandler]:
    handler = _CountingHandler()
    return WarehouseFiles(pafs.PyFileSystem(handler), str(root), local=True), handler


def _commit(root: Path, *versions: int) -> None:
    log = root / LOG
    log.mkdir(parents=True, exist_ok=True)
    for version in versions:
        (log / commit_name(version)).write_text(json.dumps({"commitInfo": {"v": version}}) + "\n")


def _stamp(root: Path, version: int) -> tuple[int, int]:
    stat = (root / LOG / commit_name(version)).stat()
    return stat.st_size, stat.st_mtime_ns


@pytest.mark.parametrize("newest", [0, 1, 2, 7, 8, 100])
def test_the_newest_commit_is_found_by_probing_from_the_first(tmp_path: Path, newest: int) -> None:
    _commit(tmp_path, *range(newest + 1))
    files, handler = _files(tmp_path)
    assert files.newest_commit(LOG) == (commit_name(newest), _stamp(tmp_path, newest))
    assert handler.listings == 0
    # doubling past the newest, then halving back: a few probes per doubling
    assert handler.probes <= 3 + 2 * (newest + 1).bit_length()


def test_from_a_version_known_committed_nothing_new_costs_two_probes(tmp_path: Path) -> None:
    _commit(tmp_path, *range(40))
    files, handler = _files(tmp_path)
    assert files.newest_commit(LOG, known=39) == (commit_name(39), _stamp(tmp_path, 39))
    assert (handler.probes, handler.listings) == (2, 0)  # the version known, the next
    handler.probes = 0
    _commit(tmp_path, 40, 41)
    assert files.newest_commit(LOG, known=39) == (commit_name(41), _stamp(tmp_path, 41))
    assert handler.listings == 0


def test_the_last_checkpoint_stands_for_commits_cleaned_up_before_it(tmp_path: Path) -> None:
    _commit(tmp_path, *range(30, 45))
    (tmp_path / LOG / "_last_checkpoint").write_text(json.dumps({"version": 30, "size": 3}))
    files, handler = _files(tmp_path)
    assert files.newest_commit(LOG) == (commit_name(44), _stamp(tmp_path, 44))
    assert handler.listings == 0


@pytest.mark.parametrize(
    "known, last_checkpoint",
    [
        (None, None),  # commit 0 cleaned up, no checkpoint named
        (60, None),  # a version past the newest: a table removed and made again
        (None, {"version": 12}),  # a checkpoint whose commit was cleaned up
        (None, "not json"),
    ],
)
def test_where_the_start_is_gone_the_log_is_listed(
    tmp_path: Path, known: int | None, last_checkpoint: object
) -> None:
    _commit(tmp_path, *range(20, 26))
    if last_checkpoint is not None:
        text = last_checkpoint if isinstance(last_checkpoint, str) else json.dumps(last_checkpoint)
        (tmp_path / LOG / "_last_checkpoint").write_text(text)
    (tmp_path / LOG / "00000000000000000019.checkpoint.parquet").write_bytes(b"")
    files, handler = _files(tmp_path)
    assert files.newest_commit(LOG, known) == (commit_name(25), _stamp(tmp_path, 25))
    assert handler.listings == 1


def test_a_table_without_a_commit_or_a_log_has_no_newest(tmp_path: Path) -> None:
    files, _ = _files(tmp_path)
    assert files.newest_commit(LOG) is None
    (tmp_path / LOG).mkdir(parents=True)
    (tmp_path / LOG / "_commits").mkdir()
    assert files.newest_commit(LOG) is None


def test_a_record_is_replaced_in_one_step_and_removed(tmp_path: Path) -> None:
    files, _ = _files(tmp_path)
    assert files.read_text("_status/acker.json") is None
    files.write_text("_status/acker.json", "first")
    files.write_text("_status/acker.json", "second")
    assert files.read_text("_status/acker.json") == "second"
    assert sorted(os.listdir(tmp_path / "_status")) == ["acker.json"]  # nothing left beside
    assert files.names("_status") == ["acker.json"] and files.names("_missing") == []
    size_and_time = files.stamp("_status/acker.json")
    assert size_and_time is not None and size_and_time[0] == len("second")
    files.remove("_status/acker.json")
    files.remove("_status/acker.json")
    assert files.stamp("_status/acker.json") is None


def test_a_warehouse_that_cannot_be_written_is_left_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "_status").write_text("not a folder")
    files, _ = _files(tmp_path)
    files.write_text("_status/acker.json", "record")
    assert (tmp_path / "_status").read_text() == "not a folder"
