"""The scheduler definitions: the Databricks bundle's jobs and the Airflow DAGs call verbs the
CLI really has, with a conf that loads, one run at a time; the DAGs import under Airflow and
their command runs the real acker."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipelines.cli import _parser
from pipelines.config import load_config
from pipelines.run_record import file_keys, nothing_to_run
from tests.acker_harness import write_conf
from tests.conftest import make_config

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@pytest.fixture(scope="module")
def bundle() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "databricks.yml").read_text())
    return loaded


def resolve(value: str, bundle: dict[str, Any]) -> str:
    """Substitute ${var.x} with the variable's default and ${workspace.file_path} with the
    repository, as a deploy of these files would."""
    variables = {name: spec["default"] for name, spec in bundle["variables"].items()}
    value = value.replace("${workspace.file_path}", str(ROOT))
    return re.sub(r"\$\{var\.(\w+)\}", lambda m: str(variables[m.group(1)]), value)


@pytest.mark.fast
def test_bundle_references_only_defined_variables(bundle: dict[str, Any]) -> None:
    used = set(re.findall(r"\$\{var\.(\w+)\}", (ROOT / "databricks.yml").read_text()))
    assert used <= set(bundle["variables"]), used - set(bundle["variables"])
    assert {"catalog", "schema"} <= used


@pytest.mark.fast
def test_bundle_jobs_call_the_entry_point_with_a_conf_that_loads(bundle: dict[str, Any]) -> None:
    jobs = bundle["resources"]["jobs"]
    assert set(jobs) == {"batch_acker_run", "batch_acker_maintain"}
    verbs = set()
    for job in jobs.values():
        assert job["max_concurrent_runs"] == 1
        assert job["schedule"]["quartz_cron_expression"]
        clusters = {cluster["job_cluster_key"] for cluster in job["job_clusters"]}
        for task in job["tasks"]:
            assert task["job_cluster_key"] in clusters
            wheel = task["python_wheel_task"]
            assert wheel["package_name"] == PROJECT["name"].replace("-", "_")
            assert wheel["entry_point"] in PROJECT["scripts"]
            assert task["libraries"] == [{"whl": "./dist/*.whl"}]
            args = _parser().parse_args([resolve(p, bundle) for p in wheel["parameters"]])
            verbs.add(args.verb)
            config = load_config(
                args.conf, warehouse=args.warehouse, catalog=args.catalog, schema=args.schema
            )
            assert config.qualified("completed") == "main.acker.completed"
            assert config.spark.delta_jars == "provided"
            assert str(config.warehouse_path) == "/Volumes/main/acker/checkpoints"
    assert verbs == {"run", "maintain"}
    assert "--wheel-dir dist" in bundle["artifacts"]["batch_acker"]["build"]


_DESCRIBE_DAGS = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("batch_acker_dags", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from airflow.sdk import DAG
dags = [value for value in vars(module).values() if isinstance(value, DAG)]
print(json.dumps({
    "doc": module.__doc__,
    "dag_id": module.DAG_ID,
    "dags": {
        dag.dag_id: {
            "schedule": str(dag.schedule),
            "catchup": dag.catchup,
            "max_active_runs": dag.max_active_runs,
            "params": {key: dag.params[key] for key in dag.params},
            "tasks": {t.task_id: {"bash": t.bash_command, "env": t.env} for t in dag.tasks},
        }
        for dag in dags
    },
}))
"""


@pytest.fixture(scope="module")
def dags(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("airflow-home")
    env = {**os.environ, "AIRFLOW_HOME": str(home), "ACKER_CONF": ""}
    described = subprocess.run(
        [sys.executable, "-c", _DESCRIBE_DAGS, str(ROOT / "dags" / "batch_acker.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert described.returncode == 0, described.stderr[-3000:]
    result: dict[str, Any] = json.loads(described.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.fast
def test_dags_import_under_airflow_one_run_at_a_time_without_catchup(dags: dict[str, Any]) -> None:
    assert dags["dag_id"] == "batch_acker_run"
    assert set(dags["dags"]) == {"batch_acker_run", "batch_acker_maintain"}
    assert dags["dags"]["batch_acker_run"]["schedule"] == "0:05:00"
    assert dags["dags"]["batch_acker_maintain"]["schedule"] == "@daily"
    for dag_id, dag in dags["dags"].items():
        assert (dag["catchup"], dag["max_active_runs"]) == (False, 1), dag_id
        (task_id,) = dag["tasks"]
        assert task_id in dags["doc"] and dag_id in dags["doc"]


def test_dag_commands_run_the_real_acker(dags: dict[str, Any], tmp_path: Path) -> None:
    config = make_config(tmp_path / "warehouse")
    conf = write_conf(config, tmp_path / "acker.toml")
    landing = tmp_path / "landing"
    landing.mkdir()
    spout = {"spout_task": 3, "event_time": "2026-03-01T12:00:00"}
    events = [
        {"anchor_id": 1, "event_type": "init", "xor_value": 12, "source_msg_id": "a", **spout},
        {"anchor_id": 1, "event_type": "ack", "xor_value": 12, "event_time": "2026-03-01T12:00:01"},
        {"anchor_id": 2, "event_type": "init", "xor_value": 5, "source_msg_id": "b", **spout},
    ]
    (landing / "part-0.jsonl").write_text("".join(json.dumps(event) + "\n" for event in events))
    tasks = {
        task_id: task for dag in dags["dags"].values() for task_id, task in dag["tasks"].items()
    }

    def task(command: str, ingest: str) -> tuple[str, str]:
        env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            # what the DAG's templated env renders to when the params name these paths
            "ACKER_CONF": str(conf),
            "ACKER_INGEST": ingest,
        }
        done = subprocess.run(
            ["bash", "-c", command], env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout, done.stderr

    task(f"acker init --conf {conf}", "")
    ingested_and_run, _ = task(tasks["acker_run"]["bash"], str(landing))
    assert ingested_and_run.splitlines() == [
        f"ingested 1 files: 3 events into {config.qualified('ack_events')}, 0 rows quarantined; "
        "0 files already ingested, skipped",
        "processed 1 micro-batches, 3 events: 1 completed, 0 failed; 0 ticks",
    ]
    # The next run finds only files the last one ingested, and nothing else to do: it ends
    # without starting Spark, as it does without a landing folder.
    idle = "processed 0 micro-batches, 0 events: 0 completed, 0 failed; 0 ticks"
    said, progress = task(tasks["acker_run"]["bash"], str(landing))
    assert said.splitlines() == [
        f"ingested 0 files: 0 events into {config.qualified('ack_events')}, 0 rows quarantined; "
        "1 files already ingested, skipped",
        idle,
    ]
    assert progress.splitlines() == [
        "nothing to do: no new file, no event since the last run and no tick due; Spark not started"
    ]
    said, progress = task(tasks["acker_run"]["bash"], "")
    assert said.splitlines() == [idle] and "Spark not started" in progress
    # A new file, or one changed since, sends the run to Spark again.
    assert nothing_to_run(config, landed=file_keys(config, [landing]))
    (landing / "part-1.jsonl").write_text(json.dumps(events[2]) + "\n")
    assert not nothing_to_run(config, landed=file_keys(config, [landing]))
    (landing / "part-1.jsonl").unlink()
    (landing / "part-0.jsonl").write_text(json.dumps(events[0]) + "\n")
    assert not nothing_to_run(config, landed=file_keys(config, [landing]))
    assert tasks["acker_run"]["env"] == {
        "ACKER_CONF": "{{ params.conf }}",
        "ACKER_INGEST": "{{ params.ingest }}",
    }
    assert dags["dags"]["batch_acker_run"]["params"]["ingest"] == ""
    assert "ingest" not in dags["dags"]["batch_acker_maintain"]["params"]
    assert tasks["acker_maintain"]["bash"] == 'acker maintain ${ACKER_CONF:+--conf "$ACKER_CONF"}'
