"""Spark Connect: edge cases of tests/test_scenarios.py that between them take the engine's steps
(a stream batch, the MERGE, completion, ticks and expiry, late events, a refused run),
run in a process of their own whose sessions are Spark Connect clients of an embedded Connect
server, give the outcomes those tests expect; and the client-side rendering of SQL parameters
that Connect needs."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pipelines.config import ConfigError, parse_config
from pipelines.sql import _inline_args, sql_literal

ROOT = Path(__file__).resolve().parent.parent

# A subset: the whole file over Connect was the suite's longest test (16 min of a CI run). These
# three take between them a stream batch, the MERGE (inserting and renewing entries), completion,
# ticks one at a time and several in one call, expiry, late events, and a refused run's error as
# a Connect client receives it; the other cases repeat these paths with other events.
CONNECT_SCENARIOS = (
    "test_expiry_exactly_at_the_buckets_th_tick[activity]",
    "test_late_ack_after_completion_and_after_expiry",
    "test_a_lost_checkpoint_is_refused_with_the_reason_and_changes_nothing",
)


def test_core_scenarios_give_the_same_outcomes_over_spark_connect(tmp_path: Path) -> None:
    report = tmp_path / "connect.xml"
    env = {**os.environ, "ACKER_TEST_SPARK_REMOTE": "local[2]"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += [
        f"--junitxml={report}",
        *(f"tests/test_scenarios.py::{name}" for name in CONNECT_SCENARIOS),
    ]
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-3000:]
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None
    counts = {key: int(suite.attrib[key]) for key in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": len(CONNECT_SCENARIOS), "failures": 0, "errors": 0, "skipped": 0}


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        (None, "null"),
        (True, "true"),
        (-3, "(-3)"),
        (2**40, "(1099511627776)"),
        (0.5, "(0.5D)"),
        ("it's", "'it\\'s'"),
    ],
)
@pytest.mark.fast
def test_sql_literal_renders_each_parameter_type(value: object, literal: str) -> None:
    assert sql_literal(value) == literal


@pytest.mark.fast
@pytest.mark.parametrize("value", [float("nan"), b"bytes", [1, 2]])
def test_sql_literal_refuses_values_it_cannot_render(value: object) -> None:
    with pytest.raises(TypeError, match="no SQL literal"):
        sql_literal(value)


@pytest.mark.fast
def test_inlined_parameters_leave_comments_strings_identifiers_and_casts_alone() -> None:
    text = "select x::int, ':a', `b:a`, :a -- :a\nfrom identifier(:t) where y = :b"
    assert _inline_args(text, {"a": 7, "t": "s.t", "b": "z"}) == (
        "select x::int, ':a', `b:a`, (7) -- :a\nfrom identifier('s.t') where y = 'z'"
    )


@pytest.mark.fast
@pytest.mark.parametrize("remote", ["http://host:15002", "yarn"])
def test_a_remote_that_is_neither_local_nor_sc_is_refused(remote: str) -> None:
    with pytest.raises(ConfigError, match=f"spark.remote = '{remote}'"):
        parse_config({"spark": {"remote": remote}})
