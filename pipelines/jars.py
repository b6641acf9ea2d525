"""Resolve the Delta Lake JARs from Maven Central into a cache folder the project names.

Spark's own Ivy (shipped inside pyspark) is run once as a plain Java program; afterwards the
folder holds the JARs and a session starts offline with ``spark.jars`` and no resolution at all.
Groups that pyspark already ships (Hadoop, Parquet, Jackson, logging, compression) are excluded,
so Delta's older transitive versions never shadow Spark's own on the classpath.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

__all__ = [
    "DELTA_MAVEN_ARTIFACT",
    "DELTA_VERSION",
    "FOLD_SOURCE",
    "JarResolutionError",
    "default_jar_cache",
    "ensure_delta_jars",
    "ensure_fold_jar",
    "ensure_s3a_jars",
]

DELTA_VERSION = "4.4.0"
DELTA_MAVEN_ARTIFACT = f"io.delta:delta-spark_4.2_2.13:{DELTA_VERSION}"

_EXCLUDED_ORGS = (
    "org.scala-lang",
    "org.apache.hadoop",
    "org.apache.parquet",
    "org.apache.logging.log4j",
    "org.slf4j",
    "org.xerial.snappy",
    "com.github.luben",
    "org.roaringbitmap",
    "io.airlift",
    "com.google.code.findbugs",
    "commons-logging",
    "commons-pool",
    "org.locationtech.jts",
    "com.fasterxml.jackson.core",
)

# Hadoop's S3A connector for a warehouse on S3: the version of the Hadoop pyspark ships, and
# the AWS SDK modules it calls at the version it was built against, one by one rather than the
# SDK's bundle of every service (about 14 MB against 600). Netty and SLF4J come with Spark.
HADOOP_AWS_VERSION = "3.5.0"
S3A_MAVEN_ARTIFACT = f"org.apache.hadoop:hadoop-aws:{HADOOP_AWS_VERSION}"
_AWS_SDK_VERSION = "2.35.4"
_AWS_SDK_MODULES = ("s3", "sts", "s3-transfer-manager")
_S3_ANALYTICS_ACCELERATOR = "software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:1.3.1"
_S3A_EXCLUDED_ORGS = ("org.slf4j", "io.netty")

_COMPLETE_MARKER = ".resolved"

# The fold's rules in Java (pipelines.engine.epoch_parts), compiled against the Spark pyspark
# ships into the JAR cache on first use.
FOLD_SOURCE = Path(__file__).parent / "jvm" / "EpochParts.java"


class JarResolutionError(RuntimeError):
    """A JAR the session loads could not be resolved from Maven Central, or compiled."""


def default_jar_cache() -> Path:
    """The cache folder: ``$ACKER_JAR_CACHE``, else ``~/.cache/batch-acker/jars``."""
    configured = os.environ.get("ACKER_JAR_CACHE")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "batch-acker" / "jars"


def _ivy_module_xml() -> str:
    group, artifact, version = DELTA_MAVEN_ARTIFACT.split(":")
    excludes = "\n".join(f'    <exclude org="{org}"/>' for org in _EXCLUDED_ORGS)
    return f"""<ivy-module version="2.0">
  <info organisation="batch-acker" module="delta-jars"/>
  <dependencies>
    <dependency org="{group}" name="{artifact}" rev="{version}" conf="default->default"/>
{excludes}
  </dependencies>
</ivy-module>
"""


def _s3a_module_xml() -> str:
    group, artifact, version = S3A_MAVEN_ARTIFACT.split(":")
    accelerator_group, accelerator, accelerator_version = _S3_ANALYTICS_ACCELERATOR.split(":")
    sdk = "\n".join(
        f'    <dependency org="software.amazon.awssdk" name="{module}" rev="{_AWS_SDK_VERSION}"'
        ' conf="default->default"/>'
        for module in _AWS_SDK_MODULES
    )
    excludes = "\n".join(f'    <exclude org="{org}"/>' for org in _S3A_EXCLUDED_ORGS)
    return f"""<ivy-module version="2.0">
  <info organisation="batch-acker" module="s3a-jars"/>
  <dependencies>
    <dependency org="{group}" name="{artifact}" rev="{version}" conf="default->master"
        transitive="false"/>
    <dependency org="{accelerator_group}" name="{accelerator}" rev="{accelerator_version}"
        conf="default->default"/>
{sdk}
{excludes}
  </dependencies>
</ivy-module>
"""


def _ivy_jar() -> Path:
    jars = sorted(_pyspark_jars().glob("ivy-*.jar"))
    if not jars:
        raise JarResolutionError("pyspark ships no ivy-*.jar; cannot resolve the Delta JARs")
    return jars[-1]


def _jdk_tool(name: str) -> str | None:
    """The JDK's ``name`` (java, javac): JAVA_HOME's, else the first on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / name).exists():
        return str(Path(java_home) / "bin" / name)
    return shutil.which(name)


def _java() -> str:
    found = _jdk_tool("java")
    if found is None:
        raise JarResolutionError("no 'java' on PATH and JAVA_HOME is not set: install Java 17")
    return found


def _version_folder(cache_dir: Path, artifact: str) -> Path:
    return cache_dir / artifact.replace(":", "_")


def ensure_delta_jars(cache_dir: Path | None = None) -> list[Path]:
    """Return the Delta JARs, resolving them from Maven Central on first use.

    Example: ``spark.jars = ",".join(str(p) for p in ensure_delta_jars())``.
    Safe to call from several processes at once: a file lock serialises the first resolution.
    """
    return _ensure_jars(cache_dir, DELTA_MAVEN_ARTIFACT, _ivy_module_xml())


def ensure_s3a_jars(cache_dir: Path | None = None) -> list[Path]:
    """Return Hadoop's S3A connector and the AWS SDK modules it needs, resolving them from
    Maven Central on first use into the same cache as the Delta JARs: what a session needs
    for a warehouse on S3 (``s3a://``)."""
    return _ensure_jars(cache_dir, S3A_MAVEN_ARTIFACT, _s3a_module_xml())


def _ensure_jars(cache_dir: Path | None, artifact: str, module_xml: str) -> list[Path]:
    folder = _version_folder(cache_dir or default_jar_cache(), artifact)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / _COMPLETE_MARKER).exists():
            _resolve_into(folder, artifact, module_xml)
    return sorted(folder.glob("*.jar"))


def _resolve_into(folder: Path, artifact: str, module_xml: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        module = Path(scratch) / "ivy.xml"
        module.write_text(module_xml)
        command = [
            _java(),
            "-jar",
            str(_ivy_jar()),
            "-ivy",
            str(module),
            "-cache",
            str(folder.parent / "ivy-cache"),
            "-confs",
            "default",
            "-retrieve",
            str(folder / "[organisation]__[artifact]-[revision](-[classifier]).[ext]"),
            "-sync",
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    group, name, _ = artifact.split(":")
    if result.returncode != 0 or not list(folder.glob(f"{group}__{name}-*.jar")):
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise JarResolutionError(
            f"could not resolve {artifact} from Maven Central into {folder}:\n{tail}"
        )
    (folder / _COMPLETE_MARKER).write_text(artifact + "\n")


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def ensure_fold_jar(cache_dir: Path | None = None) -> Path | None:
    """Return the JAR of the fold's rules in Java, compiling :data:`FOLD_SOURCE` on first use
    (into a JAR named by the source's and pyspark's contents); ``None`` without a Java compiler
    (a JRE alone), where the fold runs its rules as SQL. Safe to call from several processes at
    once, as :func:`ensure_delta_jars` is."""
    import pyspark

    source = FOLD_SOURCE.read_bytes()
    digest = hashlib.sha256(source + pyspark.__version__.encode()).hexdigest()[:16]
    folder = cache_dir or default_jar_cache()
    jar = folder / f"acker-fold-{digest}.jar"
    if jar.exists():
        return jar
    javac = _jdk_tool("javac")
    if javac is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not jar.exists():
            _compile_fold(javac, jar)
    return jar


def _compile_fold(javac: str, jar: Path) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        classes = Path(scratch)
        command = [
            javac,
            "-nowarn",
            "--release",
            "17",
            "-cp",
            str(_pyspark_jars() / "*"),
            "-d",
            str(classes),
            str(FOLD_SOURCE),
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise JarResolutionError(
                f"could not compile {FOLD_SOURCE}:\n{(result.stdout + result.stderr).strip()}"
            )
        partial = jar.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for compiled in sorted(classes.rglob("*.class")):
                archive.write(compiled, compiled.relative_to(classes).as_posix())
        partial.replace(jar)
