"""The `acker` command line, in-process for speed and once as a real console-script process."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from pipelines import jobs, session
from pipelines.class_data import archive_path, jvm_options
from pipelines.cli import _jvm_for, _log_progress, _one_line, main
from pipelines.config import parse_config
from pipelines.engine import BatchResult, TickResult
from pipelines.jars import ensure_delta_jars, ensure_fold_jar
from pipelines.run_record import nothing_to_run, unread_events, unread_files
from pipelines.sql import TABLES, VIEWS, compiled_for_events, session_compiling_events
from pipelines.status_record import REFRESH_WINDOW_S, status_record_file
from pipelines.tables import table_bytes, table_location
from tests.acker_harness import Harness, ack, copy_warehouse, fail, init
from tests.acker_harness import write_conf as write_harness_conf
from tests.conftest import make_config

A, B, C = 7001, 7002, 7003


def write_conf(tmp_path: Path, **acker: object) -> Path:
    return write_harness_conf(make_config(tmp_path / "warehouse", **acker), tmp_path / "acker.toml")


def acker(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_cli_end_to_end_on_files(spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    conf = str(write_conf(tmp_path, buckets=2))
    (tmp_path / "a.jsonl").write_text(
        json.dumps(
            {
                "anchor_id": A,
                "event_type": "init",
                "xor_value": 12,
                "spout_task": 3,
                "source_msg_id": "msg-a",
                "event_time": "2026-03-01T12:00:00",
            }
        )
        + "\n"
        + json.dumps(
            {
                "anchor_id": A,
                "event_type": "ack",
                "xor_value": 12,
                "event_time": "2026-03-01T12:00:01.250",
            }
        )
        + "\n"
    )
    (tmp_path / "b.csv").write_text(
        "anchor_id,event_type,xor_value,spout_task,source_msg_id,component,event_time,event_id\n"
        f"{B},init,5,4,msg-b,spout,2026-03-01 12:00:02,e1\n"
    )
    pq.write_table(
        pa.table(
            {
                "anchor_id": pa.array([B], pa.int64()),
                "event_type": ["fail"],
                "event_time": pa.array([1772366405000000], pa.timestamp("us")),
            }
        ),
        tmp_path / "c.parquet",
    )
    assert "created 10 tables" in acker(capsys, "init", "--conf", conf)
    assert "ingested 3 files: 4 events into" in acker(
        capsys,
        "ingest",
        "--conf",
        conf,
        str(tmp_path / "a.jsonl"),
        str(tmp_path / "b.csv"),
        str(tmp_path / "c.parquet"),
    )
    out = acker(capsys, "run", "--conf", conf)
    assert "4 events: 1 completed, 1 failed" in out
    out = acker(
        capsys,
        "sql",
        "--conf",
        conf,
        "--format",
        "json",
        "select anchor_id, outcome, reason, spout_task, latency_ms"
        " from outcomes order by anchor_id",
    )
    assert [json.loads(line) for line in out.splitlines()] == [
        {
            "anchor_id": A,
            "outcome": "completed",
            "reason": "acked",
            "spout_task": 3,
            "latency_ms": 1250,
        },
        {
            "anchor_id": B,
            "outcome": "failed",
            "reason": "fail",
            "spout_task": 4,
            "latency_ms": 3000,
        },
    ]
    out = acker(capsys, "sql", "--conf", conf, "--format", "csv", "select anchor_id from completed")
    assert list(csv.reader(io.StringIO(out))) == [["anchor_id"], [str(A)]]
    out = acker(capsys, "sql", "--conf", conf, "select anchor_id, reason from failed")
    assert [cell.strip() for cell in out.splitlines()[2].split("|")[1:3]] == [str(B), "fail"]
    assert acker(capsys, "tick", "--conf", conf, "2").strip() == "epoch 2: 0 trees expired"
    # No status was asked yet, so the run and the tick kept no record to refresh.
    assert not list(tmp_path.rglob("_status"))
    status = acker(capsys, "status", "--conf", conf)
    assert "epoch 2, last batch 0" in status
    assert "completed          1" in status and "pending            0" in status
    assert "replay queue 1 trees" in status and "latency p50 1250 ms, p99 1250 ms" in status
    out = acker(
        capsys,
        "sql",
        "--conf",
        conf,
        "--format",
        "csv",
        "select spout_task, source_msg_id, reason from replay_queue",
    )
    assert list(csv.reader(io.StringIO(out))) == [
        ["spout_task", "source_msg_id", "reason"],
        ["4", "msg-b", "fail"],
    ]


@pytest.mark.fast
def test_a_pass_and_its_ticks_are_a_line_each_and_every_tick_a_json_record(
    capsys: pytest.CaptureFixture[str],
) -> None:
    at = datetime(2026, 3, 1, 12, tzinfo=UTC)
    one_pass = BatchResult(
        batch_id=0,
        status="committed",
        epoch=0,
        input_fingerprint="f",
        started_at=at,
        finished_at=at,
        duration_ms=5_900,
        events_in=333,
        completed=130,
        failed=3,
        through_epoch=60,
    )
    ticks = [TickResult(epoch, at, "event_time", epoch % 2, 1, 0, 0) for epoch in range(1, 61)]
    for result in (one_pass, ticks, ticks[:1]):
        _log_progress(result, as_json=False)
    assert capsys.readouterr().err.splitlines() == [
        "batch 0, epochs 0 to 60: 333 events, 133 trees resolved, 5.9 s",
        "60 ticks to epoch 60: 90 trees expired",
        "tick to epoch 1: 2 trees expired",
    ]
    _log_progress(ticks, as_json=True)
    records = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [(r["event"], r["epoch"], r["expired_no_init"]) for r in records] == [
        ("tick", epoch, 1) for epoch in range(1, 61)
    ]


@pytest.mark.fast
def test_bad_config_exits_2_with_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "bad.toml"
    conf.write_text("[acker]\nbuckets = 1\n")
    assert main(["status", "--conf", str(conf)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "acker: config error: acker.buckets = 1: must be an integer >= 2"


@pytest.mark.fast
def test_an_error_raised_in_the_jvm_is_told_by_its_deepest_cause(spark) -> None:  # type: ignore[no-untyped-def]
    """Py4J's own first line names only the call that failed; the operator reads the cause."""
    gateway = spark.sparkContext._gateway
    jvm = gateway.jvm
    parameter_types = gateway.new_array(jvm.java.lang.Class, 1)
    parameter_types[0] = jvm.java.lang.Class.forName("java.lang.String")
    parse = jvm.java.lang.Class.forName("java.lang.Integer").getMethod("parseInt", parameter_types)
    arguments = gateway.new_array(jvm.java.lang.Object, 1)
    arguments[0] = "x"
    # Reflection wraps what the method threw (InvocationTargetException), and Py4J wraps that.
    with pytest.raises(Py4JJavaError) as raised:
        parse.invoke(None, arguments)
    assert str(raised.value).startswith("An error occurred while calling")
    assert _one_line(raised.value) == 'java.lang.NumberFormatException: For input string: "x"'
    assert _one_line(ValueError("no such file\nsecond line")) == "no such file"


def test_uninitialised_warehouse_is_a_one_line_error(
    spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    conf = str(write_conf(tmp_path))
    for argv in (["status"], ["sql", "select 1"]):
        assert main([*argv, "--conf", conf]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "run `acker init` first" in err[0]


def test_sql_attaches_only_the_tables_and_views_its_query_reads(
    acker_factory,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    built: Harness = acker_factory()
    built.batch(init(A, 6, 0), ack(A, 6, 10), init(B, 5, 0), fail(B, 20))
    # The same warehouse under a schema name this session has never attached.
    config = make_config(tmp_path / "copy")
    copy_warehouse(built.config, config)
    conf = str(write_harness_conf(config, tmp_path / "copy.toml"))

    def attached() -> set[str]:
        names = [*TABLES, *VIEWS]
        return {name for name in names if built.spark.catalog.tableExists(config.qualified(name))}

    assert acker(capsys, "sql", "--conf", conf, "--format", "csv", "select 1 as one") == "one\n1\n"
    assert attached() == set()
    out = acker(capsys, "sql", "--conf", conf, "--format", "csv", "select * from replay_queue")
    assert [row[:5] for row in csv.reader(io.StringIO(out))] == [
        ["spout_task", "source_msg_id", "anchor_id", "outcome", "reason"],
        ["1", f"m{B}", str(B), "failed", "fail"],
    ]
    assert attached() == {
        "completed",
        "failed",
        "expired",
        "late_events",
        "outcomes",
        "replay_queue",
    }


def test_status_record_follows_ingests_and_runs_and_yields_to_other_commits(
    acker_factory,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    built: Harness = acker_factory()
    built.batch(init(A, 6, 0), ack(A, 6, 10), init(B, 5, 0))
    config, spark = built.config, built.spark
    conf = str(write_harness_conf(config, tmp_path / "acker.toml"))
    assert jobs.recorded_status(config) is None
    printed = acker(capsys, "status", "--conf", conf)
    assert "completed          1" in printed and "pending            1" in printed
    recorded = jobs.recorded_status(config)
    assert recorded is not None and (recorded.events, recorded.completed) == (3, 1)

    # An ingest appends 2 events and 1 bad row: the record counts them from the commit files.
    rows = [
        {"anchor_id": B, "event_type": "ack", "xor_value": 5, "event_time": "2026-03-01T12:00:00"},
        {"anchor_id": A, "event_type": "ack", "xor_value": 6, "event_time": "2026-03-01T12:00:00"},
        {"anchor_id": "not a number", "event_type": "ack"},
    ]
    (tmp_path / "more.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    acker(capsys, "ingest", "--conf", conf, str(tmp_path / "more.jsonl"))
    counted = jobs.recorded_status(config)
    assert counted == replace(recorded, events=5, quarantined=recorded.quarantined + 1)
    assert counted == jobs.status(spark, config)

    # Any other commit sends status back to the tables, a delete from a counted table too.
    spark.sql(f"delete from {config.qualified('quarantine')}")
    assert jobs.recorded_status(config) is None
    assert jobs.status(spark, config) == replace(counted, quarantined=0)
    spark.sql(
        f"insert into {config.qualified('late_events')} (anchor_id, event_type, xor_value)"
        f" values ({A}, 'ack', 9)"
    )
    assert jobs.recorded_status(config) is None
    assert "late               1" in acker(capsys, "status", "--conf", conf)

    # A run refreshes the record it finds: B's ack completes it, A's second ack comes late.
    assert "2 events: 1 completed, 0 failed" in acker(capsys, "run", "--conf", conf)
    after_run = jobs.recorded_status(config)
    assert after_run is not None
    assert (after_run.completed, after_run.pending, after_run.late_events) == (2, 0, 2)
    assert after_run == jobs.status(spark, config)

    # Nobody asked within the refresh window: a tick leaves the record behind, and the next
    # status reads the tables and opens the window again, so the next tick refreshes it.
    record = config.warehouse_path / status_record_file(config)
    asked_long_ago = time.time() - REFRESH_WINDOW_S - 1
    os.utime(record.with_suffix(".asked"), (asked_long_ago, asked_long_ago))
    assert main(["tick", "--conf", conf]) == 0
    assert "refreshing" not in capsys.readouterr().err
    assert jobs.recorded_status(config) is None
    assert f"epoch {after_run.epoch + 1}," in acker(capsys, "status", "--conf", conf)
    assert main(["tick", "--conf", conf]) == 0
    assert "refreshing the status record" in capsys.readouterr().err
    after_tick = jobs.recorded_status(config)
    assert after_tick == replace(after_run, epoch=after_run.epoch + 2)

    # A warehouse where the record cannot be written still answers, from the tables.
    shutil.rmtree(record.parent)
    record.parent.write_text("not a folder")
    assert "late               2" in acker(capsys, "status", "--conf", conf)
    assert jobs.recorded_status(config) is None


def test_a_table_s_size_is_read_from_its_log_as_delta_reports_it(acker: Harness) -> None:
    """What decides, with the events, whether a run interprets its queries."""
    config = acker.config
    assert table_bytes(config, "pending") == 0  # created, nothing written
    acker.batch(init(A, 5, 0), ack(A, 5, 10), init(B, 6, 20), ack(B, 2, 30))
    acker.batch(ack(B, 4, 40), init(C, 3, 50))
    for table in ("pending", "completed", "ack_events"):
        detail = acker.spark.sql(f"describe detail {config.qualified(table)}").first()
        assert detail is not None and detail["sizeInBytes"] > 0
        assert table_bytes(config, table) == detail["sizeInBytes"]
    shutil.rmtree(table_location(config, "failed"))
    assert table_bytes(config, "failed") == 0  # not created
    newest = max((table_location(config, "pending") / "_delta_log").glob("*.json"))
    newest.with_suffix(".crc").unlink()
    assert table_bytes(config, "pending") is None


def test_a_run_with_nothing_to_do_ends_without_starting_spark(
    acker_factory,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: Harness = acker_factory(clock="processing_time", tick_interval_s=3600.0)
    config, spark = built.config, built.spark
    conf = str(write_harness_conf(config, tmp_path / "acker.toml"))
    assert not nothing_to_run(config)  # no run has left a record yet
    built.batch(init(A, 6, 0), ack(A, 6, 10), init(B, 5, 0))
    assert nothing_to_run(config)
    # The clock's next tick is due in an hour: then the run has work.
    assert not nothing_to_run(config, datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=2))

    def no_spark(*_: object, **__: object) -> None:
        raise AssertionError("an idle run started Spark")

    with monkeypatch.context() as patched:
        patched.setattr(session, "build_session", no_spark)
        printed = acker(capsys, "run", "--conf", conf)
    assert printed == "processed 0 micro-batches, 0 events: 0 completed, 0 failed; 0 ticks\n"

    # An ingested event is work: the run applies it, and is idle again after.
    rows = [
        {"anchor_id": B, "event_type": "ack", "xor_value": 5, "event_time": "2026-03-01T12:00:00"}
    ]
    (tmp_path / "more.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    acker(capsys, "ingest", "--conf", conf, str(tmp_path / "more.jsonl"))
    assert not nothing_to_run(config)
    assert unread_events(config) == 1  # what sizes the run's JVM
    assert "1 events: 1 completed" in acker(capsys, "run", "--conf", conf)
    assert nothing_to_run(config)
    assert unread_events(config) == 0
    # A tick leaves a record as a run does; another writer's commit, or other settings, make
    # the next run read the tables.
    jobs.tick(spark, config)
    assert nothing_to_run(config)
    spark.sql(
        f"insert into {config.qualified('late_events')} (anchor_id, event_type, xor_value)"
        f" values ({A}, 'ack', 9)"
    )
    assert not nothing_to_run(config)
    jobs.run(spark, config)
    assert nothing_to_run(config)
    assert not nothing_to_run(replace(config, acker=replace(config.acker, buckets=5)))


def test_console_script_runs_as_a_real_process(tmp_path: Path) -> None:
    """The installed script works as a process of its own; its first verb writes a class-data
    archive, beside the JARs, and every later one that starts Spark maps it. No verb starts
    the `python3` that comes first on PATH."""
    conf = str(write_conf(tmp_path))
    script = str(Path(sys.executable).parent / "acker")
    jars = ensure_delta_jars()[0].parent
    jar_cache = tmp_path / "jars"
    jar_cache.mkdir()
    (jar_cache / jars.name).symlink_to(jars)
    # A `python3` that is not this interpreter (as a system Python of another version would
    # fail the worker's version check), first on PATH, and no PYSPARK_PYTHON.
    other_python = tmp_path / "other-bin" / "python3"
    other_python.parent.mkdir()
    other_python.write_text("#!/bin/sh\nexit 97\n")
    other_python.chmod(0o755)
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"},
        "PATH": f"{other_python.parent}{os.pathsep}{os.environ['PATH']}",
        "ACKER_JAR_CACHE": str(jar_cache),
    }

    def run(*argv: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [script, *argv, "--conf", conf],
            capture_output=True,
            text=True,
            env={**env, **extra_env},
            timeout=600,
            check=False,
        )

    init = run("init")
    assert init.returncode == 0, init.stderr
    assert [p.name for p in (jar_cache / "class-data").iterdir()] == [
        archive_path(jar_cache, [*ensure_delta_jars(jar_cache), ensure_fold_jar(jar_cache)]).name
    ]
    assert "saving Spark's classes for faster starts" in init.stderr
    status = run("status")
    assert status.returncode == 0, status.stderr
    assert status.stderr == ""
    assert status.stdout.startswith("epoch 0, last batch -1")

    # Nothing changed since: the status is read from its record, without Java.
    again = run("status", JAVA_HOME=str(tmp_path / "no-java"))
    assert again.returncode == 0, again.stderr
    assert again.stdout == status.stdout

    # A JSON-lines file's rows are read in Python, then handed to Spark.
    events = tmp_path / "events.jsonl"
    events.write_text(
        '{"anchor_id": 5, "event_type": "init", "xor_value": 9, "spout_task": 2,'
        ' "source_msg_id": "m5", "event_time": "2026-03-01T12:00:00"}\n'
        '{"anchor_id": 5, "event_type": "ack", "xor_value": 9,'
        ' "event_time": "2026-03-01T12:00:01"}\n'
    )
    ingest = run("ingest", str(events))
    assert ingest.returncode == 0, ingest.stderr[-3000:]

    loaded = tmp_path / "classes.log"
    query = run(
        "sql",
        "select event_type, xor_value from ack_events order by event_type",
        "--format",
        "csv",
        JAVA_TOOL_OPTIONS=f"-Xlog:class+load=info:file={loaded}",
    )
    assert query.returncode == 0, query.stderr
    assert query.stdout == "event_type,xor_value\nack,9\ninit,9\n"
    delta_log = next(
        line
        for line in loaded.read_text().splitlines()
        if " org.apache.spark.sql.delta.DeltaLog " in line
    )
    assert "shared objects file" in delta_log, delta_log


@pytest.mark.fast
def test_a_local_session_starts_python_with_the_acker_s_own_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = parse_config({"warehouse": {"path": str(tmp_path)}})
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    session.configure_builder(SparkSession.builder, config)
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    # one the operator set stays
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/python/bin/python3")
    session.configure_builder(SparkSession.builder, config)
    assert os.environ["PYSPARK_PYTHON"] == "/opt/python/bin/python3"


@pytest.mark.fast
@pytest.mark.parametrize(
    ("driver_memory", "max_heap", "initial_mib"),
    [("4g", "4g", 4096), ("1536m", "1536m", 1536), ("2048", "2048m", 2048), ("3gb", "3g", 3072)],
)
def test_the_lean_jvm_starts_its_heap_at_the_driver_s_memory(
    driver_memory: str, max_heap: str, initial_mib: int
) -> None:
    options = session.lean_jvm_options(driver_memory)
    assert options.split()[-1] == f"-Xms{initial_mib}m"
    # The JVM Spark starts (JAVA_HOME's, else the one on PATH) takes them beside the maximum
    # Spark gives it (-Xmx, from the same setting).
    java_home = os.environ.get("JAVA_HOME")
    java = subprocess.run(
        [
            f"{java_home}/bin/java" if java_home else "java",
            *options.split(),
            f"-Xmx{max_heap}",
            "-XX:+PrintFlagsFinal",
            "-version",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    flags = {line.split()[1]: line.split()[3] for line in java.stdout.splitlines()[1:]}
    assert int(flags["InitialHeapSize"]) == initial_mib * 2**20
    assert flags["UseParallelGC"] == "true"


MIB = 2**20


@pytest.mark.fast
@pytest.mark.parametrize(
    ("verb", "continuous", "events", "tables_mib", "lean", "interpreted", "events_compiled"),
    [
        ("run", False, 714, (1, 25), True, True, False),
        ("run", False, 40_000, (4, 64), True, True, False),
        # more events, over a small pending: only the statements over them are compiled
        ("run", False, 40_001, (1, 1), True, True, True),
        ("run", False, 714, (1, 65), True, True, True),
        ("ingest", False, 430_000, (None, None), True, True, True),
        # a run and a tick scan pending whole, and the outcome tables once
        ("run", False, 714, (5, 1), True, False, False),
        ("run", False, 430_000, (5, 1), True, False, False),
        ("tick", False, 0, (1, 65), True, False, False),
        ("tick", False, 0, (0, 0), True, True, False),
        ("run", False, 2_000_001, (0, 0), False, False, False),
        ("ingest", False, 2_000_001, (None, None), False, False, False),
        # not known before Spark starts (an object store's files or tables): compiled
        ("run", False, None, (0, 0), True, False, False),
        ("run", False, 714, (None, 1), True, False, False),
        ("tick", False, 0, (1, None), True, False, False),
        ("ingest", False, None, (None, None), True, False, False),
        # an ingest and an init do not read those tables
        ("ingest", False, 20_000, (None, None), True, True, False),
        ("init", False, 0, (None, None), True, True, False),
        ("maintain", False, 0, (0, 0), True, False, False),
        ("status", False, 0, (None, None), True, True, False),
        ("sql", False, None, (None, None), True, True, False),
        ("run", True, 10, (0, 0), False, False, False),
    ],
)
def test_a_verb_interprets_its_queries_over_small_tables_and_compiles_those_over_many_events(
    verb: str,
    continuous: bool,
    events: int | None,
    tables_mib: tuple[int | None, int | None],
    lean: bool,
    interpreted: bool,
    events_compiled: bool,
) -> None:
    pending, outcomes = (None if mib is None else mib * MIB for mib in tables_mib)
    assert _jvm_for(verb, continuous, events, pending, outcomes) == (
        lean,
        interpreted,
        events_compiled,
    )


def _compiles(spark: SparkSession) -> bool:
    """Whether ``spark`` plans a query with whole-stage generated code (``*(1)`` in its plan)."""
    plan = spark.range(3).selectExpr("id + 1 as next")._jdf.queryExecution().executedPlan()
    return "*(" in plan.toString()


@pytest.mark.fast
def test_a_session_that_compiles_only_event_queries_compiles_them_inside_the_block(
    spark: SparkSession,
) -> None:
    marked, plain = spark.newSession(), spark.newSession()
    for key, value in session.INTERPRETED_QUERIES.items():
        marked.conf.set(key, value)
        plain.conf.set(key, value)
    marked.conf.set(session.EVENT_QUERIES_COMPILED, "true")
    assert not _compiles(marked)
    with compiled_for_events(marked):
        assert _compiles(marked)
    assert not _compiles(marked)
    beside = session_compiling_events(marked)
    assert beside is not marked and _compiles(beside) and not _compiles(marked)
    # a session not so marked keeps its own settings
    with compiled_for_events(plain):
        assert not _compiles(plain)
    assert session_compiling_events(plain) is plain


@pytest.mark.fast
def test_a_driver_memory_spark_would_refuse_adds_no_initial_heap() -> None:
    assert "-Xms" not in session.lean_jvm_options("plenty")
    assert session.lean_jvm_options("plenty") == session.LEAN_JVM_OPTIONS


@pytest.mark.fast
def test_writing_a_class_data_archive_removes_those_unused_for_30_days(tmp_path: Path) -> None:
    folder = tmp_path / "class-data"
    folder.mkdir()
    now = time.time()
    ages = {"unused.jsa": 31, "used-lately.jsa": 29, "other.txt": 400}
    for name, days in ages.items():
        (folder / name).write_bytes(b"x")
        os.utime(folder / name, (now - days * 86400,) * 2)

    # Mapping an archive marks it used.
    assert jvm_options(folder / "used-lately.jsa").startswith("-XX:SharedArchiveFile=")
    assert (folder / "used-lately.jsa").stat().st_mtime >= now
    os.utime(folder / "used-lately.jsa", (now - 29 * 86400,) * 2)

    assert jvm_options(folder / "new.jsa").startswith("-XX:ArchiveClassesAtExit=")
    assert sorted(path.name for path in folder.iterdir()) == ["other.txt", "used-lately.jsa"]


@pytest.mark.fast
def test_the_files_a_run_s_stream_will_read_are_counted_from_its_last_committed_offset(
    tmp_path: Path,
) -> None:
    config = make_config(tmp_path / "warehouse")
    log = table_location(config, "ack_events") / "_delta_log"
    log.mkdir(parents=True)

    def commit(version: int, *adds: bool) -> None:
        actions = [{"commitInfo": {}}] + [
            {"add": {"path": f"part-{version}-{n}.parquet", "dataChange": data_change}}
            for n, data_change in enumerate(adds)
        ]
        (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))

    def offset(batch: int, version: int, committed: bool) -> None:
        for folder in ("offsets", "commits") if committed else ("offsets",):
            (config.checkpoint_path / folder).mkdir(parents=True, exist_ok=True)
        source = {"sourceVersion": 1, "reservoirVersion": version, "index": -1}
        lines = ["v1", "{}", json.dumps(source)]
        (config.checkpoint_path / "offsets" / str(batch)).write_text("\n".join(lines) + "\n")
        if committed:
            (config.checkpoint_path / "commits" / str(batch)).write_text("v1\n{}\n")

    commit(0)  # the table's creation
    commit(1, True, True)
    commit(2, True, False)  # a compaction's file is no new data
    assert unread_files(config) == 3  # a first run reads them all
    offset(0, 3, committed=True)
    commit(3, True)
    assert unread_files(config) == 1
    # A batch started before a crash is read again with what came after it.
    offset(1, 4, committed=False)
    commit(4, True, True)
    assert unread_files(config) == 3
    # A first run on a log whose early commits a checkpoint may have replaced: not told.
    shutil.rmtree(config.checkpoint_path)
    (log / f"{3:020d}.checkpoint.parquet").write_bytes(b"")
    assert unread_files(config) is None
