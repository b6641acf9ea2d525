"""Scale-out: `acker run` on a real Spark standalone cluster (a master and two workers, each a
process bound to 127.0.0.1, started from the pyspark installation) writes the same tables as
the embedded ``local[2]`` session on the same events."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path

import pyspark
import pytest
from pyspark.sql import SparkSession

from pipelines import jobs
from pipelines.config import Config
from pipelines.tables import create_tables
from pipelines.workload import WorkloadSpec, generate_workload
from tests.acker_harness import (
    BASE_TIME,
    append_micro_batch,
    assert_resolved_once,
    assert_same_tables,
    free_port,
    run_cli,
    write_conf,
)
from tests.conftest import TEST_SPARK_CONF, make_config

SPARK_HOME = Path(pyspark.__file__).parent
MASTER_URL = "spark://127.0.0.1:7077"
# Epochs of 2 s over the events' 20 s: the run ticks, and trees that lost an ack expire.
SEMANTICS = {"clock": "event_time", "tick_interval_s": 2.0}
CLUSTER_SPARK_CONF = {k: v for k, v in TEST_SPARK_CONF.items() if k != "spark.driver.memory"}


def _spark_class(main: str, *argv: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), main, *argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as reply:
            state = json.load(reply)
    except OSError:
        return -1
    return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")


@contextmanager
def standalone_cluster(folder: Path, workers: int = 2) -> Iterator[str]:
    """A master on 127.0.0.1:7077 and ``workers`` workers of one core each; yield its URL."""
    folder.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        ui_port = free_port()
        master = _spark_class(
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", "7077", "--webui-port", str(ui_port)),
            log=folder / "master.log",
        )
        stack.callback(_stop, master)
        for number in range(workers):
            worker = _spark_class(
                "org.apache.spark.deploy.worker.Worker",
                *("--host", "127.0.0.1", "--cores", "1", "--memory", "1g"),
                *("--webui-port", str(free_port()), "--work-dir", str(folder / f"work{number}")),
                MASTER_URL,
                log=folder / f"worker{number}.log",
            )
            stack.callback(_stop, worker)
        deadline = time.monotonic() + 180
        while _alive_workers(ui_port) < workers:
            if time.monotonic() > deadline:
                logs = "\n".join(p.read_text()[-1500:] for p in sorted(folder.glob("*.log")))
                pytest.fail(f"the standalone cluster did not come up in 180 s:\n{logs}")
            time.sleep(1)
        yield MASTER_URL


def _stop(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _cluster_conf(config: Config, master: str, path: Path) -> Path:
    conf = {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": "1g",
        "spark.executor.memory": "768m",
        "spark.executor.cores": "1",
        "spark.cores.max": "2",
        "spark.ui.enabled": "false",
        # the suite's settings for tiny micro-batches, executors included
        **CLUSTER_SPARK_CONF,
    }
    return write_conf(replace(config, spark=replace(config.spark, master=master, conf=conf)), path)


def _acker(conf: Path, *argv: str) -> None:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    run_cli(conf, *argv, env=env, timeout=600)


def test_a_standalone_cluster_gives_the_same_tables_as_local(
    spark: SparkSession, tmp_path: Path
) -> None:
    events = generate_workload(WorkloadSpec(trees=120, batches=2, seed=31, start=BASE_TIME))
    batches = [[e for e in events if e.batch == b] for b in range(2)]

    local = make_config(tmp_path / "local", **SEMANTICS)
    cluster = make_config(tmp_path / "cluster", **SEMANTICS)
    for config in (local, cluster):
        create_tables(spark, config)
        for batch in batches:
            append_micro_batch(spark, config, batch)
    jobs.run(spark, local)

    # One run, whose ticks (event time) follow its micro-batches: each application the cluster
    # starts costs the suite a driver and two executors.
    with standalone_cluster(tmp_path / "spark-cluster") as master:
        _acker(_cluster_conf(cluster, master, tmp_path / "cluster.toml"), "run")
    jobs.open_tables(spark, cluster)

    status = jobs.status(spark, cluster)
    assert min(status.completed, status.failed, status.expired) > 0, status
    assert_same_tables(spark, cluster, local)
    assert_resolved_once(spark, cluster)
    for worker in ("work0", "work1"):
        executors = list((tmp_path / "spark-cluster" / worker).glob("app-*/*/stderr"))
        assert len(executors) == 1, f"{worker} ran {len(executors)} executors, not one"
