"""A warehouse on S3: the tour's verbs (`acker init`, `run --ingest`, `tick`, `status`, `sql`)
as real processes against a local S3-compatible server (moto's standalone server, started on a
free port), with Hadoop's S3A connector that the session resolves for an `s3a://` warehouse,
the events ingested from a landing folder on the same server, the runs killed in turn at each
kind of write of the micro-batch before one runs to the end, then an idle scheduled run and a
status asked again, which answer without Spark. Its outcome tables equal those
of the same uninterrupted work on a local warehouse. Also: a landing folder on S3 ingested
into a local warehouse, with a local folder's rules for hidden files and content already
ingested."""

from __future__ import annotations

import csv
import fcntl
import io
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from pyarrow import fs as pafs
from pyspark.sql import SparkSession

from pipelines import jobs
from pipelines.errors import UnreadableInput
from pipelines.faults import CRASH_ENV
from pipelines.ingest import ingest
from pipelines.tables import create_tables
from tests.acker_harness import free_port, run_cli
from tests.conftest import make_config

ROOT = Path(__file__).resolve().parents[1]
SERVER_REQUIREMENTS = ROOT / "tests" / "s3_server" / "requirements.txt"
SERVER_ENV = ROOT / ".cache" / "s3-server"
TOUR_EVENTS = ROOT / "examples" / "events.jsonl"
BUCKET = "acker-warehouse"

# Every outcome of the tour, one row per tree, in a stable order: what both warehouses must hold.
OUTCOMES = (
    "select 'completed' as outcome, anchor_id, reason, event_count, latency_ms, batch_id, epoch"
    " from completed union all"
    " select 'failed', anchor_id, reason, event_count, latency_ms, batch_id, epoch from failed"
    " union all"
    " select 'expired', anchor_id, reason, event_count, latency_ms, batch_id, epoch from expired"
    " order by outcome, anchor_id"
)


def _server_python() -> Path:
    """moto's server in its own virtual environment, made once (uv, from the project's cache)."""
    python = SERVER_ENV / "bin" / "python"
    stamp = SERVER_ENV / ".installed"
    SERVER_ENV.parent.mkdir(parents=True, exist_ok=True)
    with (SERVER_ENV.parent / ".s3-server.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.exists() or stamp.stat().st_mtime < SERVER_REQUIREMENTS.stat().st_mtime:
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(SERVER_ENV)], check=True)
            uv = Path(sys.executable).with_name("uv")
            install = [str(uv), "pip", "install", "--quiet", "--python", str(python)]
            subprocess.run(
                [*install, "-r", str(SERVER_REQUIREMENTS)],
                check=True,
                env={**os.environ, "UV_CACHE_DIR": str(ROOT / ".cache" / "uv")},
            )
            stamp.touch()
    return python


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running S3 server with the warehouse's bucket; its endpoint URL."""
    port = free_port()
    log = (tmp_path_factory.mktemp("s3-server") / "server.log").open("w")
    server = subprocess.Popen(
        [str(_server_python()), "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(endpoint, timeout=2).close()
            break
        except (urllib.error.URLError, ConnectionError):
            assert server.poll() is None and time.monotonic() < deadline, "no S3 server"
            time.sleep(0.2)
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/{BUCKET}", method="PUT")).close()
    yield endpoint
    server.terminate()
    server.wait(timeout=30)
    log.close()


def put_object(endpoint: str, key: str, content: bytes) -> None:
    """Store ``content`` at ``key`` (``bucket/path``) on the S3 server, with a client set up
    here rather than from the acker's settings."""
    store = pafs.S3FileSystem(
        endpoint_override=endpoint.removeprefix("http://"),
        scheme="http",
        access_key="test",
        secret_key="test",
        region="us-east-1",
    )
    with store.open_output_stream(key) as stream:
        stream.write(content)


def land_events(endpoint: str, folder: str) -> None:
    """The tour's events in a landing folder as a hook's upload leaves it: the file in a
    subfolder, beside a part still being written (hidden) and a job's ``_SUCCESS`` marker."""
    events = TOUR_EVENTS.read_bytes()
    put_object(endpoint, f"{folder}/2026/11/28/events.jsonl", events)
    put_object(endpoint, f"{folder}/2026/11/28/.events.jsonl.part", events[:100])
    put_object(endpoint, f"{folder}/_SUCCESS", b"")


S3A_SETTINGS = {
    "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
    "spark.hadoop.fs.s3a.path.style.access": "true",
    "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
    "spark.hadoop.fs.s3a.access.key": "test",
    "spark.hadoop.fs.s3a.secret.key": "test",
}


# A process in which Spark cannot start: what a verb answers without Spark, it answers here.
WITHOUT_JAVA = {**os.environ, "JAVA_HOME": "/nonexistent", "PATH": os.path.dirname(sys.executable)}

# One step per kind of write of a micro-batch, as the local crash tests kill in turn: an
# outcome append, the MERGE and the batch's commit row (under the tour's manual clock the
# stream applies its batches itself, with no staging step).
KILLED_IN_TURN = ("batch:completed", "batch:merged", "batch:committed")


def killed_run(conf: Path, point: str, *argv: str) -> None:
    """Run an acker verb as its own process group that kills itself (SIGKILL, its JVM too) on
    reaching ``point``; assert that it did."""
    env = {**os.environ, CRASH_ENV: point, "SPARK_LOCAL_DIRS": str(conf.parent / "spark-local")}
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", *argv, "--conf", str(conf)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        start_new_session=True,
    )
    assert done.returncode == -signal.SIGKILL, f"not killed at {point}: {done.stderr[-2000:]}"


def s3_conf(endpoint: str, folder: Path) -> Path:
    """The conf of an acker whose warehouse is on the S3 server (as conf/s3.example.toml, with
    the server's endpoint and its placeholder credentials)."""
    conf = folder / "acker.toml"
    conf.write_text(
        f"""[warehouse]
path = "s3a://{BUCKET}/warehouse"
[writer]
lock_dir = "{folder / "locks"}"
[spark.conf]
"spark.hadoop.fs.s3a.endpoint" = "{endpoint}"
"spark.sql.shuffle.partitions" = "2"
"""
        + "".join(f'"{key}" = "{value}"\n' for key, value in S3A_SETTINGS.items())
    )
    return conf


def test_the_tour_on_an_s3_warehouse_leaves_what_a_local_one_does(
    s3_endpoint: str, spark: SparkSession, tmp_path: Path
) -> None:
    conf = s3_conf(s3_endpoint, tmp_path)
    warehouse = f"s3a://{BUCKET}/warehouse"
    assert run_cli(conf, "init").startswith(f"created 10 tables in acker at {warehouse}")
    # ingest and run in one process, as the Airflow DAG runs them with a landing folder: killed
    # in turn at each kind of write of the micro-batch, each run finishing what the last left
    land_events(s3_endpoint, f"{BUCKET}/landing")
    landing = f"s3a://{BUCKET}/landing/"
    for point in KILLED_IN_TURN:
        killed_run(conf, point, "run", "--ingest", landing)
    ran = run_cli(conf, "run", "--ingest", landing)
    assert "0 files: 0 events into acker.ack_events" in ran  # the first killed run ingested
    assert "1 files already ingested, skipped" in ran
    # The next scheduled run finds from the objects alone that it has nothing to do: it ends
    # without starting Spark, which here could not start.
    idle = run_cli(conf, "run", "--ingest", landing, env=WITHOUT_JAVA)
    assert idle.splitlines()[-1] == (
        "processed 0 micro-batches, 0 events: 0 completed, 0 failed; 0 ticks"
    )
    assert run_cli(conf, "tick", "3").startswith("epoch 3:")
    status = run_cli(conf, "status")
    assert status.startswith("epoch 3, last batch 0") and f"in {warehouse}" in status
    assert run_cli(conf, "status", env=WITHOUT_JAVA) == status  # from its record
    on_s3 = list(csv.reader(io.StringIO(run_cli(conf, "sql", "--format", "csv", OUTCOMES))))

    # the same work on a local warehouse, in this process
    local = make_config(tmp_path / "local")
    create_tables(spark, local)
    ingest(spark, local, [TOUR_EVENTS])
    jobs.run(spark, local)
    jobs.tick(spark, local, 3)
    jobs.open_tables(spark, local)
    expected = [
        [str(value) for value in row]
        for row in spark.sql(
            OUTCOMES.replace(" from ", f" from {local.qualified_schema}.")
        ).collect()
    ]
    assert on_s3[0] == [
        "outcome",
        "anchor_id",
        "reason",
        "event_count",
        "latency_ms",
        "batch_id",
        "epoch",
    ]
    assert on_s3[1:] == expected and len(expected) == 100


def test_a_landing_folder_on_s3_is_ingested_as_a_local_one(
    s3_endpoint: str, spark: SparkSession, tmp_path: Path
) -> None:
    land_events(s3_endpoint, f"{BUCKET}/hook")
    bad_rows = b'{"anchor_id": "x", "event_type": "ack"}\n{"anchor_id": 7, "event_type": "nope"}\n'
    put_object(s3_endpoint, f"{BUCKET}/hook/2026/11/29/bad.jsonl", bad_rows)
    settings = {"spark.hadoop.fs.s3a.endpoint": s3_endpoint, **S3A_SETTINGS}
    local = make_config(tmp_path / "warehouse")
    config = replace(local, spark=replace(local.spark, conf={**local.spark.conf, **settings}))
    create_tables(spark, config)
    first = ingest(spark, config, [f"s3a://{BUCKET}/hook/"])
    assert (first.files, first.accepted, first.quarantined, first.skipped_files) == (2, 1437, 2, 0)
    # the same content again, under another name too: skipped, as a local file's would be
    put_object(s3_endpoint, f"{BUCKET}/again/events.jsonl", TOUR_EVENTS.read_bytes())
    again = ingest(spark, config, [f"s3a://{BUCKET}/hook/", f"s3a://{BUCKET}/again/events.jsonl"])
    assert (again.files, again.accepted, again.skipped_files) == (3, 0, 3)
    quarantined = spark.table(config.qualified("quarantine")).select("source", "source_row")
    assert sorted(quarantined.collect()) == [
        (f"s3a://{BUCKET}/hook/2026/11/29/bad.jsonl", 1),
        (f"s3a://{BUCKET}/hook/2026/11/29/bad.jsonl", 2),
    ]
    assert spark.table(config.qualified("ack_events")).count() == 1437
    with pytest.raises(UnreadableInput, match=f"s3a://{BUCKET}/missing/: no such file or folder"):
        ingest(spark, config, [f"s3a://{BUCKET}/missing/"])
    with pytest.raises(UnreadableInput, match=f"s3a://{BUCKET}/hook/_SUCCESS: unknown file type"):
        ingest(spark, config, [f"s3a://{BUCKET}/hook/_SUCCESS"])
