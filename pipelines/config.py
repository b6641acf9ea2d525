"""Configuration: TOML files loaded into frozen dataclasses and validated before any work starts.

Every problem names its key and value, e.g. ``acker.buckets = 1: must be an integer >= 2``.
The embedded default (no ``--conf``) is local Spark with a local Delta warehouse.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args

__all__ = [
    "CLOCKS",
    "OBJECT_STORE_SCHEMES",
    "PROTOCOLS",
    "REFRESH_MODES",
    "AckerSettings",
    "Clock",
    "Config",
    "ConfigError",
    "MaintainSettings",
    "Protocol",
    "Refresh",
    "SparkSettings",
    "WarehouseSettings",
    "WriterSettings",
    "check_identifier",
    "load_config",
]

Refresh = Literal["reset", "activity"]
"""What renews a pending tree's stamp: its reset and fail events (Storm 2.x), or any event."""
Clock = Literal["manual", "processing_time", "event_time"]
"""What advances the epoch: ``acker tick`` alone, the wall clock, or the events' own time."""
Protocol = Literal["storm", "fsshelter"]
"""Whose acking messages ``ack_events`` holds: they differ in what an init of 0 means."""

REFRESH_MODES: tuple[Refresh, ...] = get_args(Refresh)
CLOCKS: tuple[Clock, ...] = get_args(Clock)
PROTOCOLS: tuple[Protocol, ...] = get_args(Protocol)
DELTA_JAR_MODES = ("resolve", "provided")

# The object stores a warehouse may live on: S3 through Hadoop's S3A connector, whose JARs the
# session resolves beside Delta's (pipelines.jars).
OBJECT_STORE_SCHEMES = ("s3a",)
_URI_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


class ConfigError(ValueError):
    """A configuration file or value is unusable; the message names the key and the value."""


def check_identifier(key: str, value: object) -> str:
    """Return ``value`` if it is a plain SQL identifier (letters, digits, underscore)."""
    if not isinstance(value, str) or not _IDENTIFIER.match(value):
        raise ConfigError(
            f"{key} = {value!r}: must be a plain identifier "
            "(a letter or underscore, then letters, digits or underscores; at most 128)"
        )
    return value


@dataclass(frozen=True)
class AckerSettings:
    """Section ``[acker]``: the acking semantics."""

    buckets: int = 3
    refresh: Refresh = "reset"
    protocol: Protocol = "storm"
    clock: Clock = "manual"
    tick_interval_s: float = 30.0
    allowed_lateness_s: float = 0.0
    max_event_skew_s: float = 30 * 24 * 3600.0
    max_pending: int = 10_000_000
    max_files_per_batch: int = 1000
    max_epochs_per_pass: int = 100_000


@dataclass(frozen=True)
class WarehouseSettings:
    """Section ``[warehouse]``: where the Delta tables and the stream checkpoint live."""

    path: str = "warehouse"
    schema: str = "acker"
    catalog: str = ""


@dataclass(frozen=True)
class MaintainSettings:
    """Section ``[maintain]``: what ``acker maintain`` keeps of old table files."""

    # Delta's own floor: a shorter retention is refused unless
    # spark.databricks.delta.retentionDurationCheck.enabled is false in [spark.conf].
    vacuum_retain_hours: float = 168.0


@dataclass(frozen=True)
class WriterSettings:
    """Section ``[writer]``: how writers keep to one at a time (pipelines.lease)."""

    # How long a writer's lease lasts unless renewed: a writer that stops renewing (crashed on
    # another host, paused, cut off) is taken over this long after its last renewal.
    lease_s: float = 300.0
    # Where the local lock file lives (default <warehouse>/_locks): the fast refusal of a
    # second writer on one machine, before Spark starts.
    lock_dir: str = ""


@dataclass(frozen=True)
class SparkSettings:
    """Section ``[spark]``: the session. ``conf`` holds extra Spark settings verbatim."""

    master: str = "local[2]"
    # Spark Connect instead of a classic session: "local[N]" starts an embedded Connect server,
    # "sc://host:port" uses a running one (which needs Delta and this package installed).
    remote: str = ""
    app_name: str = "batch-acker"
    delta_jars: str = "resolve"
    jar_cache: str = ""
    log_level: str = "FATAL"
    conf: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Config:
    """The whole configuration of one acker deployment."""

    acker: AckerSettings = field(default_factory=AckerSettings)
    warehouse: WarehouseSettings = field(default_factory=WarehouseSettings)
    maintain: MaintainSettings = field(default_factory=MaintainSettings)
    writer: WriterSettings = field(default_factory=WriterSettings)
    spark: SparkSettings = field(default_factory=SparkSettings)

    def qualified(self, table: str) -> str:
        """The fully qualified name of one of the acker's tables, e.g. ``acker.pending``."""
        parts = [self.warehouse.catalog, self.warehouse.schema, table]
        return ".".join(part for part in parts if part)

    @property
    def qualified_schema(self) -> str:
        """The schema's name, with its catalog when one is configured."""
        return ".".join(part for part in (self.warehouse.catalog, self.warehouse.schema) if part)

    @property
    def warehouse_is_local(self) -> bool:
        """Whether the warehouse is a folder of this machine, not an object store's URI."""
        return _URI_SCHEME.match(self.warehouse.path) is None

    @property
    def warehouse_uri(self) -> str:
        """Where the warehouse is, as Spark and Delta name it: an absolute local path, or the
        object store's URI (``s3a://bucket/prefix``) without a trailing slash."""
        if self.warehouse_is_local:
            return str(self.warehouse_path)
        return self.warehouse.path.rstrip("/")

    @property
    def warehouse_path(self) -> Path:
        """The local warehouse folder; the files the acker keeps beside its tables (run and
        status records, the writer's lock) exist only there."""
        if not self.warehouse_is_local:
            raise ValueError(f"warehouse {self.warehouse.path} is not a local folder")
        return Path(self.warehouse.path).expanduser().resolve()

    @property
    def checkpoint_folder(self) -> str:
        """Where the warehouse keeps the stream's checkpoint, under its root."""
        return f"_checkpoints/{self.qualified_schema}/run"

    @property
    def checkpoint_uri(self) -> str:
        """The stream's checkpoint, as Spark names it."""
        return f"{self.warehouse_uri}/{self.checkpoint_folder}"

    @property
    def checkpoint_path(self) -> Path:
        return self.warehouse_path / self.checkpoint_folder


def _take(section: str, raw: dict[str, Any], key: str, kind: type, default: Any) -> Any:
    if key not in raw:
        return default
    value = raw[key]
    # TOML booleans are ints in Python; never accept them where a number is meant.
    ok = isinstance(value, kind) and not isinstance(value, bool)
    if kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok:
        raise ConfigError(
            f"{section}.{key} = {value!r}: must be of type {kind.__name__}, "
            f"not {type(value).__name__}"
        )
    return float(value) if kind is float else value


def _check_keys(section: str, raw: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ConfigError(
            f"{section}.{unknown[0]}: unknown key (known keys: {', '.join(sorted(allowed))})"
        )


def _section(raw: dict[str, Any], name: str) -> dict[str, Any]:
    value = raw.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"[{name}]: must be a table (section), not {type(value).__name__}")
    return value


def _parse_acker(raw: dict[str, Any]) -> AckerSettings:
    d = AckerSettings()
    if "tombstone_epochs" in raw:
        raise ConfigError(
            f"acker.tombstone_epochs = {raw['tombstone_epochs']!r}: no longer a setting; an "
            "anchor's outcome is remembered as long as the outcome tables keep it, so its later "
            "events are always late (docs/semantics.md): remove the key"
        )
    _check_keys("acker", raw, set(AckerSettings.__dataclass_fields__))
    settings = AckerSettings(
        buckets=_take("acker", raw, "buckets", int, d.buckets),
        refresh=_take("acker", raw, "refresh", str, d.refresh),
        protocol=_take("acker", raw, "protocol", str, d.protocol),
        clock=_take("acker", raw, "clock", str, d.clock),
        tick_interval_s=_take("acker", raw, "tick_interval_s", float, d.tick_interval_s),
        allowed_lateness_s=_take("acker", raw, "allowed_lateness_s", float, d.allowed_lateness_s),
        max_event_skew_s=_take("acker", raw, "max_event_skew_s", float, d.max_event_skew_s),
        max_pending=_take("acker", raw, "max_pending", int, d.max_pending),
        max_files_per_batch=_take("acker", raw, "max_files_per_batch", int, d.max_files_per_batch),
        max_epochs_per_pass=_take("acker", raw, "max_epochs_per_pass", int, d.max_epochs_per_pass),
    )
    if settings.buckets < 2:
        raise ConfigError(f"acker.buckets = {settings.buckets}: must be an integer >= 2")
    if settings.refresh not in REFRESH_MODES:
        raise ConfigError(f"acker.refresh = {settings.refresh!r}: must be one of {REFRESH_MODES}")
    if settings.protocol not in PROTOCOLS:
        raise ConfigError(f"acker.protocol = {settings.protocol!r}: must be one of {PROTOCOLS}")
    if settings.clock not in CLOCKS:
        raise ConfigError(f"acker.clock = {settings.clock!r}: must be one of {CLOCKS}")
    if settings.tick_interval_s <= 0:
        raise ConfigError(f"acker.tick_interval_s = {settings.tick_interval_s}: must be > 0")
    if not 0 <= settings.allowed_lateness_s < math.inf:
        raise ConfigError(
            f"acker.allowed_lateness_s = {settings.allowed_lateness_s}: "
            "must be a finite number >= 0"
        )
    if not 0 < settings.max_event_skew_s < math.inf:
        raise ConfigError(
            f"acker.max_event_skew_s = {settings.max_event_skew_s}: must be a finite number > 0"
        )
    if settings.max_pending < 1:
        raise ConfigError(f"acker.max_pending = {settings.max_pending}: must be >= 1")
    if settings.max_files_per_batch < 1:
        raise ConfigError(
            f"acker.max_files_per_batch = {settings.max_files_per_batch}: must be >= 1"
        )
    if settings.max_epochs_per_pass < 1:
        raise ConfigError(
            f"acker.max_epochs_per_pass = {settings.max_epochs_per_pass}: must be >= 1"
        )
    return settings


def _parse_warehouse(raw: dict[str, Any]) -> WarehouseSettings:
    d = WarehouseSettings()
    _check_keys("warehouse", raw, set(WarehouseSettings.__dataclass_fields__))
    settings = WarehouseSettings(
        path=_take("warehouse", raw, "path", str, d.path),
        schema=_take("warehouse", raw, "schema", str, d.schema),
        catalog=_take("warehouse", raw, "catalog", str, d.catalog),
    )
    if not settings.path.strip():
        raise ConfigError(f"warehouse.path = {settings.path!r}: must name a folder")
    scheme = _URI_SCHEME.match(settings.path)
    if scheme is not None and scheme.group(1) not in OBJECT_STORE_SCHEMES:
        raise ConfigError(
            f"warehouse.path = {settings.path!r}: a local folder or one of "
            + ", ".join(f"{name}://" for name in OBJECT_STORE_SCHEMES)
        )
    check_identifier("warehouse.schema", settings.schema)
    if settings.catalog:
        check_identifier("warehouse.catalog", settings.catalog)
    return settings


def _parse_maintain(raw: dict[str, Any]) -> MaintainSettings:
    d = MaintainSettings()
    _check_keys("maintain", raw, set(MaintainSettings.__dataclass_fields__))
    hours = _take("maintain", raw, "vacuum_retain_hours", float, d.vacuum_retain_hours)
    if hours < 0:
        raise ConfigError(f"maintain.vacuum_retain_hours = {hours}: must be >= 0")
    return MaintainSettings(vacuum_retain_hours=hours)


def _parse_writer(raw: dict[str, Any]) -> WriterSettings:
    d = WriterSettings()
    _check_keys("writer", raw, set(WriterSettings.__dataclass_fields__))
    settings = WriterSettings(
        lease_s=_take("writer", raw, "lease_s", float, d.lease_s),
        lock_dir=_take("writer", raw, "lock_dir", str, d.lock_dir),
    )
    if not 3 <= settings.lease_s < math.inf:
        raise ConfigError(f"writer.lease_s = {settings.lease_s}: must be a finite number >= 3")
    return settings


def _parse_spark(raw: dict[str, Any]) -> SparkSettings:
    d = SparkSettings()
    _check_keys("spark", raw, set(SparkSettings.__dataclass_fields__))
    conf = _take("spark", raw, "conf", dict, {})
    for key, value in conf.items():
        if not isinstance(value, str | int | float | bool):
            raise ConfigError(f"spark.conf.{key} = {value!r}: must be a string, number or bool")
    settings = SparkSettings(
        master=_take("spark", raw, "master", str, d.master),
        remote=_take("spark", raw, "remote", str, d.remote),
        app_name=_take("spark", raw, "app_name", str, d.app_name),
        delta_jars=_take("spark", raw, "delta_jars", str, d.delta_jars),
        jar_cache=_take("spark", raw, "jar_cache", str, d.jar_cache),
        log_level=_take("spark", raw, "log_level", str, d.log_level),
        conf={key: _spark_value(value) for key, value in conf.items()},
    )
    if settings.delta_jars not in DELTA_JAR_MODES:
        raise ConfigError(
            f"spark.delta_jars = {settings.delta_jars!r}: must be one of {DELTA_JAR_MODES}"
        )
    if settings.remote and not settings.remote.startswith(("local", "sc://")):
        raise ConfigError(
            f"spark.remote = {settings.remote!r}: must be empty, 'local[N]' or 'sc://host:port'"
        )
    return settings


def _spark_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_config(raw: dict[str, Any]) -> Config:
    """Validate a parsed TOML document and build the configuration."""
    _check_keys("(top level)", raw, {"acker", "warehouse", "maintain", "writer", "spark"})
    return Config(
        acker=_parse_acker(_section(raw, "acker")),
        warehouse=_parse_warehouse(_section(raw, "warehouse")),
        maintain=_parse_maintain(_section(raw, "maintain")),
        writer=_parse_writer(_section(raw, "writer")),
        spark=_parse_spark(_section(raw, "spark")),
    )


def load_config(
    path: str | Path | None = None,
    warehouse: str | Path | None = None,
    catalog: str | None = None,
    schema: str | None = None,
) -> Config:
    """Load and validate a TOML config file; ``None`` gives the embedded local default.
    ``warehouse``, ``catalog`` and ``schema`` override the file's ``[warehouse]`` values (the
    CLI's ``--warehouse``, ``--catalog`` and ``--schema``; a scheduler's variables).

    Example: ``load_config("conf/local.toml", warehouse="/tmp/wh")``.
    """
    if path is None:
        config = Config()
    else:
        file = Path(path)
        try:
            text = file.read_text()
        except OSError as error:
            raise ConfigError(f"--conf {file}: cannot read the file ({error.strerror})") from None
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"--conf {file}: not valid TOML ({error})") from None
        config = parse_config(raw)
    if catalog is not None:
        check_identifier("--catalog", catalog)
    if schema is not None:
        check_identifier("--schema", schema)
    names = replace(
        config.warehouse,
        path=str(warehouse) if warehouse is not None else config.warehouse.path,
        catalog=catalog if catalog is not None else config.warehouse.catalog,
        schema=schema if schema is not None else config.warehouse.schema,
    )
    return replace(config, warehouse=names)
