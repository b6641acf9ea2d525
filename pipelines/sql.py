"""Loads the SQL statements shipped in ``acker_sql`` and runs them with bound parameters.

Every value reaches Spark as a named parameter (``:batch_id``); table names too, through
``identifier(:pending)``, after one identifier check in the configuration. The one exception is
Delta's own commands (OPTIMIZE, VACUUM, DESCRIBE HISTORY and DETAIL), whose grammar takes no
``identifier(:param)``: they get the checked name back-quoted by :func:`quoted_table`.

Over Spark Connect, Delta's SQL parser leaves every parameter unbound (the same Delta bug the
session's ``parameterSubstitution.constantsOnly`` setting works around in a classic session does
not reach the Connect server's path), so :func:`sql_with_args` renders each value as a typed SQL
literal in the client instead.

A statement that reads a DataFrame of the caller's (an earlier step's result) names it
``{name}``, PySpark's own notation for ``spark.sql(text, name=df)``, and gets it as a parameter
of the same name: it is bound for that one statement, never left in the session for another.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import cache
from importlib import resources
from typing import Any, TypeVar

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from pipelines.config import Config
from pipelines.session import COMPILED_QUERIES, EVENT_QUERIES_COMPILED, is_connect

__all__ = [
    "OUTCOME_TABLES",
    "TABLES",
    "VIEWS",
    "aggregate_row",
    "checkpoint_counted",
    "frames_read",
    "load_sql",
    "quoted_table",
    "relations_read",
    "relations_read_by",
    "row_as",
    "run_sql",
    "run_sql_figures",
    "run_sql_row",
    "session_settings",
    "split_statements",
    "sql_literal",
    "sql_with_args",
    "string_literal",
    "table_args",
]

# The acker's tables, in creation order, each with the SQL file that creates it.
TABLES: dict[str, str] = {
    "ack_events": "create_ack_events",
    "pending": "create_pending",
    "completed": "create_outcome_table",
    "failed": "create_outcome_table",
    "expired": "create_outcome_table",
    "late_events": "create_late_events",
    "quarantine": "create_quarantine",
    "batches": "create_batches",
    "ticks": "create_ticks",
    "held_events": "create_held_events",
}

# The tables that hold an anchor's one outcome.
OUTCOME_TABLES = ("completed", "expired", "failed")

# The analyst views, in creation order (later ones read `outcomes`), each with its SQL file.
VIEWS: dict[str, str] = {
    "outcomes": "create_outcomes_view",
    "outcome_summary": "create_outcome_summary_view",
    "latency": "create_latency_view",
    "stuck_trees": "create_stuck_trees_view",
    "replay_queue": "create_replay_queue_view",
    "tree_events": "create_tree_events_view",
    "pending_history": "create_pending_history_view",
}

_WORD = re.compile(r"[A-Za-z_]\w*")


def _names_in(text: str) -> set[str]:
    return {word.lower() for word in _WORD.findall(text)}


def relations_read(query: str) -> set[str]:
    """The acker's tables and views that ``query`` may read: those it names, and what those
    views read in turn. A name anywhere in the text counts (in a comment too), so the set may
    hold more than the query reads, never less."""
    views = list(VIEWS)
    named = _names_in(query) & (TABLES.keys() | VIEWS.keys())
    # A view reads tables and the views before it: one pass from the last view back suffices.
    for position in reversed(range(len(views))):
        if views[position] in named:
            code = _code_of(VIEWS[views[position]])
            named |= _names_in(code) & (TABLES.keys() | set(views[:position]))
    return named


def relations_read_by(name: str) -> set[str]:
    """The acker's tables and views that ``acker_sql/<name>.sql`` reads (its comments, which
    name others, left out)."""
    return relations_read(_code_of(name))


def _code_of(name: str) -> str:
    return _COMMENT.sub("", load_sql(name))


# A comment, a quoted string or a quoted identifier: text that is left as it is.
_LEXEME = r"--[^\n]*|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`"
# A lexeme, or a named parameter (its name in group 1).
_LEXEME_OR_PARAMETER = re.compile(_LEXEME + r"|(?<![:\w]):([A-Za-z_]\w*)")
# A lexeme, or a statement separator (group 1).
_LEXEME_OR_SEMICOLON = re.compile(_LEXEME + r"|(;)")
_COMMENT = re.compile(r"--[^\n]*")
# A lexeme, a DataFrame the statement reads (its name in group 1), or a brace (group 2).
_LEXEME_FRAME_OR_BRACE = re.compile(_LEXEME + r"|\{([A-Za-z_]\w*)\}|([{}])")


_INCLUDE = re.compile(r"\{\{include (\w+)\}\}")


@cache
def load_sql(name: str) -> str:
    """The text of ``acker_sql/<name>.sql``, each ``{{include <part>}}`` in it replaced by the
    text of ``acker_sql/<part>.sql`` (an expression, in parentheses, its header left out)."""
    text = resources.files("acker_sql").joinpath(f"{name}.sql").read_text(encoding="utf-8")
    return _INCLUDE.sub(lambda found: f"({_part(found[1])})", text)


def _part(name: str) -> str:
    lines = load_sql(name).strip().splitlines()
    return "\n".join(line for line in lines if not line.startswith("--"))


def _parameters(text: str) -> set[str]:
    return {found[1] for found in _LEXEME_OR_PARAMETER.finditer(text) if found[1]}


def string_literal(value: str) -> str:
    """``value`` as a Spark SQL string literal, for the few clauses that take no parameter."""
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


def sql_literal(value: object) -> str:
    """``value`` as a Spark SQL literal of the type a bound parameter of it would have."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"({value})"
    if isinstance(value, float) and math.isfinite(value):
        return f"({value!r}D)"
    if isinstance(value, str):
        return string_literal(value)
    raise TypeError(f"no SQL literal for {value!r} ({type(value).__name__})")


def _inline_args(text: str, args: dict[str, Any]) -> str:
    def render(match: re.Match[str]) -> str:
        name = match.group(1)
        return match.group(0) if name is None else sql_literal(args[name])

    return _LEXEME_OR_PARAMETER.sub(render, text)


def frames_read(text: str) -> set[str]:
    """The names of the DataFrames ``text`` reads: each ``{name}`` outside comments and quotes."""
    return {found[1] for found in _LEXEME_FRAME_OR_BRACE.finditer(text) if found[1]}


def _formattable(text: str) -> str:
    """``text`` as PySpark's SQL formatter takes it: every brace doubled but those of a
    ``{name}`` the statement reads."""

    def render(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return match.group(0)
        return match.group(0).replace("{", "{{").replace("}", "}}")

    return _LEXEME_FRAME_OR_BRACE.sub(render, text)


def sql_with_args(
    spark: SparkSession,
    text: str,
    args: dict[str, Any],
    frames: Mapping[str, DataFrame] | None = None,
) -> DataFrame:
    """``spark.sql(text, args=args)``; over Spark Connect with the values inlined as literals.
    Each ``{name}`` in ``text`` reads ``frames[name]``, for this statement alone: PySpark binds
    it as a temp view of a unique name and drops it once the statement is analysed (over Spark
    Connect, as a relation sent with the statement, where a checkpoint among ``frames`` lasts
    only as long as its DataFrame object: the caller keeps it while the result is used)."""
    if is_connect(spark):
        text, args = _inline_args(text, args), {}
    if not frames:
        return spark.sql(text, args=args)
    # Spark's V2 writer (``writeTo``) analyses a DataFrame's parsed plan again, where each frame
    # is the name of a view dropped since; a projection over the result carries its analysed plan.
    return spark.sql(_formattable(text), args=args, **frames).select("*")


def quoted_table(config: Config, table: str) -> str:
    """The table's qualified name with each part back-quoted, e.g. ```acker`.`pending```; every
    part passed the configuration's identifier check."""
    return ".".join(f"`{part}`" for part in config.qualified(table).split("."))


def table_args(config: Config) -> dict[str, str]:
    """Named parameters for every table and view: ``{"pending": "acker.pending", ...}``."""
    return {name: config.qualified(name) for name in [*TABLES, *VIEWS]}


def _bound(
    config: Config, name: str, text: str, params: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, DataFrame]]:
    """The parameters ``text`` (of ``acker_sql/<name>.sql``) uses, with their values, and the
    DataFrames it reads, by name."""
    wanted, read = _parameters(text), frames_read(text)
    available = {**table_args(config), **params}
    frames = {key: value for key, value in params.items() if isinstance(value, DataFrame)}
    missing = sorted((wanted - set(available)) | (read - set(frames)))
    if missing:
        raise KeyError(f"{name}.sql needs parameters {missing}")
    return {key: available[key] for key in sorted(wanted)}, {key: frames[key] for key in read}


def run_sql(
    spark: SparkSession,
    config: Config,
    name: str,
    literals: dict[str, str] | None = None,
    **params: Any,
) -> DataFrame:
    """Run ``acker_sql/<name>.sql`` with its parameters bound; table names come from ``config``.
    ``literals`` fill ``{{name}}`` slots where Spark's grammar takes no parameter marker
    (LOCATION), each rendered by :func:`string_literal`.

    A DataFrame among ``params`` is what the statement's ``{name}`` of that name reads.

    Examples: ``run_sql(spark, config, "delete_expired", cutoff=4)``,
    ``run_sql(spark, config, "select_resolved", batch_state=state, outcome="failed")``.
    """
    text = load_sql(name)
    for key, value in (literals or {}).items():
        text = text.replace("{{" + key + "}}", string_literal(value))
    return sql_with_args(spark, text, *_bound(config, name, text, params))


@contextmanager
def session_settings(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Have the statements the ``with`` block plans use ``settings``, then restore the
    session's own (a query is planned when an action runs it, inside the block)."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, own in before.items():
            if own is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, own)


@contextmanager
def compiled_for_events(spark: SparkSession) -> Iterator[None]:
    """Have the block's statements, which read a batch's events, compiled where the session
    interprets its others (:data:`pipelines.session.EVENT_QUERIES_COMPILED`); elsewhere the
    session's own settings hold. The settings are the session's: a thread beside the block
    needs a session of its own (:func:`session_compiling_events`)."""
    if not compiles_events(spark):
        yield
        return
    with session_settings(spark, COMPILED_QUERIES):
        yield


def session_compiling_events(spark: SparkSession) -> SparkSession:
    """For work over many events in a thread beside others: where ``spark`` interprets its
    queries but compiles those over events, a new session of the same Spark whose queries are
    compiled; else ``spark``."""
    if not compiles_events(spark):
        return spark
    compiling = spark.newSession()
    for key, value in COMPILED_QUERIES.items():
        compiling.conf.set(key, value)
    return compiling


def compiles_events(spark: SparkSession) -> bool:
    """Whether ``spark`` interprets its queries but compiles those over a batch's events."""
    return not is_connect(spark) and spark.conf.get(EVENT_QUERIES_COMPILED, "false") == "true"


def split_statements(text: str) -> list[str]:
    """The statements of ``text``, split at each ``;`` outside comments, strings and quoted
    identifiers; parts holding only comments and blanks are left out."""
    parts, start = [], 0
    for found in _LEXEME_OR_SEMICOLON.finditer(text):
        if found[1]:
            parts.append(text[start : found.start()])
            start = found.end()
    parts.append(text[start:])
    return [part for part in parts if _COMMENT.sub("", part).strip()]


def run_sql_figures(
    spark: SparkSession, config: Config, name: str, workers: int = 4, **params: Any
) -> dict[str, Any]:
    """Run the statements of ``acker_sql/<name>.sql``, each returning one row, side by side in
    ``workers`` threads (Spark plans and runs them concurrently); return all their columns."""
    statements = split_statements(load_sql(name))

    def first_row(text: str) -> dict[str, Any]:
        row = sql_with_args(spark, text, *_bound(config, name, text, params)).first()
        assert row is not None, f"a statement of {name}.sql returned no row"
        return row.asDict()

    with ThreadPoolExecutor(workers) as pool:
        rows = list(pool.map(first_row, statements))
    return {key: value for row in rows for key, value in row.items()}


Shape = TypeVar("Shape")


def row_as(values: Mapping[str, Any], shape: type[Shape], step: str) -> Shape:
    """``values``, the one row of ``step`` by column, as ``shape``: a dataclass whose fields
    are exactly the step's columns. A column renamed on one side only fails here, naming both
    sides, not later as a missing key."""
    fields = [field.name for field in dataclasses.fields(shape)]  # type: ignore[arg-type]
    if set(values) != set(fields):
        raise TypeError(
            f"{step} returns the columns {sorted(values)}, "
            f"but {shape.__name__} reads {sorted(fields)}"
        )
    return shape(**values)


def aggregate_row(df: DataFrame, shape: type[Shape], aggregates: Sequence[str]) -> Shape:
    """The one row of ``aggregates`` (SQL aggregate expressions, each naming its column) over
    ``df``, as ``shape`` (see :func:`row_as`)."""
    row = df.selectExpr(*aggregates).first()
    assert row is not None  # an aggregate without grouping returns one row
    return row_as(row.asDict(), shape, shape.__name__)


def checkpoint_counted(
    df: DataFrame, shape: type[Shape], aggregates: Sequence[str], observed: bool
) -> tuple[DataFrame, Shape]:
    """``df`` checkpointed, and the one row of ``aggregates`` over it (:func:`aggregate_row`).
    ``observed``, the checkpoint computes them as it writes the rows, in its last stage, where
    each task's counts are added once (not over Spark Connect, which reports no observation of
    a checkpoint); else a statement reads the rows again after it."""
    if not observed:
        checkpoint = df.localCheckpoint()
        return checkpoint, aggregate_row(checkpoint, shape, aggregates)
    counted = Observation()
    checkpoint = df.observe(counted, *map(F.expr, aggregates)).localCheckpoint()
    return checkpoint, row_as(counted.get, shape, shape.__name__)


def run_sql_row(
    spark: SparkSession, config: Config, name: str, shape: type[Shape], **params: Any
) -> Shape:
    """The one row of ``acker_sql/<name>.sql`` (of all its statements, as
    :func:`run_sql_figures` runs them) as ``shape`` (see :func:`row_as`)."""
    return row_as(run_sql_figures(spark, config, name, **params), shape, f"{name}.sql")
