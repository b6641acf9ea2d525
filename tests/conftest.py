"""One Spark + Delta session per test process; every test gets its own warehouse and schema."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipelines.config import Config, parse_config
from pipelines.engine import START
from pipelines.jobs import open_tables
from pipelines.run_record import save_run_record
from pipelines.session import INTERPRETED_QUERIES, build_session, is_connect
from pipelines.tables import create_tables
from tests.acker_harness import Harness, copy_warehouse

# Settings for many tiny micro-batches on a small machine.
TEST_SPARK_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
    "spark.driver.memory": "3g",
    # One session runs the whole suite over ~1,500 tables: Delta's default of 10,000 cached
    # table logs (each holding its snapshot state) filled a 2 GB heap near the end.
    "spark.databricks.delta.delta.log.cacheSize": "64",
    # Rows in the tens: compiling generated code for every new plan costs more than it saves
    # (a micro-batch of a few events: 10-11 s interpreted against 13-15 s compiled).
    **INTERPRETED_QUERIES,
}

_schema_numbers = itertools.count()


# Set by tests/test_connect.py: run the tests of this process through an embedded Spark
# Connect server instead of a classic session.
SPARK_REMOTE = os.environ.get("ACKER_TEST_SPARK_REMOTE", "")


# The longest tests, most of which start JVMs of their own, go first: the two workers then share
# them out early instead of one worker ending the run on one of them alone (the crash soak was
# the last 4 minutes of a fresh-clone run, with the other core idle).
_LONGEST_FIRST = (
    "tests/test_connect.py",
    "tests/test_cluster.py",
    "tests/test_benchmarks.py",
    "tests/test_object_store.py",
    "tests/test_continuous.py",
    "tests/test_notebooks.py",
    "tests/test_storm_conformance.py",
    "tests/test_event_time.py::test_a_backfill_equals_the_live_run",
    "tests/test_crash_recovery.py::test_random_crashes",
    "tests/test_crash_recovery.py::test_killed_at_each_step_in_turn",
    "tests/test_docs.py::test_the_readme_tour",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not item.nodeid.startswith(_LONGEST_FIRST))


def make_config(warehouse: Path, schema: str | None = None, **acker: object) -> Config:
    """A validated config for one test: its own warehouse folder and schema name (``schema``, or
    one numbered in this process)."""
    return parse_config(
        {
            "acker": dict(acker),
            "warehouse": {
                "path": str(warehouse),
                "schema": schema or f"acker_t{next(_schema_numbers)}",
            },
            "spark": {"conf": TEST_SPARK_CONF, "remote": SPARK_REMOTE},
        }
    )


# A test worker's JVM: the optimising compiler kept, for code ten times hotter than Java's
# defaults ask. With the defaults a worker's JVM spent about 40% of its CPU compiling code most
# tests run a few times; stopped at the first tier, the files a worker runs last were slower
# (decisions.md, 2 Dec).
TEST_JVM_OPTIONS = (
    "-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
    "-XX:Tier4CompileThreshold=60000 -XX:Tier4BackEdgeThreshold=400000 "
    "-XX:+UseParallelGC -XX:NewRatio=1"
)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    session = build_session(
        make_config(tmp_path_factory.mktemp("session-warehouse")), jvm_options=TEST_JVM_OPTIONS
    )
    assert is_connect(session) == bool(SPARK_REMOTE)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def blank_warehouse(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Config:
    """The tables `acker init` creates, made once per test process: a test's acker starts from
    a copy of them, attached under its own schema (0.6 s against 2 s to create them)."""
    config = make_config(tmp_path_factory.mktemp("blank") / "warehouse", "acker_blank")
    create_tables(spark, config)
    return config


@pytest.fixture
def acker_factory(spark: SparkSession, tmp_path: Path, blank_warehouse: Config):  # type: ignore[no-untyped-def]
    """Build a fresh acker (a copy of the blank warehouse) with the given [acker] settings."""
    made = itertools.count()

    def build(**acker: object) -> Harness:
        config = make_config(tmp_path / f"warehouse{next(made)}", **acker)
        copy_warehouse(blank_warehouse, config)
        open_tables(spark, config)
        # as `acker init` leaves new tables: their position recorded
        save_run_record(config, START, None)
        return Harness(spark, config)

    return build


@pytest.fixture
def acker(acker_factory) -> Harness:  # type: ignore[no-untyped-def]
    """A fresh acker with the default semantics (3 buckets, refresh on reset)."""
    return acker_factory()
