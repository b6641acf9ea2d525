"""Airflow DAGs that run the batch acker as scheduled jobs.

DAGs and their tasks:

- ``batch_acker_run`` (every 5 minutes): task ``acker_run`` runs ``acker run``, which processes
  every event that arrived since the last run, finishes any work a crash left half-done, and
  ticks as many times as the configured clock owes. With the DAG param ``ingest`` (default: the
  environment variable ``ACKER_INGEST``), a folder where event files land, it runs
  ``acker run --ingest FOLDER``: the files not ingested before are appended to ``ack_events``
  first, in the same process (one JVM a cycle instead of two).
- ``batch_acker_maintain`` (daily): task ``acker_maintain`` runs ``acker maintain``, which
  compacts every table's small files and vacuums old ones.

Both call the ``acker`` console script of the environment Airflow's workers run in (install the
package there), with the conf file given by the DAG param ``conf`` (default: the environment
variable ``ACKER_CONF``, else the embedded local default). One run at a time per DAG
(``max_active_runs=1``); across the two DAGs, and whichever workers they land on, the acker's
writer lease (a Delta table) keeps one writer, and ``acker_maintain`` retries while a run holds it.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG, Param

DAG_ID = "batch_acker_run"
MAINTAIN_DAG_ID = "batch_acker_maintain"

_CONF_PARAM = Param(
    os.environ.get("ACKER_CONF", ""),
    type="string",
    description="acker conf file (TOML); empty for the embedded local default",
)
_INGEST_PARAM = Param(
    os.environ.get("ACKER_INGEST", ""),
    type="string",
    description="folder of event files to ingest before each run; empty for none",
)
# Paths reach the shell as variables, never pasted into the command; an option is passed only
# when its path is set.
_CONF_ENV = {"ACKER_CONF": "{{ params.conf }}"}
_CONF_OPTION = '${ACKER_CONF:+--conf "$ACKER_CONF"}'
_INGEST_ENV = {"ACKER_INGEST": "{{ params.ingest }}"}
_INGEST_OPTION = '${ACKER_INGEST:+--ingest "$ACKER_INGEST"}'
_START = datetime(2026, 1, 1)


def _acker_dag(
    dag_id: str,
    description: str,
    schedule: object,
    verb: str,
    ingests: bool = False,
    **task: Any,
) -> DAG:
    """One DAG, one run at a time, no catch-up, whose single task runs ``acker <verb>``;
    ``ingests``: with the ``ingest`` param's folder, if set."""
    params = {"conf": _CONF_PARAM, **({"ingest": _INGEST_PARAM} if ingests else {})}
    options = f"{_CONF_OPTION} {_INGEST_OPTION}" if ingests else _CONF_OPTION
    with DAG(
        dag_id=dag_id,
        description=description,
        schedule=schedule,
        start_date=_START,
        catchup=False,
        max_active_runs=1,
        params=params,
        tags=["batch-acker"],
    ) as dag:
        BashOperator(
            task_id=f"acker_{verb}",
            bash_command=f"acker {verb} {options}",
            env={**_CONF_ENV, **(_INGEST_ENV if ingests else {})},
            append_env=True,
            **task,
        )
    return dag


run_dag = _acker_dag(
    DAG_ID,
    "Process newly arrived ack events and tick the acker's clock",
    timedelta(minutes=5),
    "run",
    ingests=True,
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
