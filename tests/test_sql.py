"""The SQL loader's own logic: how a file of several statements is split, and which of the
acker's tables and views a query reads, and the settings a block of statements is planned with."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pipelines.sql import (
    _formattable,
    frames_read,
    load_sql,
    relations_read,
    relations_read_by,
    session_settings,
    split_statements,
)


@pytest.mark.fast
def test_statements_split_only_at_separators_outside_comments_strings_and_quoted_names() -> None:
    text = (
        "-- header; not a separator\n"
        "select ';' as a, `b;c` from t;\n"
        'select "x;y" as d -- trailing; comment\n'
        ";\n"
        "-- only a comment; after the last statement\n"
    )
    assert split_statements(text) == [
        "-- header; not a separator\nselect ';' as a, `b;c` from t",
        '\nselect "x;y" as d -- trailing; comment\n',
    ]


@pytest.mark.fast
def test_the_acker_and_the_views_include_the_one_input_contract() -> None:
    contract = load_sql("input_contract")
    rule = "when event_type = 'init' and spout_task is null then 'init_without_spout_task'"
    assert rule in contract
    for name in ("classify_batch_events", "create_tree_events_view", "create_outcome_summary_view"):
        text = load_sql(name)
        assert rule in text and "{{include" not in text, name


@pytest.mark.fast
def test_a_query_reads_the_relations_it_names_and_what_their_views_read() -> None:
    assert relations_read("select 1") == set()
    assert relations_read("select count(*) from acker.PENDING -- and `ticks`") == {
        "pending",
        "ticks",
    }
    assert relations_read("select * from replay_queue") == {
        "replay_queue",
        "outcomes",
        "completed",
        "failed",
        "expired",
        "late_events",
    }
    # status's figures: their comments name the latency view, which they do not read
    assert relations_read_by("summarize_status") == {
        "replay_queue",
        "stuck_trees",
        "outcomes",
        "completed",
        "failed",
        "expired",
        "late_events",
        "pending",
        "ticks",
        "quarantine",
        "ack_events",
    }


@pytest.mark.fast
def test_a_statement_reads_the_dataframes_it_names_outside_comments_and_quotes() -> None:
    text = "select '{a}', `{b}` from {events} join {state} on true -- {c}\n"
    assert frames_read(text) == {"events", "state"}


@pytest.mark.fast
def test_braces_that_name_no_dataframe_reach_spark_as_written() -> None:
    text = "select '{a}', map('k', 1)['k'] as \"{x}\" from {events} where s like '%}' -- {c}"
    formattable = _formattable(text)
    assert formattable.format(events="v") == text.replace("{events}", "v")


def test_settings_plan_the_statements_of_their_block_and_the_session_s_own_return_after(
    spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    """How the fold is planned with sort aggregates: the setting holds inside the block only,
    and a key the session did not set is unset again."""

    def plan() -> str:  # a new DataFrame each time: one keeps the plan it first got
        grouped = spark.range(1000).groupBy(F.col("id") % 300).agg(F.collect_set("id"))
        grouped.explain()
        return capsys.readouterr().out

    unset = "spark.acker.test.unsetKey"
    with session_settings(
        spark, {"spark.sql.execution.useObjectHashAggregateExec": "false", unset: "1"}
    ):
        inside = plan()
    after = plan()
    assert "SortAggregate" in inside and "ObjectHashAggregate" not in inside
    assert "ObjectHashAggregate" in after and "SortAggregate" not in after
    assert spark.conf.get(unset, None) is None
