"""A class-data archive for the local JVMs the command line starts.

A cold JVM spends a good part of a short verb, and of a scheduled ``acker run``, loading and
verifying the classes of Spark and Delta. Java's class-data sharing maps them, already parsed
and verified, from an archive: the first verb writes one when its JVM exits
(``-XX:ArchiveClassesAtExit``), and every later one maps it (``-XX:SharedArchiveFile``). Only
classes on the JVM's class path are archived, so these JVMs put the Delta JARs there too.

The archive's name hashes the Java installation and every JAR on the class path (name, size,
modification time): after an upgrade the old archive no longer matches and a new one is
written, and writing one removes those no verb has mapped for 30 days. A JVM checks an archive
against its own class path and ignores one that does not match; its notices about the archive
are switched off, since the JVM logs to stdout, where ``acker sql`` prints its rows.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

__all__ = ["archive_path", "finish_archive", "jvm_options"]

# The JVM's unified logging writes to stdout; these tags are the archive's own notices.
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"

# A dump left by a JVM that was killed before it finished is removed after this long.
_STALE_DUMP_S = 600

# An archive no verb has mapped for this long (one for an upgraded Spark, or for a virtual
# environment since removed: each is about 200 MB) is removed when a new one is written.
UNUSED_ARCHIVE_S = 30 * 24 * 3600


def _spark_jars() -> list[Path]:
    import pyspark

    home = os.environ.get("SPARK_HOME") or str(Path(pyspark.__file__).parent)
    return sorted((Path(home) / "jars").glob("*.jar"))


def archive_path(cache_dir: Path, delta_jars: Sequence[Path]) -> Path:
    """Where the archive for this Java and these JARs lives, in ``cache_dir/class-data``."""
    digest = hashlib.sha256()
    digest.update(str(os.environ.get("JAVA_HOME") or shutil.which("java")).encode())
    for jar in [*_spark_jars(), *delta_jars]:
        stat = jar.stat()
        digest.update(f"{jar}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return cache_dir / "class-data" / f"{digest.hexdigest()[:16]}.jsa"


def _dump_path(archive: Path) -> Path:
    return archive.with_name(f"{archive.name}.{os.getpid()}.dump")


def jvm_options(archive: Path) -> str:
    """The JVM options that map ``archive``, or, if there is none yet, write it at exit (to a
    file of this process's own, moved in place by :func:`finish_archive`)."""
    if archive.is_file():
        # Its modification time is when a verb last mapped it (a shared cache another user
        # owns keeps its own times).
        with contextlib.suppress(OSError):
            os.utime(archive)
        return f"-XX:SharedArchiveFile={archive} {_QUIET}"
    archive.parent.mkdir(parents=True, exist_ok=True)
    _remove_older(archive.parent.glob("*.dump"), _STALE_DUMP_S)
    _remove_older(archive.parent.glob("*.jsa"), UNUSED_ARCHIVE_S)
    return f"-XX:ArchiveClassesAtExit={_dump_path(archive)} {_QUIET}"


def _remove_older(paths: Iterable[Path], age_s: float) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            if time.time() - path.stat().st_mtime > age_s:
                path.unlink()


def finish_archive(
    spark: SparkSession, archive: Path, say: Callable[[str], None] | None = None
) -> None:
    """If this process started a JVM that writes ``archive`` at exit, stop it, wait until it
    has written the archive (a few seconds, once), and move the archive in place; otherwise
    (the archive exists, or the JVM was started otherwise) leave the session running. ``say``
    hears that the archive is being written."""
    dump = _dump_path(archive)
    gateway = SparkContext._gateway
    jvm = getattr(gateway, "proc", None)
    if gateway is None or jvm is None or not any(str(dump) in str(arg) for arg in jvm.args):
        return
    if say is not None:
        say(f"saving Spark's classes for faster starts (once, about 15 s): {archive}")
    spark.stop()
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    jvm.stdin.close()  # the gateway exits when its stdin closes, and dumps as it exits
    jvm.wait(timeout=300)
    if dump.is_file() and dump.stat().st_size > 0:
        os.replace(dump, archive)
