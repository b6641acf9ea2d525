"""Airflow DAGs that run the batch acker as scheduled jobs.

DAGs and their tasks:

- ``batch_acker_run`` (every 5 minutes): task ``acker_run`` runs ``acker run``, which processes
  every event that arrived since the last run, finishes any work a crash left half-done, and
  ticks as many times as the configured clock owes.
- ``batch_acker_maintain`` (daily): task ``acker_maintain`` runs ``acker maintain``, which
  compacts every table's small files and vacuums old ones.

Both call the ``acker`` console script of the environment Airflow's workers run in (install the
package there), with the conf file given by the DAG param ``conf`` (default: the environment
variable ``ACKER_CONF``, else the embedded local default). One run at a time per DAG
(``max_active_runs=1``); across the two DAGs the acker's own writer lock keeps one writer, and
``acker_maintain`` retries while a run holds it.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG, Param

DAG_ID = "batch_acker_run"
MAINTAIN_DAG_ID = "batch_acker_maintain"

_PARAMS = {
    "conf": Param(
        os.environ.get("ACKER_CONF", ""),
        type="string",
        description="acker conf file (TOML); empty for the embedded local default",
    ),
}
# The conf path reaches the shell as a variable, never pasted into the command; `--conf` is
# passed only when a file is named.
_CONF_ENV = {"ACKER_CONF": "{{ params.conf }}"}
_CONF_OPTION = '${ACKER_CONF:+--conf "$ACKER_CONF"}'
_START = datetime(2026, 1, 1)


def _acker_dag(dag_id: str, description: str, schedule: object, verb: str, **task: Any) -> DAG:
    """One DAG, one run at a time, no catch-up, whose single task runs ``acker <verb>``."""
    with DAG(
        dag_id=dag_id,
        description=description,
        schedule=schedule,
        start_date=_START,
        catchup=False,
        max_active_runs=1,
        params=_PARAMS,
        tags=["batch-acker"],
    ) as dag:
        BashOperator(
            task_id=f"acker_{verb}",
            bash_command=f"acker {verb} {_CONF_OPTION}",
            env=_CONF_ENV,
            append_env=True,
            **task,
        )
    return dag


run_dag = _acker_dag(
    DAG_ID,
    "Process newly arrived ack events and tick the acker's clock",
    timedelta(minutes=5),
    "run",
    execution_timeout=timedelta(hours=1),
)
maintain_dag = _acker_dag(
    MAINTAIN_DAG_ID,
    "Compact and vacuum the acker's Delta tables",
    "@daily",
    "maintain",
    retries=6,
    retry_delay=timedelta(minutes=10),
    execution_timeout=timedelta(hours=2),
)
