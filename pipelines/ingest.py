"""``acker ingest``: event files into ``ack_events``, every row checked, nothing lost.

Each row of a JSON Lines or CSV file is read as text first and converted to the
``ack_events`` columns and types here, and so is each row of a Parquet file whose columns Spark
cannot read into those types without loss; a Parquet file whose columns it can is read by Spark
(millions of rows in seconds, where the row reader takes minutes). Then the pipeline's own
input rules (``classify_batch_events.sql``) judge it. Good rows are appended to
``ack_events``; the others go to ``quarantine`` with the row's text (a Parquet row's as JSON),
the file, the line (or Parquet row) number and the reason. Both appends carry the file's
SHA-256 as their Delta ``txnAppId``: a file's content is ingested once, under whatever path
and however often it is offered, and an ingest stopped half-way finishes when run again.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs as pafs
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from pipelines.config import Config
from pipelines.engine import append_idempotent, classify_events
from pipelines.errors import UnreadableInput
from pipelines.faults import crash_point
from pipelines.object_store import fetch, is_object_store_path, list_files, s3_filesystem
from pipelines.session import is_connect
from pipelines.sql import quoted_table, run_sql
from pipelines.tables import log_heads

__all__ = [
    "ACK_EVENTS_SCHEMA",
    "FORMATS",
    "IngestReport",
    "InputFile",
    "SourceRow",
    "estimated_events",
    "ingest",
    "input_files",
    "read_rows",
]

ACK_EVENTS_SCHEMA = T.StructType(
    [
        T.StructField("anchor_id", T.LongType()),
        T.StructField("event_type", T.StringType()),
        T.StructField("xor_value", T.LongType()),
        T.StructField("spout_task", T.IntegerType()),
        T.StructField("source_msg_id", T.StringType()),
        T.StructField("component", T.StringType()),
        T.StructField("event_time", T.TimestampType()),
        T.StructField("event_id", T.StringType()),
    ]
)

_SOURCE_SCHEMA = T.StructType(
    [
        *ACK_EVENTS_SCHEMA.fields,
        T.StructField("source_row", T.LongType()),
        T.StructField("source_text", T.StringType()),
        T.StructField("read_problem", T.StringType()),
    ]
)

FORMATS = ("jsonl", "csv", "parquet")
_EXTENSIONS = {
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
}
_PROGRESS_EVERY = 100_000
# Fewer rows than this per task cost more to spread over the cores than they save.
_ROWS_PER_TASK_AT_LEAST = 50_000
# A JSON Lines or CSV event is 100-250 bytes; the estimate errs toward more events.
_TEXT_BYTES_PER_EVENT = 100
_INTEGER = re.compile(r"[+-]?\d+")


@dataclass(frozen=True)
class SourceRow:
    """One row of an input file: where it was, its text, and its values or what is wrong."""

    number: int
    """Line number (JSON Lines, CSV, counting the header) or row number (Parquet), from 1."""
    text: str
    values: tuple[Any, ...] | None
    """The ``ack_events`` columns, typed; ``None`` when the row cannot be read."""
    problem: str | None
    """Why ``values`` is ``None``: ``unparsable_row`` or ``invalid_<column>``."""


def _integer(bits: int) -> Callable[[object], int]:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def convert(value: object) -> int:
        if isinstance(value, bool):
            raise ValueError("a boolean is not an integer")
        if isinstance(value, int):
            number = value
        elif isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
            number = int(value)
        else:
            raise ValueError(f"not an integer: {value!r}")
        if not low <= number <= high:
            raise ValueError(f"out of the {bits}-bit range: {number}")
        return number

    return convert


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"not a string: {value!r}")
    return value


def _timestamp(value: object) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value.strip())
    if not isinstance(value, datetime):
        raise ValueError(f"not a timestamp: {value!r}")
    # Without a zone a time is UTC, the session's zone; with one it is converted to UTC. A
    # subclass (pandas' Timestamp, from a Parquet column with a zone) becomes a plain datetime.
    moment = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return datetime(*moment.timetuple()[:6], moment.microsecond, tzinfo=UTC)


_CONVERTERS: tuple[tuple[str, Callable[[object], Any]], ...] = (
    ("anchor_id", _integer(64)),
    ("event_type", _text),
    ("xor_value", _integer(64)),
    ("spout_task", _integer(32)),
    ("source_msg_id", _text),
    ("component", _text),
    ("event_time", _timestamp),
    ("event_id", _text),
)


def typed_values(record: Mapping[str, object]) -> tuple[tuple[Any, ...] | None, str | None]:
    """Convert one record to the ``ack_events`` types: ``(values, None)`` or ``(None, reason)``.

    An absent column, a null and an empty string (CSV's null) are all null; other columns
    are ignored.
    """
    values: list[Any] = []
    for column, convert in _CONVERTERS:
        value = record.get(column)
        if value is None or value == "":
            values.append(None)
            continue
        try:
            values.append(convert(value))
        except (ValueError, TypeError, OverflowError):
            return None, f"invalid_{column}"
    return tuple(values), None


def _row(number: int, text: str, record: object) -> SourceRow:
    if not isinstance(record, Mapping):
        return SourceRow(number, text, None, "unparsable_row")
    values, problem = typed_values(record)
    return SourceRow(number, text, values, problem)


def _jsonl_rows(path: Path) -> Iterator[SourceRow]:
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            text = line.rstrip("\r\n")
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except ValueError:
                yield SourceRow(number, text, None, "unparsable_row")
                continue
            yield _row(number, text, record)


def _csv_rows(path: Path) -> Iterator[SourceRow]:
    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        header: list[str] | None = None
        for number, line in enumerate(handle, start=1):
            text = line.rstrip("\r\n")
            if not text.strip():
                continue
            fields = next(csv.reader([text]))
            if header is None:
                header = [name.strip() for name in fields]
                continue
            if len(fields) != len(header):
                yield SourceRow(number, text, None, "unparsable_row")
                continue
            yield _row(number, text, dict(zip(header, fields, strict=True)))


def _parquet_rows(path: Path) -> Iterator[SourceRow]:
    number = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=65_536):
        for record in batch.to_pylist():
            number += 1
            yield _row(number, json.dumps(record, default=str, sort_keys=True), record)


_READERS: dict[str, Callable[[Path], Iterator[SourceRow]]] = {
    "jsonl": _jsonl_rows,
    "csv": _csv_rows,
    "parquet": _parquet_rows,
}


def file_format(path: str | Path, forced: str | None = None) -> str:
    """The format of ``path`` (a file's path or URI): ``forced`` if given, else by extension."""
    if forced is not None:
        if forced not in FORMATS:
            raise UnreadableInput(f"--format {forced!r}: use one of {', '.join(FORMATS)}")
        return forced
    suffix = PurePosixPath(path).suffix
    fmt = _EXTENSIONS.get(suffix.lower())
    if fmt is None:
        raise UnreadableInput(
            f"{path}: unknown file type {suffix!r} "
            "(use .jsonl, .json, .ndjson, .csv or .parquet, or --format)"
        )
    return fmt


def read_rows(path: Path, fmt: str | None = None) -> Iterator[SourceRow]:
    """Every row of an input file, in file order, readable or not. Blank lines are skipped."""
    return _READERS[file_format(path, fmt)](path)


@dataclass(frozen=True)
class IngestedCounts:
    """A file's rows per table they go to (select_ingested_events.sql's and
    select_ingest_quarantine.sql's)."""

    ack_events: int
    quarantine: int


def _counted() -> tuple[Column, Column]:
    """The columns of IngestedCounts, counted over a file's classified rows."""
    fit = F.col("read_problem").isNull() & F.col("quarantine_reason").isNull()
    return F.count_if(fit).alias("ack_events"), F.count_if(~fit).alias("quarantine")


@dataclass(frozen=True)
class IngestReport:
    """What one ``acker ingest`` did."""

    files: int
    accepted: int
    quarantined: int
    skipped_files: int


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _table_version(spark: SparkSession, config: Config, table: str, known: object = None) -> object:
    """Something that changes with every commit to ``table``: the newest commit file of its
    log, probed from ``known`` (what this returned before) where this process reads the log,
    else the version Delta's history names (a statement)."""
    heads = log_heads(config, (table,), known if isinstance(known, tuple) else None)
    if heads is not None:
        return heads
    row = spark.sql(f"describe history {quoted_table(config, table)} limit 1").first()
    return -1 if row is None else int(row["version"])


@dataclass(frozen=True)
class InputFile:
    """A file ingest reads: ``name`` is its path or ``s3a://`` URI, as progress and the
    quarantine's ``source`` give it; ``local`` is the file itself, or ``None`` for an object
    store's file, which is read from a copy (:func:`pipelines.object_store.fetch`) and whose
    size and modification time its listing gave (``listed``)."""

    name: str
    local: Path | None
    listed: tuple[int, int] | None = None


def input_files(
    paths: Sequence[str | Path], fmt: str | None = None, store: pafs.FileSystem | None = None
) -> list[InputFile]:
    """The files ingest reads at ``paths`` (files, or folders searched for event files, hidden
    ones and those starting with ``_`` left out), in order; an ``s3a://`` path is listed on
    ``store``."""
    files: list[InputFile] = []
    for raw in paths:
        if is_object_store_path(raw):
            if store is None:
                raise UnreadableInput(f"{raw}: no object store client to list it")
            objects, is_folder = list_files(store, str(raw))
            if is_folder:
                objects = [o for o in objects if _is_event_file(PurePosixPath(o[0]).name, fmt)]
            else:
                file_format(raw, fmt)
            files.extend(InputFile(uri, None, (size, mtime)) for uri, size, mtime in objects)
            continue
        path = Path(raw)
        if path.is_dir():
            found = (p for p in sorted(path.rglob("*")) if p.is_file())
            files.extend(InputFile(str(p), p) for p in found if _is_event_file(p.name, fmt))
        elif path.is_file():
            file_format(path, fmt)
            files.append(InputFile(str(path), path))
        else:
            raise UnreadableInput(f"{path}: no such file or folder")
    return files


def estimated_events(paths: Sequence[str | Path], fmt: str | None = None) -> int | None:
    """About how many events the local files at ``paths`` hold, without reading them: a
    Parquet file's footer says, a text file is taken at :data:`_TEXT_BYTES_PER_EVENT` bytes a
    row; ``None`` where that cannot be told here (an object store's files, a missing or
    unreadable path: ingest says why)."""
    if any(map(is_object_store_path, paths)):
        return None
    try:
        files = [file.local for file in input_files(paths, fmt) if file.local is not None]
        return sum(
            pq.ParquetFile(path).metadata.num_rows
            if file_format(path, fmt) == "parquet"
            else path.stat().st_size // _TEXT_BYTES_PER_EVENT
            for path in files
        )
    except (OSError, UnreadableInput, pa.ArrowException):
        return None


def _is_event_file(name: str, fmt: str | None) -> bool:
    """Whether a folder's file ``name`` is one ingest reads: not hidden, not starting with
    ``_``, and of a known type unless the format is given."""
    return not name.startswith((".", "_")) and (
        fmt is not None or PurePosixPath(name).suffix.lower() in _EXTENSIONS
    )


# Parquet column types that Spark reads into an ack_events column losslessly, per column: a
# file whose columns all have one of them is read by Spark, not row by row in Python.
_INTEGERS = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_SPARK_READABLE: dict[str, tuple[type[T.DataType], ...]] = {
    "anchor_id": _INTEGERS,
    "event_type": (T.StringType,),
    "xor_value": _INTEGERS,
    "spout_task": _INTEGERS,
    "source_msg_id": (T.StringType,),
    "component": (T.StringType,),
    "event_time": (T.TimestampType, T.TimestampNTZType),
    "event_id": (T.StringType,),
}


def _spark_parquet_rows(spark: SparkSession, path: Path) -> DataFrame | None:
    """The rows of a Parquet file as ingest's source rows, read by Spark, if every
    ``ack_events`` column it has is of a type Spark converts without loss (null where it has
    none; a spout task beyond 32 bits is ``invalid_spout_task``, as the row reader says);
    ``None`` otherwise, for the row reader. The rows' texts are left null:
    :func:`_with_parquet_texts` renders those the quarantine keeps."""
    found = spark.read.parquet(str(path))
    types = {field.name: field.dataType for field in found.schema.fields}
    if any(
        name in types and not isinstance(types[name], readable)
        for name, readable in _SPARK_READABLE.items()
    ):
        return None
    columns = []
    for field in ACK_EVENTS_SCHEMA.fields:
        if field.name not in types:
            columns.append(F.lit(None).cast(field.dataType).alias(field.name))
            continue
        value = F.col(field.name)
        if isinstance(field.dataType, T.StringType):
            value = F.nullif(value, F.lit(""))
        columns.append(value.try_cast(field.dataType).alias(field.name))
    overflow = (
        F.col("spout_task").isNotNull() & F.col("spout_task").try_cast("int").isNull()
        if "spout_task" in types
        else F.lit(False)
    )
    rows = found.select(
        *columns,
        (F.col("_metadata.row_index") + 1).alias("source_row"),
        F.lit(None).cast("string").alias("source_text"),
        F.when(overflow, F.lit("invalid_spout_task")).alias("read_problem"),
    )
    return _spread(spark, path, rows)


def _with_parquet_texts(spark: SparkSession, path: Path, classified: DataFrame) -> DataFrame:
    """The rows of ``classified`` (from the Parquet file ``path``) that go to quarantine, each
    with its text, the JSON of the file's columns: joined back by row number, so that only
    these rows are rendered (rendering every row cost the read of a large file seconds)."""
    found = spark.read.parquet(str(path))
    values = found.select(
        (F.col("_metadata.row_index") + 1).alias("source_row"),
        F.struct(*[F.col(name) for name in found.columns]).alias("source_values"),
    )
    bad = classified.where(
        F.col("read_problem").isNotNull() | F.col("quarantine_reason").isNotNull()
    )
    return (
        bad.drop("source_text")
        .join(values, "source_row")
        .withColumn("source_text", F.to_json("source_values"))
        .drop("source_values")
    )


def _spread(spark: SparkSession, path: Path, rows: DataFrame) -> DataFrame:
    """``rows``, read from the Parquet file ``path``, over the session's cores where the file
    is large and has fewer row groups than cores: Spark reads a row group in one task, and a
    file of one group would otherwise be checked and written by one core (and staged and
    applied by one, as ack_events then holds it in one file). Spread by anchor: a round-robin
    spread sorts every row first, to deal the same rows to each task on a retry (5.1 million
    events: 19.9 s against 13.5 s to read, check and keep them)."""
    if is_connect(spark):
        return rows
    metadata = pq.ParquetFile(path).metadata
    parts = min(spark.sparkContext.defaultParallelism, metadata.num_rows // _ROWS_PER_TASK_AT_LEAST)
    return rows.repartition(parts, "anchor_id") if parts > metadata.num_row_groups else rows


def _source_rows(
    spark: SparkSession,
    path: Path,
    name: str,
    fmt: str | None,
    progress: Callable[[str], None] | None,
) -> tuple[DataFrame, int]:
    """The rows :func:`read_rows` reads, as a DataFrame of :data:`_SOURCE_SCHEMA`, and how many
    there are. They reach Spark as an Arrow table, which the JVM reads itself: Python rows
    would need Python workers to unpickle them (a worker process per new JVM, and Python on
    every executor)."""
    rows: list[tuple[Any, ...]] = []
    empty: tuple[None, ...] = (None,) * len(ACK_EVENTS_SCHEMA.fields)
    for row in read_rows(path, fmt):
        rows.append((*(row.values or empty), row.number, row.text, row.problem))
        if progress is not None and len(rows) % _PROGRESS_EVERY == 0:
            progress(f"    {name}: {len(rows)} rows read")
    schema = to_arrow_schema(_SOURCE_SCHEMA, timezone="UTC")
    columns = zip(*rows, strict=True) if rows else ([] for _ in schema)
    table = pa.Table.from_arrays(
        [pa.array(values, type=field.type) for values, field in zip(columns, schema, strict=True)],
        schema=schema,
    )
    return spark.createDataFrame(table, _SOURCE_SCHEMA), len(rows)


def ingest(
    spark: SparkSession,
    config: Config,
    paths: Sequence[str | Path],
    fmt: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> IngestReport:
    """Append the events of JSON Lines, CSV or Parquet files (or folders) to ``ack_events``,
    and the rows that break the input contract to ``quarantine``; see the module doc.

    Example: ``ingest(spark, config, ["events/"], progress=print)``.
    """
    store = s3_filesystem(config.spark.conf) if any(map(is_object_store_path, paths)) else None
    files = input_files(paths, fmt, store)
    accepted = quarantined = skipped = 0
    with tempfile.TemporaryDirectory(prefix="acker-ingest-") as copies:
        for index, file in enumerate(files, start=1):
            path = file.local
            if path is None:
                assert store is not None  # input_files listed it there
                path = fetch(store, file.name, Path(copies))
            counts, written = _ingest_file(spark, config, file.name, path, fmt, progress, index)
            if file.local is None:
                path.unlink()
            if written or not any(counts.values()):
                accepted += counts["ack_events"]
                quarantined += counts["quarantine"]
                outcome = f"{counts['ack_events']} events, {counts['quarantine']} quarantined"
            else:
                skipped += 1
                outcome = "already ingested, skipped"
            if progress is not None:
                progress(f"[{index}/{len(files)}] {file.name}: {outcome}")
    return IngestReport(
        files=len(files), accepted=accepted, quarantined=quarantined, skipped_files=skipped
    )


def _ingest_file(
    spark: SparkSession,
    config: Config,
    name: str,
    path: Path,
    fmt: str | None,
    progress: Callable[[str], None] | None,
    number: int,
) -> tuple[dict[str, int], bool]:
    """Append one file's rows (read at ``path``, named ``name``, the ``number``-th file of the
    ingest): its rows per table, and whether this call wrote them (``False``: an earlier ingest
    of the same content had)."""
    read_by_spark = (
        _spark_parquet_rows(spark, path) if file_format(path, fmt) == "parquet" else None
    )
    if read_by_spark is None:
        source, rows = _source_rows(spark, path, name, fmt, progress)
    else:
        source, rows = read_by_spark, pq.ParquetFile(path).metadata.num_rows
    if not rows:
        return asdict(IngestedCounts(ack_events=0, quarantine=0)), False
    # Read once, by ack_events' append, which counts the rows as it goes: keeping them first
    # would write them to memory for a second read that seldom comes (a file with bad rows).
    classified = classify_events(spark, config, source, kept=False)
    app = f"ingest/{_file_digest(path)}"
    # An append Delta skips, the file ingested before, reads nothing: the rows are then
    # counted on their own.
    observed = None if is_connect(spark) else Observation("ingested rows")
    counting = classified if observed is None else classified.observe(observed, *_counted())
    events = run_sql(spark, config, "select_ingested_events", classified_events=counting)
    written = _appended(spark, config, events, "ack_events", app)
    crash_point("ingest:ack_events", number)
    counted = observed.get if written and observed is not None else None
    if counted is None:
        counted = classified.agg(*_counted()).first().asDict()  # type: ignore[union-attr]
    counts = asdict(IngestedCounts(**counted))
    if counts["quarantine"]:
        bad = classified
        if read_by_spark is not None:
            bad = _with_parquet_texts(spark, path, classified)
        quarantine = run_sql(
            spark, config, "select_ingest_quarantine", classified_events=bad, source=name
        )
        written |= _appended(spark, config, quarantine, "quarantine", app)
    return counts, written


def _appended(spark: SparkSession, config: Config, rows: DataFrame, table: str, app: str) -> bool:
    """Append ``rows`` to ``table`` once per ``app``; whether this call wrote them (``False``:
    Delta skipped the append, which an earlier call had committed)."""
    before = _table_version(spark, config, table)
    append_idempotent(rows, config, table, app, 0)
    return _table_version(spark, config, table, before) != before
