"""Bad input loses nothing and stops nothing: file rows are read and typed one by one (property
tests, no Spark), then routed to ack_events or quarantine with file and line; rows other
writers put in ack_events are quarantined by the pipeline; corrupted streams leave the clean
trees' outcomes as a clean run's."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from pipelines import jobs
from pipelines.cli import main
from pipelines.ingest import SourceRow, estimated_events, read_rows
from pipelines.tables import IDEMPOTENCY_WINDOW, INGESTED_TABLES, create_tables
from pipelines.workload import Event, WorkloadSpec, generate_workload
from tests.acker_harness import BASE_TIME, Harness, ack, at, init, outcome, write_conf
from tests.conftest import make_config
from tests.model import AckerModel

WINDOW_PROPERTY = "delta.setTransactionRetentionDuration"

COLUMNS = (
    "anchor_id",
    "event_type",
    "xor_value",
    "spout_task",
    "source_msg_id",
    "component",
    "event_time",
    "event_id",
)
INT64 = st.integers(-(2**63), 2**63 - 1)
PLAIN_TEXT = st.text(st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp")), max_size=8)
RECORDS = st.fixed_dictionaries(
    {
        "anchor_id": INT64,
        "event_type": st.sampled_from(["init", "ack", "anchor", "fail", "reset"]),
        "xor_value": st.none() | INT64,
        "spout_task": st.none() | st.integers(-(2**31), 2**31 - 1),
        "source_msg_id": st.none() | PLAIN_TEXT,
        "component": st.none() | PLAIN_TEXT,
        "event_time": st.datetimes(datetime(2000, 1, 1), datetime(2100, 1, 1)),
        "event_id": st.none() | PLAIN_TEXT,
    }
)
# How a row gets broken, and the reason it must be quarantined with.
CORRUPTIONS = {
    "garbage": "unparsable_row",
    "anchor_too_big": "invalid_anchor_id",
    "anchor_not_a_number": "invalid_anchor_id",
    "time_not_a_time": "invalid_event_time",
    "xor_fraction": "invalid_xor_value",
    "task_too_big": "invalid_spout_task",
}


def typed(record: dict[str, Any]) -> tuple[Any, ...]:
    """The values a clean record must be read as: empty text is null, times are UTC."""
    values = [None if record[c] == "" else record[c] for c in COLUMNS]
    values[6] = record["event_time"].replace(tzinfo=UTC)
    return tuple(values)


def corrupt(record: dict[str, Any], how: str) -> dict[str, Any]:
    broken = dict(record)
    if how == "anchor_too_big":
        broken["anchor_id"] = 2**63
    elif how == "anchor_not_a_number":
        broken["anchor_id"] = "12ab"
    elif how == "time_not_a_time":
        broken["event_time"] = "yesterday"
    elif how == "xor_fraction":
        broken["xor_value"] = 1.5 if isinstance(record["xor_value"], int) else "1.5"
    elif how == "task_too_big":
        broken["spout_task"] = 2**31
    return broken


def as_json(record: dict[str, Any]) -> str:
    return json.dumps(record, default=lambda v: v.isoformat())


Stream = list[tuple[dict[str, Any], str | None]]


def assert_read_as_expected(rows: list[SourceRow], stream: Stream) -> None:
    """Clean records read as their typed values; broken ones as the reason they were broken."""
    for row, (record, how) in zip(rows, stream, strict=True):
        if how is None:
            assert (row.values, row.problem) == (typed(record), None)
        else:
            assert (row.values, row.problem) == (None, CORRUPTIONS[how])


STREAMS = st.lists(
    st.tuples(RECORDS, st.none() | st.sampled_from(sorted(CORRUPTIONS))), min_size=1, max_size=30
)


@pytest.mark.fast
@settings(max_examples=150, deadline=None)
@given(stream=STREAMS)
def test_every_json_line_is_read_or_named_bad(
    stream: Stream, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("jsonl") / "events.jsonl"
    lines = [
        "{not json" if how == "garbage" else as_json(corrupt(r, how) if how else r)
        for r, how in stream
    ]
    path.write_text("\n".join(lines) + "\n")
    rows = list(read_rows(path))
    assert [row.number for row in rows] == list(range(1, len(stream) + 1))
    assert [row.text for row in rows] == lines
    assert_read_as_expected(rows, stream)


@pytest.mark.fast
@settings(max_examples=150, deadline=None)
@given(stream=STREAMS)
def test_every_csv_line_is_read_or_named_bad(
    stream: Stream, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("csv") / "events.csv"
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(COLUMNS)
    for record, how in stream:
        if how == "garbage":
            text.write("1,init\n")
            continue
        values = corrupt(record, how) if how else record
        writer.writerow(
            ["" if values[c] is None else values[c] for c in COLUMNS[:6]]
            + [str(values["event_time"]), values["event_id"] or ""]
        )
    path.write_text(text.getvalue())
    rows = list(read_rows(path))
    assert [row.number for row in rows] == list(range(2, len(stream) + 2))
    assert_read_as_expected(rows, stream)


@pytest.mark.fast
def test_the_events_a_verb_will_ingest_are_estimated_without_reading_the_files(
    tmp_path: Path,
) -> None:
    """What decides the command line's JVM before Spark starts: a Parquet file's footer gives
    its rows, a text file counts a row per 100 bytes; what cannot be listed here is not told."""
    landing = tmp_path / "landing"
    landing.mkdir()
    pq.write_table(
        pa.table({"anchor_id": list(range(1, 1235)), "event_type": ["ack"] * 1234}),
        landing / "a.parquet",
    )
    (landing / "b.jsonl").write_text("x" * 4_321)
    (landing / "_SUCCESS").write_text("")
    assert estimated_events([landing / "a.parquet"]) == 1234
    assert estimated_events([landing]) == 1234 + 43
    assert estimated_events([landing / "b.jsonl"], "csv") == 43
    assert estimated_events([landing, tmp_path / "missing.jsonl"]) is None
    assert estimated_events([landing, "s3a://bucket/landing/"]) is None


def test_ingest_routes_each_row_to_events_or_quarantine(acker: Harness, tmp_path: Path) -> None:
    good = [
        {"anchor_id": 5, "event_type": "init", "xor_value": 9, "spout_task": 2,
         "source_msg_id": "m5", "event_time": "2026-03-01T12:00:00"},
        {"anchor_id": 5, "event_type": "ack", "xor_value": 9,
         "event_time": "2026-03-01T13:00:00+01:00"},
    ]  # fmt: skip
    bad = [
        ("{\"anchor_id\": 6, \"event_type\": ", "unparsable_row"),
        (json.dumps({"anchor_id": "six", "event_type": "ack", "xor_value": 1,
                     "event_time": "2026-03-01T12:00:00"}), "invalid_anchor_id"),
        (json.dumps({"anchor_id": 0, "event_type": "ack", "xor_value": 1,
                     "event_time": "2026-03-01T12:00:00"}), "zero_anchor_id"),
        (json.dumps({"event_type": "ack", "xor_value": 1,
                     "event_time": "2026-03-01T12:00:00"}), "null_anchor_id"),
        (json.dumps({"anchor_id": 6, "event_type": "nack", "xor_value": 1,
                     "event_time": "2026-03-01T12:00:00"}), "unknown_event_type"),
        (json.dumps({"anchor_id": 6, "event_type": "ack", "xor_value": 0,
                     "event_time": "2026-03-01T12:00:00"}), "zero_xor_value"),
        (json.dumps({"anchor_id": 6, "event_type": "init", "spout_task": 1,
                     "event_time": "2026-03-01T12:00:00"}), "null_xor_value"),
        (json.dumps({"anchor_id": 6, "event_type": "init", "xor_value": 3,
                     "event_time": "2026-03-01T12:00:00"}), "init_without_spout_task"),
        (json.dumps({"anchor_id": 6, "event_type": "ack", "xor_value": 3}), "null_event_time"),
    ]  # fmt: skip
    path = tmp_path / "mixed.jsonl"
    lines = [json.dumps(good[0]), *(text for text, _ in bad), json.dumps(good[1])]
    path.write_text("\n".join(lines) + "\n")
    lines_seen: list[str] = []

    report = jobs.ingest(acker.spark, acker.config, [path], progress=lines_seen.append)
    assert (report.files, report.accepted, report.quarantined, report.skipped_files) == (1, 2, 9, 0)
    assert lines_seen == [f"[1/1] {path}: 2 events, 9 quarantined"]
    expected_events = acker.spark.createDataFrame(
        [
            (5, "init", 9, 2, "m5", None, datetime(2026, 3, 1, 12), None),
            (5, "ack", 9, None, None, None, datetime(2026, 3, 1, 12), None),
        ],
        jobs.ACK_EVENTS_SCHEMA,
    )
    assert_df_equality(
        acker.table("ack_events"),
        expected_events,
        ignore_row_order=True,
        ignore_nullable=True,
        ignore_metadata=True,
    )
    expected_quarantine = acker.spark.createDataFrame(
        [(text, reason, str(path), line, None) for line, (text, reason) in enumerate(bad, 2)],
        "raw string, reason string, source string, source_row bigint, batch_id bigint",
    )
    assert_df_equality(
        acker.table("quarantine").drop("quarantined_at"),
        expected_quarantine,
        ignore_row_order=True,
        ignore_nullable=True,
        ignore_metadata=True,
    )

    # The same content under another name is recognised; nothing is added twice.
    copy = tmp_path / "copy" / "again.jsonl"
    copy.parent.mkdir()
    shutil.copy(path, copy)
    again = jobs.ingest(acker.spark, acker.config, [path, copy.parent])
    assert (again.files, again.accepted, again.quarantined, again.skipped_files) == (2, 0, 0, 2)
    assert (acker.table("ack_events").count(), acker.table("quarantine").count()) == (2, 9)

    jobs.run(acker.spark, acker.config)
    assert acker.table("completed").select("anchor_id").collect() == [(5,)]


def test_a_parquet_file_spark_reads_gives_what_the_row_reader_gives(
    acker_factory,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """The same rows as two Parquet files: typed columns Spark reads (32-bit anchors, a zoned
    time, no event_id column), and the anchor as text, which only the row reader converts."""
    rows = {
        "anchor_id": [5, 5, 6, 0, 7],
        "event_type": ["init", "ack", "ack", "ack", "init"],
        "xor_value": [9, 9, 3, 1, 4],
        "spout_task": [2, None, None, None, 2**40],  # the last is beyond 32 bits
        "source_msg_id": ["m5", "", None, None, "m7"],  # "" is null, as in CSV
        "event_time": [datetime(2026, 3, 1, 12, tzinfo=UTC)] * 4 + [None],
    }
    zoned = pa.timestamp("us", tz="UTC")
    typed = tmp_path / "typed.parquet"
    pq.write_table(
        pa.table(
            {
                **{name: values for name, values in rows.items() if name != "anchor_id"},
                "anchor_id": pa.array(rows["anchor_id"], pa.int32()),
                "event_time": pa.array(rows["event_time"], zoned),
            }
        ),
        typed,
    )
    text = tmp_path / "text.parquet"
    pq.write_table(
        pa.table(
            {
                **rows,
                "anchor_id": [str(anchor) for anchor in rows["anchor_id"]],
                "event_time": pa.array(rows["event_time"], zoned),
            }
        ),
        text,
    )
    expected_events = [
        (5, "init", 9, 2, "m5", None, datetime(2026, 3, 1, 12), None),
        (5, "ack", 9, None, None, None, datetime(2026, 3, 1, 12), None),
        (6, "ack", 3, None, None, None, datetime(2026, 3, 1, 12), None),
    ]
    expected_reasons = [(4, "zero_anchor_id"), (5, "invalid_spout_task")]
    for path in (typed, text):
        acker: Harness = acker_factory()
        report = jobs.ingest(acker.spark, acker.config, [path])
        assert (report.accepted, report.quarantined) == (3, 2)
        assert_df_equality(
            acker.table("ack_events"),
            acker.spark.createDataFrame(expected_events, jobs.ACK_EVENTS_SCHEMA),
            ignore_row_order=True,
            ignore_nullable=True,
            ignore_metadata=True,
        )
        quarantined = acker.table("quarantine").select("source_row", "reason", "source")
        assert sorted(tuple(row) for row in quarantined.collect()) == [
            (row, reason, str(path)) for row, reason in expected_reasons
        ]
        if path == typed:  # read by Spark: a bad row's text is the JSON of the file's columns
            texts = acker.table("quarantine").select("source_row", "raw").collect()
            assert {row["source_row"]: json.loads(row["raw"]) for row in texts} == {
                4: {
                    "event_type": "ack",
                    "xor_value": 1,
                    "event_time": "2026-03-01T12:00:00.000Z",
                    "anchor_id": 0,
                },
                5: {
                    "event_type": "init",
                    "xor_value": 4,
                    "spout_task": 2**40,
                    "source_msg_id": "m7",
                    "anchor_id": 7,
                },
            }


def window_of(acker: Harness, table: str) -> str | None:
    rows = acker.spark.sql(f"show tblproperties {acker.config.qualified(table)}").collect()
    return next((r["value"] for r in rows if r["key"] == WINDOW_PROPERTY), None)


def test_a_file_is_ingested_once_within_the_idempotency_window_and_again_after_it(
    acker: Harness, tmp_path: Path
) -> None:
    assert [window_of(acker, t) for t in INGESTED_TABLES] == [IDEMPOTENCY_WINDOW] * 2
    # A warehouse from before the window: init sets it; a window a user chose stays.
    events, quarantine = (acker.config.qualified(t) for t in INGESTED_TABLES)
    acker.spark.sql(f"alter table {events} unset tblproperties ('{WINDOW_PROPERTY}')")
    widened = "interval 90 days"
    acker.spark.sql(
        f"alter table {quarantine} set tblproperties ('{WINDOW_PROPERTY}' = '{widened}')"
    )
    create_tables(acker.spark, acker.config)
    assert [window_of(acker, t) for t in INGESTED_TABLES] == [IDEMPOTENCY_WINDOW, widened]

    path = tmp_path / "events.jsonl"
    path.write_text(as_json({"anchor_id": 5, "event_type": "ack", "xor_value": 9,
                             "event_time": "2026-03-01T12:00:00"}) + "\n")  # fmt: skip
    assert jobs.ingest(acker.spark, acker.config, [path]).accepted == 1
    assert jobs.ingest(acker.spark, acker.config, [path]).skipped_files == 1
    # Once Delta has dropped the file's transaction id, the file is new again.
    acker.spark.sql(
        f"alter table {events} set tblproperties ('{WINDOW_PROPERTY}' = 'interval 1 seconds')"
    )
    time.sleep(1.5)
    assert jobs.ingest(acker.spark, acker.config, [path]).accepted == 1
    assert acker.table("ack_events").count() == 2


# One row of each kind another writer might append to ack_events directly.
BAD_ROWS = {
    "null_anchor_id": Event(None, "ack", 7, None, None, "bolt", at(1), None),
    "zero_anchor_id": Event(0, "ack", 7, None, None, "bolt", at(1), None),
    "unknown_event_type": Event(31, "nack", 7, None, None, "bolt", at(1), None),
    "null_xor_value": Event(31, "ack", None, None, None, "bolt", at(1), None),
    "zero_xor_value": Event(31, "anchor", 0, None, None, "bolt", at(1), None),
    "init_without_spout_task": Event(31, "init", 7, None, "m31", "spout", at(1), None),
    "null_event_time": Event(31, "ack", 7, None, None, "bolt", None, None),
}


def test_the_pipeline_quarantines_bad_rows_and_goes_on(acker: Harness) -> None:
    # Every kind in one micro-batch, each with its own reason (the corrupted-stream property
    # below draws them alone and in mixes).
    kinds = sorted(BAD_ROWS)
    good = [init(30, 12, 0), ack(30, 12, 5), init(31, 7, 0)]
    acker.batch(good[0], *(BAD_ROWS[k] for k in kinds), *good[1:])
    quarantine = acker.table("quarantine").select("reason", "source", "source_row", "batch_id")
    expected = acker.spark.createDataFrame(
        [(k, acker.config.qualified("ack_events"), None, 0) for k in kinds],
        "reason string, source string, source_row bigint, batch_id bigint",
    )
    assert_df_equality(
        quarantine, expected, ignore_row_order=True, ignore_nullable=True, ignore_metadata=True
    )
    raw = {json.loads(r["raw"])["event_type"] for r in acker.table("quarantine").collect()}
    assert raw == {BAD_ROWS[k].event_type for k in kinds}
    assert acker.table("completed").select("anchor_id").collect() == [(30,)]
    assert acker.pending_ids() == {31}, "31's bad ack, anchor and init changed nothing"
    batch = acker.table("batches").first()
    assert batch is not None
    assert (batch["events_in"], batch["quarantined"]) == (3 + len(kinds), len(kinds))
    assert batch["events_in"] == (
        batch["events_applied"] + batch["duplicates"] + batch["quarantined"] + batch["late"]
    )


@settings(max_examples=3, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 10_000),
    corruption=st.lists(
        st.tuples(st.sampled_from(sorted(BAD_ROWS)), st.integers(0, 10**6), INT64),
        min_size=1,
        max_size=12,
    ),
)
def test_corrupted_streams_leave_clean_trees_as_a_clean_run(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    corruption: list[tuple[str, int, int]],
) -> None:
    events = generate_workload(WorkloadSpec(trees=40, batches=1, seed=seed, start=BASE_TIME))
    anchors = sorted({e.anchor_id for e in events if e.anchor_id is not None})
    # Bad rows aimed at the clean trees, with values that would break their checksums.
    corrupted = list(events)
    for kind, position, value in corruption:
        template = BAD_ROWS[kind]
        target = (
            template.anchor_id
            if kind in ("null_anchor_id", "zero_anchor_id")
            else anchors[position % len(anchors)]
        )
        bad_value = template.xor_value if kind in ("null_xor_value", "zero_xor_value") else value
        row = replace(template, anchor_id=target, xor_value=bad_value)
        corrupted.insert(position % (len(corrupted) + 1), row)
    config = make_config(tmp_path_factory.mktemp("corrupted"), buckets=2)
    create_tables(spark, config)
    acker = Harness(spark, config)
    model = AckerModel(buckets=2)
    acker.batch(*corrupted)
    model.batch(0, events)
    acker.tick(2)
    model.tick(2)

    acker.assert_outcomes(**model.outcomes)
    assert acker.table("quarantine").count() == len(corruption)
    batch = acker.table("batches").first()
    assert batch is not None and batch["events_in"] == len(corrupted)


def test_the_capacity_guard_fails_exactly_the_newest_new_trees(acker_factory) -> None:  # type: ignore[no-untyped-def]
    acker: Harness = acker_factory(max_pending=2)
    acker.batch(init(1, 5, 0), init(2, 5, 10), init(3, 5, 20), init(4, 5, 30), ack(4, 5, 31))
    assert acker.pending_ids() == {1, 2}, "3 is the newest new tree; 4 completed, so never counts"
    acker.batch(ack(1, 5, 40), init(5, 6, 50), init(6, 6, 45))
    assert acker.pending_ids() == {2, 6}, "1 completes and frees a place: 6 (older) takes it"
    failed = acker.table("failed").select("anchor_id", "reason", "batch_id").orderBy("anchor_id")
    assert [tuple(r) for r in failed.collect()] == [(3, "overflow", 0), (5, "overflow", 1)]
    overflowed = acker.table("batches").orderBy("batch_id").select("overflowed").collect()
    assert [r[0] for r in overflowed] == [1, 1]


def test_the_capacity_guard_never_fails_a_tree_without_its_init(acker_factory) -> None:  # type: ignore[no-untyped-def]
    acker: Harness = acker_factory(max_pending=2)
    acker.batch(init(101, 7, 0), init(-104, 9, 0), ack(102, 5, 1000), init(103, 0, 2000))
    # 102, the newest new tree, has no init: it waits, and counts toward max_pending; of the
    # trees with their init, 101 and -104 are as new, and 101 goes by the larger anchor id.
    acker.assert_outcomes(
        completed=[
            outcome(103, "acked", init_ms=2000, first_ms=2000, last_ms=2000, events=1, batch=0)
        ],
        failed=[outcome(101, "overflow", init_ms=0, first_ms=0, last_ms=0, events=1, batch=0)],
    )
    assert acker.pending_ids() == {-104, 102}
    acker.batch(init(102, 5, 3000))
    acker.assert_outcomes(
        completed=[
            outcome(103, "acked", init_ms=2000, first_ms=2000, last_ms=2000, events=1, batch=0),
            outcome(102, "acked", init_ms=3000, first_ms=1000, last_ms=3000, events=2, batch=1),
        ],
        failed=[outcome(101, "overflow", init_ms=0, first_ms=0, last_ms=0, events=1, batch=0)],
    )
    assert acker.table("late_events").count() == 0
    queue = acker.table("replay_queue").select("spout_task", "source_msg_id", "anchor_id")
    assert [tuple(r) for r in queue.collect()] == [(1, "m101", 101)]


def test_the_documented_recipe_re_processes_quarantined_rows(
    acker: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    operations = (Path(__file__).parent.parent / "docs" / "operations.md").read_text()
    recipe = re.search(r'acker sql "(insert into ack_events.*?)"\n', operations, re.DOTALL)
    assert recipe is not None, "the re-processing example of docs/operations.md is gone"
    init_without_task = Event(40, "init", 6, None, "m40", "spout", at(0), None)
    acker.batch(init_without_task, ack(40, 6, 5))
    assert [r["reason"] for r in acker.table("quarantine").collect()] == ["init_without_spout_task"]
    assert acker.pending_ids() == {40}, "the ack waits for an init"

    conf = write_conf(acker.config, tmp_path / "acker.toml")
    assert main(["sql", "--conf", str(conf), recipe.group(1)]) == 0, capsys.readouterr().err
    jobs.run(acker.spark, acker.config)
    acker.assert_outcomes(
        completed=[
            outcome(40, "acked", init_ms=0, first_ms=0, last_ms=5, events=2, batch=1, task=0)
        ]
    )
