"""The one place that owns Spark and Delta configuration.

``configure_builder`` takes a ``SparkSession.Builder`` and returns it configured, so callers
(CLI, tests, notebooks, jobs) compose it and no session is ever created behind their back.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

from pipelines import class_data
from pipelines.config import Config
from pipelines.jars import default_jar_cache, ensure_delta_jars, ensure_fold_jar, ensure_s3a_jars

__all__ = [
    "INTERPRETED_EVENTS_AT_MOST",
    "INTERPRETED_OUTCOME_BYTES_AT_MOST",
    "INTERPRETED_PENDING_BYTES_AT_MOST",
    "INTERPRETED_QUERIES",
    "LEAN_JVM_EVENTS_AT_MOST",
    "SESSION_DEFAULTS",
    "build_session",
    "configure_builder",
    "finish_shared_classes",
    "is_connect",
    "use_utc_times",
]

# Settings every acker session needs, whatever the deployment.
SESSION_DEFAULTS: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # Delta's SQL parser drops named parameters on Spark 4.1+ (delta-io/delta#7640); binding them
    # after parsing, as Spark 3.5/4.0 did, keeps `spark.sql(text, args=...)` working.
    "spark.sql.legacy.parameterSubstitution.constantsOnly": "true",
    "spark.databricks.delta.properties.defaults.enableDeletionVectors": "true",
    "spark.databricks.delta.write.txnVersion.autoReset.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    # Smaller state than Spark's default snappy: 40.6 against 45.4 bytes per pending tree
    # (10^6 seeded trees, after OPTIMIZE), and full scans of it no slower.
    "spark.sql.parquet.compression.codec": "zstd",
}

# Settings a running Spark Connect server must have been started with; a client cannot set them.
_SERVER_ONLY = ("spark.sql.extensions", "spark.sql.catalog.spark_catalog")

# Spark's log for the sessions the acker starts, from the JVM's first line: warnings only, and not
# the start-up ones, so no notice reaches the terminal (Spark's own default logs at INFO).
LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")

# For the JVM of a command-line verb: the JIT's first tier only starts the JVM and its first
# queries about 30% sooner (status on the demo warehouse: session 10.8 -> 8.7 s, first reads of
# Delta tables 16 -> 11 s; `acker tick` on the demo warehouse 22.0, 22.4 s against 26.9, 29.5 s),
# and costs a one-batch run nothing measurable up to 2*10^6 events (52.2, 54.3 s against 51.3,
# 53.3 s). Warm, its code is slower (the demo's later micro-batches: 10.3-11.0 s against
# 8.0-9.2 s). A notebook's or a continuous run's session keeps the JVM's defaults: over hours
# of work the first tier's code costs more. The test suite's sessions, whose JVM lives all suite
# long but runs most statements a few times, delay the optimising compiler instead (decisions.md).
# Stopped at the first tier, the JVM reserves 48 MB for compiled code instead of 240 MB, and a
# run of 68 epochs filled it ("CodeCache is full. Compiler has been disabled" on stderr, and
# the rest of the run interpreted): the first tier's code gets what the default JVM reserves.
# The parallel collector, on a heap that starts at its full size (:func:`lean_jvm_options`),
# half of it young: a 5-minute cycle of 430,000 events paused 4.8-5.4 s in 111 collections, 8
# of them full, on the serial collector's heap grown from the JVM's default 1/64 of memory;
# 1.4-1.9 s in 21 (the cycle 41.0-43.2 s against 43.2-49.2 s, alternating; decisions.md).
LEAN_JVM_OPTIONS = (
    "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m "
    "-XX:+UseParallelGC -XX:NewRatio=1 -XX:MetaspaceSize=256m"
)

# Spark's own default for ``spark.driver.memory``, where neither the acker nor the user sets it.
_SPARK_DRIVER_MEMORY = "1g"

# Spark's size suffixes, in MiB; a driver memory without one is in MiB.
_MIB_PER_UNIT = {"": 1, "k": 1 / 1024, "m": 1, "g": 1024, "t": 1024**2, "p": 1024**3}


def lean_jvm_options(driver_memory: str) -> str:
    """:data:`LEAN_JVM_OPTIONS` for a driver of ``driver_memory`` (``spark.driver.memory``, the
    heap's maximum): its heap starts at that size. A value Spark would not read adds nothing,
    and Spark's own check names it."""
    size = re.fullmatch(r"(\d+)\s*([kmgtp]?)b?", driver_memory.strip().lower())
    if size is None:
        return LEAN_JVM_OPTIONS
    mebibytes = int(int(size.group(1)) * _MIB_PER_UNIT[size.group(2)])
    return f"{LEAN_JVM_OPTIONS} -Xms{mebibytes}m" if mebibytes else LEAN_JVM_OPTIONS


# The most events a command-line verb reads or applies in the lean JVM; above it the optimising
# compiler's code pays for its compiling (an hour at 200 trees/s, 5.1 million events: ingest
# 34.7 against 25.4-25.7 s, run 138.1 against 96.3 s; a day of 1.24 million events in 2,881
# epochs: run 66.0 against 79.9 s; decisions.md, 29 Nov).
LEAN_JVM_EVENTS_AT_MOST = 2_000_000

# The most events a writer verb reads or applies with its queries interpreted (as those of
# status and sql): below it, compiling each new plan's generated code costs a new process more
# than it saves. `acker run --ingest` of one cycle cut down on copies of one warehouse (2 Dec,
# compiled against interpreted): 714 events 31.0 against 24.9 s, 20,855 events 31.5 against
# 27.5 s, 83,389 events 34.5 against 36.9 s; the whole cycle of 436,087, 39.8 against 64.8 s.
INTERPRETED_EVENTS_AT_MOST = 40_000
# A run or tick also scans `pending` whole, several times, and the outcome tables once, and
# interpreted scans cost by the row, so the tables' sizes (from their Delta logs) bound it too.
# The 714 events over 3,000 pending trees and an hour's outcomes (25 MB) 31.6 against 26.0 s;
# over 103,060 pending trees (4.7 MB) 32.3 against 30.5 s; over 5*10^6 (203 MB) 35.6 against
# 139.6 s, and `acker tick` there 19.9 against 54.4 s.
INTERPRETED_PENDING_BYTES_AT_MOST = 4 * 2**20
INTERPRETED_OUTCOME_BYTES_AT_MOST = 64 * 2**20

# Spark SQL settings that interpret every query instead of generating and compiling Java code
# for it: cheaper where queries read a few small tables or rows in the thousands (the same
# short-lived processes: status on the demo warehouse, cold, about 1.5 s less; also the tests'
# sessions and the quick benchmark).
INTERPRETED_QUERIES: dict[str, str] = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}

# Spark's own settings, which generate and compile code for each query: in a session that
# interprets its queries but compiles those over many events (:data:`EVENT_QUERIES_COMPILED`).
COMPILED_QUERIES: dict[str, str] = {
    "spark.sql.codegen.wholeStage": "true",
    "spark.sql.codegen.factoryMode": "FALLBACK",
}

# Marks a session that interprets its queries, as a few small ones are cheaper, but compiles
# those over a batch's events (:func:`pipelines.sql.compiled_for_events`): a command-line run
# or ingest of many events, where `pending` is small. What else a run does reads small tables,
# and interpreted those statements cost a 5-minute cycle of 430,000 events 1.3-1.9 s less
# (its ticks' DELETE from `pending` 0.9 against 1.8 s, the lease's claim 7.1 against 9.0 s);
# the batch's own statements cost it 2.5 s more interpreted (decisions.md, 5 Dec).
EVENT_QUERIES_COMPILED = "spark.acker.eventQueriesCompiled"

# Spark's launcher always opens the JVM's incubating vector module, and the JVM announces it on
# stderr before any logging starts; the line says nothing to a user of the acker.
_JVM_NOTICE = b"WARNING: Using incubator modules"

# Settings for an embedded local session, overridable from the config's [spark.conf].
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Small micro-batches on a few local cores: adaptive re-planning between stages costs more
    # than it saves (measured ~2x per micro-batch of 10^3 events on 2 cores).
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.databricks.delta.snapshotPartitions": "2",
    # VACUUM lists files with this many tasks (Spark's default is 10,000): on a few local cores
    # that alone took ~25 s per table, even for a tiny one.
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4",
    "spark.driver.memory": "4g",
    # Spark keeps 100 classes of generated code, fewer than a micro-batch's plans and Delta's
    # generate (about 170 compiled per 10^4-event batch, 1.4-1.6 s of compiling): each batch
    # evicted the last one's and compiled them all again. With room for them it compiles 21-37,
    # those holding its batch id (decisions.md, 7 Dec); the least used go first, so a stream's
    # stale ones make way.
    "spark.sql.codegen.cache.maxEntries": "1000",
    # A join on a Delta table would push the not-null filters Spark infers for its keys into the
    # scan, and Delta answers a pushed filter by reading every file's statistics: a Spark job
    # per table, skipping nothing (anchor ids are never null). Three of them per micro-batch for
    # the look-up among every outcome (about 0.2 s each in a new process).
    "spark.sql.optimizer.excludedRules": (
        "org.apache.spark.sql.catalyst.optimizer.InferFiltersFromConstraints"
    ),
}


def configure_builder(
    builder: SparkSession.Builder,
    config: Config,
    short_lived: bool = False,
    shared_classes: bool = False,
    lean_jvm: bool = False,
    jvm_options: str = "",
    events_compiled: bool = False,
) -> SparkSession.Builder:
    """Apply the acker's Spark and Delta settings to ``builder`` and return it; ``lean_jvm``
    starts a JVM for a command-line verb (:data:`LEAN_JVM_OPTIONS`), and ``short_lived`` also
    interprets its queries, for a few small ones, but those over a batch's events where
    ``events_compiled`` (:data:`EVENT_QUERIES_COMPILED`); ``shared_classes`` has a local JVM map the
    class-data archive (:mod:`pipelines.class_data`), or write it at exit if there is none;
    ``jvm_options`` are added to the options of the JVM it starts, after the acker's own.

    Example: ``spark = configure_builder(SparkSession.builder, load_config()).getOrCreate()``.
    """
    use_utc_times()
    settings = config.spark
    builder = builder.appName(settings.app_name)
    merged = dict(SESSION_DEFAULTS)
    if settings.remote.startswith("sc://"):
        builder = builder.remote(settings.remote)
        for key in _SERVER_ONLY:
            del merged[key]
        merged.update(settings.conf)
        for key, value in merged.items():
            builder = builder.config(key, value)
        return builder
    if settings.remote:
        # An embedded Connect server.
        builder = builder.remote(settings.remote)
        merged["spark.log.level"] = settings.log_level
        is_local = True
    else:
        is_local = settings.master.startswith("local")
        if settings.master:
            builder = builder.master(settings.master)
    java_options = f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}"
    if is_local:
        # The Python processes a local JVM starts (an embedded Connect server's micro-batch
        # functions, Spark's look-up of Python data sources and of the workers' version) must
        # run this interpreter, the one with the package installed, not whatever `python3` is
        # first on PATH: another Python version fails a worker's version check. Spark starts
        # them from PYSPARK_PYTHON alone (spark.pyspark.python does not reach a Connect
        # server's).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        merged.update(LOCAL_DEFAULTS)
        merged["spark.sql.warehouse.dir"] = config.warehouse_uri
        # A local session talks only to itself; without this Spark warns that the hostname
        # resolves to a loopback address, and asks for exactly this setting.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    jars = _session_jars(config)
    if jars:
        merged["spark.jars"] = ",".join(str(jar) for jar in jars)
    if lean_jvm or short_lived:
        driver_memory = settings.conf.get("spark.driver.memory", merged.get("spark.driver.memory"))
        java_options += " " + lean_jvm_options(driver_memory or _SPARK_DRIVER_MEMORY)
    if short_lived:
        merged.update(INTERPRETED_QUERIES)
        if events_compiled:
            merged[EVENT_QUERIES_COMPILED] = "true"
    if shared_classes and jars and is_local and not settings.remote:
        merged["spark.driver.extraClassPath"] = os.pathsep.join(str(jar) for jar in jars)
        archive = class_data.archive_path(_jar_cache(config), jars)
        java_options += " " + class_data.jvm_options(archive)
    if jvm_options:
        java_options += " " + jvm_options
    merged["spark.driver.extraJavaOptions"] = java_options
    merged.update(settings.conf)
    for key, value in merged.items():
        builder = builder.config(key, value)
    return builder


def use_utc_times() -> None:
    """Have this process turn the timestamps a query returns into naive datetimes, and the naive
    datetimes it hands Spark into timestamps, in UTC. PySpark does both in the process's local
    zone, while the acker's tables, its session and its naive datetimes are in UTC: in a process
    whose zone is New York every batch's ``started_at`` was written five hours late, and the
    writer lease's expiry is read five hours early. A JVM the process starts after this works
    in UTC too."""
    if os.environ.get("TZ") != "UTC":
        os.environ["TZ"] = "UTC"
        time.tzset()


def _session_jars(config: Config) -> list[Path]:
    """The JARs the session loads: Delta's, the fold's rules in Java where a Java compiler
    built them, and for a warehouse on S3 the S3A connector's; none where the platform provides
    them (``spark.delta_jars = "provided"``)."""
    if config.spark.delta_jars != "resolve":
        return []
    jars = ensure_delta_jars(_jar_cache(config))
    fold = ensure_fold_jar(_jar_cache(config))
    if fold is not None:
        jars.append(fold)
    if not config.warehouse_is_local:
        jars += ensure_s3a_jars(_jar_cache(config))
    return jars


def _jar_cache(config: Config) -> Path:
    configured = config.spark.jar_cache
    return Path(configured).expanduser() if configured else default_jar_cache()


def finish_shared_classes(
    spark: SparkSession, config: Config, say: Callable[[str], None] | None = None
) -> None:
    """After a verb: if its JVM was the one to write the class-data archive
    (:mod:`pipelines.class_data`), let it finish and move the archive in place; ``say`` hears
    when it does."""
    jars = _session_jars(config)
    if jars:
        archive = class_data.archive_path(_jar_cache(config), jars)
        class_data.finish_archive(spark, archive, say)


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect client rather than a classic session."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


@contextmanager
def _jvm_notice_dropped() -> Iterator[None]:
    """While a JVM starts, route stderr through a pipe that forwards every line but the JVM's
    start-up notice; the JVM keeps the pipe as its stderr, so the forwarding lasts as it does."""
    read_end, write_end = os.pipe()
    terminal = os.dup(2)
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        os.dup2(terminal, 2)
        os.close(terminal)

    def forward() -> None:
        with os.fdopen(read_end, "rb") as lines:
            for line in lines:
                if not line.startswith(_JVM_NOTICE):
                    os.write(2, line)

    threading.Thread(target=forward, name="jvm-stderr", daemon=True).start()


def build_session(
    config: Config,
    short_lived: bool = False,
    shared_classes: bool = False,
    lean_jvm: bool = False,
    jvm_options: str = "",
    events_compiled: bool = False,
) -> SparkSession:
    """Get (or create) the session for ``config`` with its log level applied; ``short_lived``,
    ``shared_classes``, ``lean_jvm``, ``jvm_options`` and ``events_compiled``: see
    :func:`configure_builder` (the command line asks for the archive; a caller that does must
    call :func:`finish_shared_classes` before it exits)."""
    launches_jvm = not config.spark.remote.startswith("sc://") and SparkContext._gateway is None
    # A session already running (a notebook's, a test's) keeps its settings.
    short_lived = short_lived and launches_jvm
    # A Connect session's settings cannot follow the events' statements alone: where the
    # caller would compile only those, it compiles every query.
    if events_compiled and config.spark.remote:
        short_lived = events_compiled = False
    shared_classes = shared_classes and launches_jvm
    lean_jvm = lean_jvm and launches_jvm
    with warnings.catch_warnings(), _jvm_notice_dropped() if launches_jvm else nullcontext():
        # An embedded Connect server starts with every setting, then the client sets them all
        # again on its session and warns for each static one; the server already has them.
        warnings.filterwarnings("ignore", message="Failed to set spark", category=UserWarning)
        spark = configure_builder(
            SparkSession.builder,
            config,
            short_lived,
            shared_classes,
            lean_jvm,
            jvm_options,
            events_compiled=events_compiled,
        ).getOrCreate()
    if not is_connect(spark):
        spark.sparkContext.setLogLevel(config.spark.log_level)
    return spark
