"""Creating the acker's tables from the SQL files, and attaching them to a new session.

A local warehouse keeps its tables as folders (``<warehouse>/<schema>.db/<table>``) while the
embedded catalog lives only as long as the session; ``attach_tables`` registers the folders
again, so every process sees the same tables. On a cluster with a persistent catalog (Hive,
Unity Catalog) the tables are already there and attaching changes nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from delta.tables import DeltaTable
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from pipelines.config import Config
from pipelines.errors import NotInitialised
from pipelines.session import is_connect
from pipelines.sql import TABLES, VIEWS, quoted_table, run_sql, session_settings
from pipelines.warehouse_files import COMMIT_FILE, table_log, warehouse_files

__all__ = [
    "CHANGE_FEED_PROPERTY",
    "CHECKPOINT_INTERVALS",
    "CHECKPOINT_INTERVAL_PROPERTY",
    "IDEMPOTENCY_WINDOW",
    "IDEMPOTENCY_WINDOW_PROPERTY",
    "INGESTED_TABLES",
    "REBORN_ENTRIES_PROPERTY",
    "STATISTICS_COLUMNS",
    "STATISTICS_COLUMNS_PROPERTY",
    "LogHead",
    "LogHeads",
    "apply_table_properties",
    "attach_tables",
    "create_tables",
    "ensure_table",
    "log_heads",
    "missing_tables",
    "needs_upgraded_tables",
    "schema_uri",
    "snapshots_warmed_beside",
    "table_bytes",
    "table_location",
    "table_properties",
    "table_property",
    "table_uri",
    "upgrade_tables",
    "warm_snapshots",
]

# `acker ingest` marks each file's appends with the file's SHA-256 as a Delta transaction id;
# Delta keeps such ids this long, then drops them from the log (and a file offered again is
# ingested again). Without a limit the log keeps one id per file ingested, for ever.
IDEMPOTENCY_WINDOW = "interval 30 days"
INGESTED_TABLES = ("ack_events", "quarantine")
IDEMPOTENCY_WINDOW_PROPERTY = "delta.setTransactionRetentionDuration"

# Delta writes a table's checkpoint in the commit whose version is a multiple of its interval
# (10 unless set), about 1.1 s each whatever the table's size, and a scheduled run commits to
# most tables once or twice: at ten, every tenth run wrote the checkpoints of ten tables (a
# 5-minute cycle at 200 trees/s 53 s against 43-45 s). Intervals near a hundred, each its own
# prime, write about one checkpoint in seven runs, seldom two in one; a new process replays
# up to a hundred commit files instead, about 0.1 s more a table (measured 29 Nov).
CHECKPOINT_INTERVALS = {
    "ack_events": 71,
    "pending": 73,
    "completed": 79,
    "failed": 83,
    "expired": 89,
    "late_events": 97,
    "quarantine": 101,
    "batches": 103,
    "ticks": 107,
    "held_events": 109,
    "writer_lease": 113,
}
CHECKPOINT_INTERVAL_PROPERTY = "delta.checkpointInterval"

# The columns whose minimum, maximum and null count Delta records for each file it writes
# (its default: the first 32), for the tables that take every event: the ones a read skips
# files by (held_events: a slice's stream batch and time; ack_events: the time analysts ask
# about; an anchor id is random, so every file spans them all). Recording the text columns too
# cost an append of a 5-minute cycle (430,000 events) 0.6-0.7 s more, 2.3-2.5 s against
# 1.6-1.9 s warm and 3.3 s against 1.8-2.0 s in a new process (29 Nov), in each of the two
# tables a cycle writes its events to.
STATISTICS_COLUMNS = {
    "ack_events": "event_time",
    "held_events": "stream_batch_id,event_time,arrived_at",
}
STATISTICS_COLUMNS_PROPERTY = "delta.dataSkippingStatsColumns"

# Delta gives a table it creates the session's `properties.defaults.<key>` for each `delta.<key>`.
_NEW_TABLE_DEFAULT = "spark.databricks.delta.properties.defaults."


def table_location(config: Config, table: str) -> Path:
    """Where a local warehouse keeps ``table``: Spark's managed-table layout."""
    return schema_location(config) / table


def schema_location(config: Config) -> Path:
    """Where a local warehouse keeps the schema's tables."""
    return config.warehouse_path / f"{config.warehouse.schema}.db"


def schema_uri(config: Config) -> str:
    """Where the warehouse keeps the schema's tables, as Spark names it (local or not)."""
    return f"{config.warehouse_uri}/{config.warehouse.schema}.db"


def table_uri(config: Config, table: str) -> str:
    """Where the warehouse keeps ``table``, as Spark names it (local or not)."""
    return f"{schema_uri(config)}/{table}"


def warm_snapshots(spark: SparkSession, config: Config, tables: Collection[str]) -> None:
    """Have Delta load each of ``tables``' current snapshot and its list of files into its cache,
    where the statements that read the tables later find them (Delta updates a cached snapshot
    by the commits made since). A catalog's tables by name, where the catalog keeps them; a
    warehouse folder's by path, since this session may not have registered them yet."""
    for table in tables:
        if config.warehouse.catalog:
            found = spark.table(config.qualified(table))
        else:
            found = spark.read.format("delta").load(table_uri(config, table))
        found.inputFiles()


@contextmanager
def snapshots_warmed_beside(
    spark: SparkSession, config: Config, tables: Collection[str]
) -> Iterator[None]:
    """:func:`warm_snapshots` of ``tables`` in a thread of its own while the ``with`` block
    runs, which ends only once the thread has; a failure there is left to the block's own
    statements on the table to report. No thread for no tables, nor over Spark Connect (not
    measured there)."""
    if not tables or is_connect(spark):
        yield
        return
    with ThreadPoolExecutor(1, thread_name_prefix="acker-warm") as beside:
        beside.submit(warm_snapshots, spark, config, tables)
        yield


def _use_schema(spark: SparkSession, config: Config) -> None:
    if config.warehouse.catalog:
        spark.catalog.setCurrentCatalog(config.warehouse.catalog)
    spark.catalog.setCurrentDatabase(config.warehouse.schema)


def attach_tables(
    spark: SparkSession,
    config: Config,
    views: Collection[str] = tuple(VIEWS),
    tables: Collection[str] = tuple(TABLES),
) -> list[str]:
    """Register ``tables`` (by default all) of the warehouse in this session, and ``views`` over
    them (jobs that only write read none: 7 statements spared); return the acker tables still
    missing (none once the warehouse is initialised), whether registered or not."""
    if config.warehouse.catalog:
        run_sql(spark, config, "create_schema", schema=config.qualified_schema)
    else:
        location = schema_uri(config)
        run_sql(
            spark,
            config,
            "create_local_schema",
            literals={"location": location},
            schema=config.qualified_schema,
        )
    for table in tables:
        name = config.qualified(table)
        if not spark.catalog.tableExists(name) and _has_log(spark, config, table):
            spark.catalog.createTable(name, path=table_uri(config, table), source="delta")
    _use_schema(spark, config)
    missing = missing_tables(spark, config)
    if not missing:
        _create_views(spark, config, views)
    return missing


LogHead = tuple[str, int, int]
"""A Delta log's newest commit file: its name, size and modification time in nanoseconds,
which every commit to the table replaces."""
LogHeads = tuple[LogHead, ...]


def log_heads(
    config: Config, tables: Collection[str], known: Sequence[Sequence[Any]] | None = None
) -> LogHeads | None:
    """The newest commit file of each of ``tables``' Delta logs, probed from ``known`` (heads
    taken earlier, in the same order) where given (:meth:`WarehouseFiles.newest_commit`);
    ``None`` where the logs are not files this process reads (:func:`warehouse_files`), a
    table is missing, or the store cannot answer."""
    files = warehouse_files(config)
    if files is None:
        return None
    hints = list(known) if known is not None else [()] * len(tables)
    heads = []
    try:
        for table, hint in zip(tables, hints, strict=True):
            newest = files.newest_commit(table_log(config, table), _version_of(hint))
            if newest is None:
                return None
            name, (size, mtime_ns) = newest
            heads.append((name, size, mtime_ns))
    except OSError:
        return None
    return tuple(heads)


def _version_of(head: Sequence[Any]) -> int | None:
    """The version of a head as a record keeps it, ``None`` if it is not one."""
    if len(head) != 3 or not COMMIT_FILE.fullmatch(str(head[0])):
        return None
    return int(str(head[0])[:20])


def table_bytes(config: Config, table: str) -> int | None:
    """The bytes of the data files ``table``'s newest version holds, from the checksum file
    Delta writes beside each commit; 0 for a table not yet created, ``None`` where the log is
    not files this process reads or its newest commit has no readable checksum."""
    files = warehouse_files(config)
    if files is None:
        return None
    log = table_log(config, table)
    try:
        newest = files.newest_commit(log)
        if newest is None:
            return 0
        checksum = files.checksum(log, newest[0])
    except OSError:
        return None
    size = None if checksum is None else checksum.get("tableSizeBytes")
    return size if isinstance(size, int) else None


def ensure_table(
    spark: SparkSession, config: Config, table: str, sql_file: str | None = None
) -> None:
    """Register ``table`` in this session where a local warehouse holds it, else create it
    from ``acker_sql/<sql_file>.sql`` (if given) where it does not exist: a table outside
    TABLES, which the acker makes where it first needs it."""
    name = config.qualified(table)
    if spark.catalog.tableExists(name):
        return
    if _has_log(spark, config, table):
        spark.catalog.createTable(name, path=table_uri(config, table), source="delta")
    elif sql_file is not None:
        with _properties_of_new(spark, table):
            run_sql(spark, config, sql_file, table=name)


def _new_table_properties(table: str) -> dict[str, str]:
    """The properties the acker gives ``table`` as it creates it, by their Delta names."""
    properties = {CHECKPOINT_INTERVAL_PROPERTY: str(CHECKPOINT_INTERVALS[table])}
    if table in STATISTICS_COLUMNS:
        properties[STATISTICS_COLUMNS_PROPERTY] = STATISTICS_COLUMNS[table]
    return properties


@contextmanager
def _properties_of_new(spark: SparkSession, table: str) -> Iterator[None]:
    """Have the table created in the ``with`` block take ``table``'s properties
    (:func:`_new_table_properties`)."""
    defaults = {
        _NEW_TABLE_DEFAULT + key.removeprefix("delta."): value
        for key, value in _new_table_properties(table).items()
    }
    with session_settings(spark, defaults):
        yield


def apply_table_properties(spark: SparkSession, config: Config, tables: Collection[str]) -> None:
    """Give ``tables`` that an older acker created the properties this acker gives each table as
    it creates it: the checkpoint interval (:data:`CHECKPOINT_INTERVALS`) and the columns
    with file statistics (:data:`STATISTICS_COLUMNS`). A value a user set stays."""
    for table in tables:
        _set_where_unset(spark, config, table, _new_table_properties(table))


def _set_where_unset(
    spark: SparkSession, config: Config, table: str, properties: dict[str, str]
) -> None:
    """Set each of ``properties`` (by Delta name) that ``table`` has none of."""
    present = table_properties(spark, config, table)
    for key, value in properties.items():
        if key not in present:
            literals = {"key": key, "value": value}
            run_sql(spark, config, "set_table_property", literals, table=config.qualified(table))


def _has_log(spark: SparkSession, config: Config, table: str) -> bool:
    """Whether the warehouse (not a catalog) holds ``table`` as a Delta folder, registered or
    not: a local folder is looked at, an object store's asked through Delta."""
    if config.warehouse.catalog:
        return False
    if config.warehouse_is_local:
        return (table_location(config, table) / "_delta_log").is_dir()
    return bool(DeltaTable.isDeltaTable(spark, table_uri(config, table)))


def create_tables(spark: SparkSession, config: Config) -> list[str]:
    """Create every table that does not exist yet (``acker init``); return the ones created."""
    created = attach_tables(spark, config, views=())
    window = {"idempotency_window": IDEMPOTENCY_WINDOW}
    for table in created:
        with _properties_of_new(spark, table):
            run_sql(spark, config, TABLES[table], literals=window, table=config.qualified(table))
    apply_table_properties(spark, config, [table for table in TABLES if table not in created])
    for table in INGESTED_TABLES:
        if table not in created:
            _set_where_unset(
                spark, config, table, {IDEMPOTENCY_WINDOW_PROPERTY: IDEMPOTENCY_WINDOW}
            )
    upgrade_tables(spark, config)
    _create_views(spark, config)  # after the upgrade: the views read its columns
    return created


CHANGE_FEED_PROPERTY = "delta.enableChangeDataFeed"
# Set on `pending` by the acker that creates it (create_pending.sql): none of its entries was
# opened for an anchor with an outcome, so ticks need not look for such entries.
REBORN_ENTRIES_PROPERTY = "batchacker.reborn_entries"

# Columns newer than some warehouses: held_events' for the event_time stager's quarantine
# reason and the processing_time arrival, the batch log's for a pass over several epochs, and
# late_events' and the ticks' for entries a tick sends to late_events instead of expired.
_ADDED_COLUMNS = (
    ("held_events", "quarantine_reason", "add_held_quarantine_reason"),
    ("held_events", "arrived_at", "add_held_arrived_at"),
    ("batches", "through_epoch", "add_batches_through_epoch"),
    ("late_events", "tick_epoch", "add_late_events_tick_epoch"),
    ("ticks", "late_no_init", "add_ticks_late_no_init"),
)
_UPGRADED = {table for table, _, _ in _ADDED_COLUMNS}


def upgrade_tables(spark: SparkSession, config: Config) -> None:
    """Add what a newer acker needs to tables an older one created: the columns of
    _ADDED_COLUMNS, and the change data feed of ack_events (which dates each arrival). Cheap
    when there is nothing to add (a look at the schemas and at the properties), so every
    writer runs it as it starts."""
    for table, _, sql_file in _missing_columns(spark, config):
        run_sql(spark, config, sql_file, table=config.qualified(table))
    if table_property(spark, config, "ack_events", CHANGE_FEED_PROPERTY) != "true":
        run_sql(spark, config, "enable_change_feed", table=config.qualified("ack_events"))


def _missing_columns(spark: SparkSession, config: Config) -> list[tuple[str, str, str]]:
    """The entries of _ADDED_COLUMNS whose column the warehouse's table lacks."""
    columns = {table: spark.table(config.qualified(table)).columns for table in _UPGRADED}
    return [added for added in _ADDED_COLUMNS if added[1] not in columns[added[0]]]


def table_property(spark: SparkSession, config: Config, table: str, key: str) -> str | None:
    """The value of ``table``'s property ``key`` (``None`` if unset)."""
    return table_properties(spark, config, table).get(key)


def table_properties(spark: SparkSession, config: Config, table: str) -> dict[str, str]:
    """``table``'s properties, by name."""
    rows = spark.sql(f"show tblproperties {quoted_table(config, table)}").collect()
    return {row["key"]: row["value"] for row in rows}


def _create_views(
    spark: SparkSession, config: Config, views: Collection[str] = tuple(VIEWS)
) -> None:
    """Create ``views`` in the order of VIEWS, where a view comes after the views it reads."""
    with needs_upgraded_tables(spark, config):
        for view, sql_file in VIEWS.items():
            if view in views:
                run_sql(spark, config, sql_file, view=config.qualified(view))


@contextmanager
def needs_upgraded_tables(spark: SparkSession, config: Config) -> Iterator[None]:
    """Where a reader's statement fails over tables an older acker made, which lack a column
    this one reads (a writer adds it as it starts), raise :class:`NotInitialised` naming it."""
    try:
        yield
    except AnalysisException:
        missing = _missing_columns(spark, config)
        if not missing:
            raise
        table, column, _ = missing[0]
        raise NotInitialised(
            f"{config.qualified(table)} has no column {column}: an older acker made these "
            "tables; run `acker init` to upgrade them"
        ) from None


def missing_tables(spark: SparkSession, config: Config) -> list[str]:
    """The acker tables neither this session's catalog knows nor the warehouse holds."""
    return [
        table
        for table in TABLES
        if not spark.catalog.tableExists(config.qualified(table))
        and not _has_log(spark, config, table)
    ]
