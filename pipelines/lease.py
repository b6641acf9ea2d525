"""One writer per acker wherever its tables are: a lease in the Delta table ``writer_lease``,
and a fencing token on the writer's commits.

A writer (``run``, ``tick``, ``demo``, ``maintain``) claims the lease before its first write and
releases it when it ends. The lease is one row; a claim sets it only if its token is still the
one the claimer read, and rewrites the table's one file, so of two claims made at once Delta's
optimistic concurrency commits one and fails the other: no file system lock is involved, and
it holds across machines and on an object store. A classic session commits that swap of files
itself, as a Delta transaction of its JVM; a Spark Connect session, or a catalog's table, runs
an UPDATE (update_writer_lease.sql). A
claim succeeds where the lease is free (released), has lapsed (not renewed for ``lease_s``), or
is held by a process of this host that is no longer alive; otherwise the claimer is refused
with :class:`WriterBusy` naming the holder, or waits for it.

Each claim takes the next token. Before every write the writer renews its lease once a third
of ``lease_s`` has passed since it last did, by the same compare-and-set on its token; a writer
that finds another token (its lease lapsed and another claimed it) stops with
:class:`WriterFenced`. Renewing cannot stop a writer paused between its renewal and its next
commit, so a claim that takes over a lapsed lease from a live or unknown holder first fences
every table the writer writes: a table property change, which fails any commit the old holder
has in flight, and on the tables the writer changes by MERGE or DELETE a Delta transaction id
carrying the new token, which Delta compares inside each such statement's own transaction with
the token the statement carries (:func:`dml_fence`), skipping the statements of older tokens.
What remains open is an append the old holder starts after the takeover, having renewed less
than ``lease_s`` / 3 before, having been paused in between (docs/operations.md).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import unquote

import delta.exceptions as delta_errors
import pyarrow as pa
from pyspark.sql import SparkSession

from pipelines.config import Config
from pipelines.errors import WriterBusy, WriterFenced
from pipelines.session import is_connect
from pipelines.sql import TABLES, quoted_table, run_sql, session_settings
from pipelines.tables import attach_tables, ensure_table, snapshots_warmed_beside, table_uri
from pipelines.warehouse_files import WarehouseFiles, commit_name, table_log, warehouse_files

__all__ = [
    "FENCED_TABLES",
    "LEASE_TABLE",
    "Lease",
    "app_id",
    "attach_lease_table",
    "check_lease",
    "create_lease_table",
    "dml_fence",
    "read_lease",
    "transaction_id",
    "writer_lease",
]

LEASE_TABLE = "writer_lease"

# The tables a writer changes; ack_events takes appends from `acker ingest`, which holds no lease.
FENCED_TABLES = tuple(table for table in TABLES if table != "ack_events")
# The tables a writer changes by MERGE or DELETE, whose statements carry the token.
DML_TABLES = ("pending", "held_events")
_FENCE_PROPERTY = "batchacker.writer.fence"
_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
# A token's statements are numbered below it: token * 2**32 + n.
_STATEMENT_BITS = 32
_WAIT_POLL_S = 5.0
_CREATE_ATTEMPTS = 10


@dataclass(frozen=True)
class LeaseRow:
    """The lease as ``writer_lease`` holds it."""

    token: int
    holder: str | None
    host: str | None
    pid: int | None
    claimed_at: datetime | None
    expires_at: datetime | None


@dataclass
class Lease:
    """The lease this process holds: its token, and until when (``time.monotonic``) it is
    certainly still ours."""

    spark: SparkSession
    config: Config
    token: int
    holder: str
    claimed_at: datetime
    renewed: float
    statements: int = 0

    @property
    def lease_s(self) -> float:
        return self.config.writer.lease_s


_held: dict[str, Lease] = {}
_renewing = threading.Lock()
T = TypeVar("T")


def _utc_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def read_lease(spark: SparkSession, config: Config) -> LeaseRow | None:
    """The lease's row, or ``None`` where the table has none yet."""
    row = spark.table(config.qualified(LEASE_TABLE)).first()
    return None if row is None else LeaseRow(**row.asDict())


def lease_in_files(config: Config) -> LeaseRow | None:
    """The lease's row read without Spark: the one file its newest commit's checksum file lists,
    read with pyarrow; ``None`` where that cannot be told (tables this process does not read, a
    table not yet seeded, a checksum not yet written or without its files). It may be a commit
    behind, as a read in Spark may: a claim from it is a compare and set all the same."""
    files = warehouse_files(config)
    if files is None:
        return None
    log = table_log(config, LEASE_TABLE)
    try:
        found = _live_file_rows(files, log, files.newest_checksum(log))
        if found is None:
            return None
        rows = found[1]
        return LeaseRow(**rows[0]) if len(rows) == 1 else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _live_file_rows(
    files: WarehouseFiles, log: str, checksum: dict[str, Any] | None
) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """The lease table's one file as ``checksum`` lists it, and the rows it holds; ``None``
    where there is no checksum, or it lists no single file without deletion vectors."""
    live = None if checksum is None else checksum.get("allFiles")
    if not isinstance(live, list) or len(live) != 1 or "deletionVector" in live[0]:
        return None
    folder = log.removesuffix("/_delta_log")
    return live[0], files.read_rows(f"{folder}/{unquote(live[0]['path'])}")


def _holder_alive(row: LeaseRow) -> bool | None:
    """Whether the holder's process still runs: known only for a process of this host."""
    if row.host != socket.gethostname() or row.pid is None:
        return None
    try:
        os.kill(row.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _describe(row: LeaseRow, config: Config) -> str:
    since = f"since {row.claimed_at:%Y-%m-%dT%H:%M:%S}Z" if row.claimed_at else ""
    until = f", lease until {row.expires_at:%Y-%m-%dT%H:%M:%S}Z" if row.expires_at else ""
    return f"{row.holder} {since}{until} (token {row.token} of {config.qualified(LEASE_TABLE)})"


# What Delta raises when another commit won: importing delta.exceptions has PySpark convert the
# JVM's exceptions into these (without it they would reach Python as Py4J errors).
_DELTA_CONFLICTS = (
    delta_errors.ConcurrentAppendException,
    delta_errors.ConcurrentDeleteDeleteException,
    delta_errors.ConcurrentDeleteReadException,
    delta_errors.ConcurrentTransactionException,
    delta_errors.ConcurrentWriteException,
    delta_errors.DeltaConcurrentModificationException,
    delta_errors.MetadataChangedException,
    delta_errors.ProtocolChangedException,
)


def _update(spark: SparkSession, config: Config, seen_token: int, new: LeaseRow) -> bool:
    """Set the lease to ``new`` if its token is still ``seen_token``; whether it was set (a
    concurrent update that Delta committed first makes this one fail, or find another token)."""
    in_log = _update_in_log(spark, config, seen_token, new)
    if in_log is not None:
        return in_log
    result = _conflict_tolerated(
        lambda: run_sql(
            spark,
            config,
            "update_writer_lease",
            writer_lease=config.qualified(LEASE_TABLE),
            seen_token=seen_token,
            token=new.token,
            holder=new.holder,
            host=new.host,
            pid=new.pid,
            claimed_at=_iso(new.claimed_at),
            expires_at=_iso(new.expires_at),
        ).first()
    )
    return result is not None and result["num_affected_rows"] == 1


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _lease_files(spark: SparkSession, config: Config) -> WarehouseFiles | None:
    """The warehouse's files where this process updates the lease in its Delta log
    (:func:`_update_in_log`): a classic session's, on a warehouse it reads itself."""
    return None if is_connect(spark) else warehouse_files(config)


def _update_in_log(
    spark: SparkSession, config: Config, seen_token: int, new: LeaseRow
) -> bool | None:
    """:func:`_update` as one Delta transaction of this process's JVM, with no Spark job and
    no query planned: it reads the lease's row from the file its snapshot's checksum lists,
    writes ``new`` as a Parquet file beside it, and commits the swap of the two files, which
    Delta fails where another commit came between (a claim beside a run's ingest, 0.7 s
    against the UPDATE's 5 s). ``None`` where it cannot: a Spark Connect session, a catalog's
    table, a checksum that lists no single file."""
    files = _lease_files(spark, config)
    if files is None:
        return None
    jvm = spark._jvm
    assert jvm is not None
    delta = jvm.org.apache.spark.sql.delta
    transaction = delta.DeltaLog.forTable(
        spark._jsparkSession, table_uri(config, LEASE_TABLE)
    ).startTransaction()
    log = table_log(config, LEASE_TABLE)
    found = _live_file_rows(files, log, files.checksum(log, commit_name(transaction.readVersion())))
    if found is None:
        return None
    old, rows = found
    if len(rows) != 1 or rows[0]["token"] != seen_token:
        return False
    name = f"part-00000-{uuid.uuid4()}-c000.zstd.parquet"
    folder = log.removesuffix("/_delta_log")
    size = files.write_rows(f"{folder}/{name}", _LEASE_SCHEMA, [asdict(new)])
    now_ms = int(time.time() * 1000)
    swap = [
        {
            "remove": {
                "path": old["path"],
                "deletionTimestamp": now_ms,
                "dataChange": True,
                "extendedFileMetadata": True,
                "partitionValues": {},
                "size": old["size"],
            }
        },
        {
            "add": {
                "path": name,
                "partitionValues": {},
                "size": size,
                "modificationTime": now_ms,
                "dataChange": True,
                "stats": json.dumps({"numRecords": 1}),
            }
        },
    ]
    actions = jvm.java.util.ArrayList()
    parse = getattr(delta.actions, "Action$").__getattr__("MODULE$")
    for action in swap:
        actions.add(parse.fromJson(json.dumps(action)))
    no_predicate = getattr(jvm.scala, "None$").__getattr__("MODULE$")
    transaction.readWholeTable()
    committed = _conflict_tolerated(
        lambda: transaction.commit(
            jvm.scala.jdk.javaapi.CollectionConverters.asScala(actions).toList(),
            getattr(delta, "DeltaOperations$Update")(no_predicate),
        )
    )
    return committed is not None


# The lease's row as Parquet holds it for Spark (create_writer_lease.sql).
_LEASE_SCHEMA = pa.schema(
    [
        ("token", pa.int64()),
        ("holder", pa.string()),
        ("host", pa.string()),
        ("pid", pa.int32()),
        ("claimed_at", pa.timestamp("us", tz="UTC")),
        ("expires_at", pa.timestamp("us", tz="UTC")),
    ]
)


def _conflict_tolerated(statement: Callable[[], T]) -> T | None:
    """``statement()``'s result, or ``None`` where Delta failed it for a concurrent commit."""
    try:
        return statement()
    except _DELTA_CONFLICTS:
        return None


def _claim_once(
    spark: SparkSession, config: Config, verb: str
) -> tuple[Lease | None, LeaseRow, bool]:
    """Try to claim the lease once: the lease (or ``None`` if another holds it), the row read
    before the attempt, and whether the claim took a lapsed lease from a holder that may still
    be running (whose commits must then be fenced). The row is read without Spark where it
    can be, so that the claim is one Delta statement, not two: beside a run's ingest on two
    cores, about 3 s of a 5-minute cycle."""
    row = lease_in_files(config) or read_lease(spark, config)
    if row is None:
        # Of two seeds at once Delta commits one; the other's failure leaves the same row.
        _conflict_tolerated(
            lambda: run_sql(
                spark, config, "seed_writer_lease", writer_lease=config.qualified(LEASE_TABLE)
            )
        )
        row = read_lease(spark, config)
        assert row is not None  # the seed, or a concurrent one, committed
    now = _utc_now()
    alive = _holder_alive(row)
    if row.expires_at is not None and row.expires_at > now and alive is not False:
        return None, row, False
    taken_over = row.expires_at is not None and alive is not False
    holder = f"pid {os.getpid()} on {socket.gethostname()}, {verb}"
    started = time.monotonic()
    claimed = _update(
        spark,
        config,
        row.token,
        LeaseRow(
            token=row.token + 1,
            holder=holder,
            host=socket.gethostname(),
            pid=os.getpid(),
            claimed_at=now,
            expires_at=now + timedelta(seconds=config.writer.lease_s),
        ),
    )
    if not claimed:
        return None, read_lease(spark, config) or row, False
    return Lease(spark, config, row.token + 1, holder, now, started), row, taken_over


def _fence_tables(lease: Lease) -> None:
    """Make every table refuse the commits of the writers before ``lease``: a property change
    fails any transaction in flight, and on the tables changed by MERGE or DELETE a transaction
    id with the new token makes Delta skip the older writers' statements."""
    spark, config = lease.spark, lease.config
    attach_tables(spark, config, views=())
    for table in FENCED_TABLES:
        spark.sql(
            f"alter table {quoted_table(config, table)} "
            f"set tblproperties ('{_FENCE_PROPERTY}' = '{lease.token}')"
        ).collect()
    for table in DML_TABLES:
        empty = spark.table(config.qualified(table)).limit(0)
        (
            empty.write.format("delta")
            .mode("append")
            .option("txnAppId", app_id(config, "writer"))
            .option("txnVersion", str(_next_version(lease)))
            .saveAsTable(config.qualified(table))
        )


def app_id(config: Config, kind: str) -> str:
    """The Delta transaction app id of ``kind``'s writes to ``config``'s acker."""
    return f"batch-acker/{config.qualified_schema}/{kind}"


@contextmanager
def transaction_id(spark: SparkSession, app: str, version: int) -> Iterator[None]:
    """Have the SQL statements of the ``with`` block carry (``app``, ``version``) as their
    Delta transaction id: Delta skips one if the table recorded that version or a later one."""
    with session_settings(spark, {_TXN_APP_ID: app, _TXN_VERSION: str(version)}):
        yield


def _next_version(lease: Lease) -> int:
    lease.statements += 1
    return (lease.token << _STATEMENT_BITS) + lease.statements


def attach_lease_table(spark: SparkSession, config: Config) -> None:
    """Register the lease's table in this session, for a reader (``acker sql``), if it exists."""
    ensure_table(spark, config, LEASE_TABLE)


def create_lease_table(spark: SparkSession, config: Config) -> None:
    """Create the lease's table where it does not exist (``acker init``; a writer on an older
    acker's warehouse creates it as it claims). Where another writer creates it at the same
    moment, one creation fails (the folder is taken); it then attaches the other's."""
    for attempt in range(_CREATE_ATTEMPTS):
        try:
            ensure_table(spark, config, LEASE_TABLE, "create_writer_lease")
            return
        except Exception:
            if attempt == _CREATE_ATTEMPTS - 1:
                raise
            time.sleep(1.0)


def claim(
    spark: SparkSession,
    config: Config,
    verb: str,
    wait: bool = False,
    say: Callable[[str], None] | None = None,
) -> Lease:
    """Claim the writer lease of ``config``'s acker, waiting for its holder if ``wait``, else
    raising :class:`WriterBusy` naming it."""
    attach_tables(spark, config, views=(), tables=())  # the schema, before its lease table
    create_lease_table(spark, config)
    announced = False
    while True:
        lease, row, taken_over = _claim_once(spark, config, verb)
        if lease is not None:
            break
        if not wait:
            raise WriterBusy(
                f"another acker writer holds the writer lease: {_describe(row, config)}; "
                "wait for it to finish (or pass --wait), one writer at a time"
            )
        if say is not None and not announced:
            say(f"waiting for the writer lease: {_describe(row, config)}")
            announced = True
        time.sleep(_WAIT_POLL_S)
    if taken_over:
        if say is not None:
            say(f"took over a lapsed writer lease: {_describe(row, config)}; fencing its tables")
        _fence_tables(lease)
    return lease


def check_lease(config: Config) -> Lease | None:
    """Before a write: the lease this process holds for ``config``'s acker, renewed if a third
    of it has passed; ``None`` if it holds none (a caller that took no lease, as tests and
    notebooks calling the engine directly). Raises :class:`WriterFenced` if it was lost."""
    lease = _held.get(config.qualified_schema)
    if lease is None:
        return None
    # A batch writes its outputs from several threads: one renews, the others then find it
    # renewed (two renewals at once would conflict, and the loser would think itself fenced).
    with _renewing:
        elapsed = time.monotonic() - lease.renewed
        if elapsed >= lease.lease_s / 3:
            _renew(lease, elapsed)
    return lease


def _renew(lease: Lease, elapsed: float) -> None:
    """Renew ``lease`` if it is still this writer's (no claim since), else raise."""
    started = time.monotonic()
    if _set_expiry(lease, _utc_now() + timedelta(seconds=lease.lease_s)):
        lease.renewed = started
        return
    row = read_lease(lease.spark, lease.config)
    holder = _describe(row, lease.config) if row is not None else "nobody"
    raise WriterFenced(
        f"this writer's lease (token {lease.token}) went {elapsed:.0f} s without renewal "
        f"(writer.lease_s = {lease.lease_s:g}) and another writer claimed it: {holder}. "
        "This run wrote nothing more; run again"
    )


@contextmanager
def dml_fence(spark: SparkSession, config: Config) -> Iterator[None]:
    """Around a MERGE or DELETE of the writer: check the lease, and have the statement carry
    the lease's token as its Delta transaction id, so that Delta skips it if a newer writer
    has fenced the table (nothing without a lease)."""
    lease = check_lease(config)
    if lease is None:
        yield
        return
    with transaction_id(spark, app_id(config, "writer"), _next_version(lease)):
        yield


def _set_expiry(lease: Lease, expires_at: datetime | None) -> bool:
    """Set when ``lease`` lapses (``None``: released), if it is still this writer's."""
    return _update(
        lease.spark,
        lease.config,
        lease.token,
        LeaseRow(
            token=lease.token,
            holder=lease.holder,
            host=socket.gethostname(),
            pid=os.getpid(),
            claimed_at=lease.claimed_at,
            expires_at=expires_at,
        ),
    )


@contextmanager
def writer_lease(
    spark: SparkSession,
    config: Config,
    verb: str,
    wait: bool = False,
    say: Callable[[str], None] | None = None,
) -> Iterator[Lease]:
    """Hold the writer lease for the ``with`` block (re-entrant within one process, as
    ``demo`` calls ``run`` and ``tick``), releasing it at the end."""
    key = config.qualified_schema
    if key in _held:
        yield _held[key]
        return
    lease = claim(spark, config, verb, wait, say)
    _held[key] = lease
    failed = True
    try:
        # Where the release is an UPDATE, Delta lists the lease table's files as the claim left
        # them beside the held work, so that the UPDATE finds them listed: after a commit that
        # listing is a Spark job, 1-2 s of a release at the end of a run, where nothing runs
        # beside it.
        listed = () if _lease_files(spark, config) else (LEASE_TABLE,)
        with snapshots_warmed_beside(spark, config, listed):
            yield lease
        failed = False
    finally:
        del _held[key]
        try:
            _set_expiry(lease, None)
        except Exception:
            if not failed:  # else the failure that ended the block is the one to report
                raise
