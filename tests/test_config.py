"""Configuration: defaults, the shipped files, and clear refusals of bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.config import Config, ConfigError, load_config, parse_config
from pipelines.lock import lock_path

pytestmark = pytest.mark.fast

CONF = Path(__file__).resolve().parent.parent / "conf"


def test_local_conf_file_equals_the_embedded_default() -> None:
    assert load_config(CONF / "local.toml") == load_config(None) == Config()


@pytest.mark.parametrize(
    "name", ["cluster.example.toml", "databricks.example.toml", "s3.example.toml"]
)
def test_example_confs_are_valid(name: str) -> None:
    assert isinstance(load_config(CONF / name), Config)


def test_warehouse_option_overrides_the_file(tmp_path: Path) -> None:
    config = load_config(CONF / "local.toml", warehouse=tmp_path)
    assert config.warehouse_path == tmp_path.resolve()


def test_catalog_and_schema_options_override_the_file() -> None:
    config = load_config(CONF / "databricks.example.toml", catalog="prod", schema="acker_eu")
    assert (config.warehouse.catalog, config.qualified("completed")) == (
        "prod",
        "prod.acker_eu.completed",
    )
    assert load_config(CONF / "databricks.example.toml").warehouse.catalog == "main"


@pytest.mark.parametrize(("option", "value"), [("catalog", "main;drop"), ("schema", "a.b")])
def test_catalog_and_schema_options_are_checked_as_identifiers(option: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"--{option} = '{value}': must be a plain identifier"):
        load_config(None, **{option: value})


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"acker": {"buckets": 1}}, "acker.buckets = 1: must be an integer >= 2"),
        ({"acker": {"buckets": -3}}, "acker.buckets = -3"),
        ({"acker": {"buckets": "3"}}, "acker.buckets = '3': must be of type int"),
        ({"acker": {"buckets": True}}, "acker.buckets = True"),
        ({"acker": {"refresh": "always"}}, "acker.refresh = 'always'"),
        ({"acker": {"clock": "wall"}}, "acker.clock = 'wall'"),
        ({"acker": {"tick_interval_s": 0}}, "acker.tick_interval_s = 0.0: must be > 0"),
        (
            {"acker": {"allowed_lateness_s": -1}},
            "acker.allowed_lateness_s = -1.0: must be a finite number >= 0",
        ),
        (
            {"acker": {"allowed_lateness_s": float("inf")}},
            "acker.allowed_lateness_s = inf: must be a finite number >= 0",
        ),
        ({"acker": {"max_pending": 0}}, "acker.max_pending = 0"),
        (
            {"acker": {"tombstone_epochs": 10}},
            "acker.tombstone_epochs = 10: no longer a setting; an anchor's outcome is remembered",
        ),
        ({"acker": {"protocol": "heron"}}, "acker.protocol = 'heron': must be one of"),
        ({"acker": {"bucket": 3}}, "acker.bucket: unknown key"),
        (
            {"warehouse": {"schema": "acker; drop table x"}},
            "warehouse.schema = 'acker; drop table x'",
        ),
        ({"warehouse": {"schema": "ack`er"}}, "warehouse.schema = 'ack`er'"),
        ({"warehouse": {"schema": "acker'--"}}, 'warehouse.schema = "acker\'--"'),
        ({"warehouse": {"path": " "}}, "warehouse.path = ' '"),
        (
            {"warehouse": {"path": "gs://bucket/warehouse"}},
            "warehouse.path = 'gs://bucket/warehouse': a local folder or one of s3a://",
        ),
        ({"warehouse": {"catalog": "main.x"}}, "warehouse.catalog = 'main.x'"),
        ({"spark": {"delta_jars": "maybe"}}, "spark.delta_jars = 'maybe'"),
        ({"maintain": {"vacuum_retain_hours": -1}}, "maintain.vacuum_retain_hours = -1.0"),
        ({"maintain": {"retain": 1}}, "maintain.retain: unknown key"),
        ({"sparks": {}}, "(top level).sparks: unknown key"),
        ({"acker": 3}, "[acker]: must be a table"),
    ],
)
def test_bad_values_are_refused_naming_the_key(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(raw)
    assert message in str(error.value)


def test_unreadable_and_malformed_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the file"):
        load_config(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[acker\nbuckets = 3\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(broken)


def test_a_warehouse_on_s3_is_named_as_spark_names_it_and_locked_on_this_machine() -> None:
    config = parse_config({"warehouse": {"path": "s3a://bucket/prefix/", "schema": "acker"}})
    assert not config.warehouse_is_local
    assert config.warehouse_uri == "s3a://bucket/prefix"
    assert config.checkpoint_uri == "s3a://bucket/prefix/_checkpoints/acker/run"
    with pytest.raises(ValueError, match="s3a://bucket/prefix/ is not a local folder"):
        config.warehouse_path  # noqa: B018
    # the local lock of a warehouse on S3: in this user's cache, one folder per warehouse
    lock = lock_path(config)
    assert lock.name == "acker.lock" and lock.is_relative_to(Path.home() / ".cache")
    other = parse_config({"warehouse": {"path": "s3a://bucket/other", "schema": "acker"}})
    assert lock_path(other) != lock


def test_a_local_warehouse_is_named_by_its_absolute_path(tmp_path: Path) -> None:
    config = parse_config({"warehouse": {"path": str(tmp_path / "w")}})
    assert config.warehouse_is_local and config.warehouse_uri == str(tmp_path / "w")
    assert config.checkpoint_uri == str(config.checkpoint_path)
