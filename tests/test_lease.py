"""The writer lease (pipelines.lease), on real Delta tables: Delta's optimistic concurrency
decides between claims, a lapsed lease is taken over with every table fenced, and a fenced
writer's statements are refused by Delta itself. Processes that share no lock, and a writer
paused past its lease: tests/test_crash_recovery.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pipelines import lease
from pipelines.cli import main
from pipelines.config import Config
from pipelines.errors import WriterBusy, WriterFenced
from pipelines.tables import table_property
from tests.acker_harness import Harness, init, write_conf

TOUR_EVENTS = Path(__file__).resolve().parents[1] / "examples" / "events.jsonl"


def _set_lease(acker: Harness, host: str, pid: int, expires_in_s: float) -> None:
    """Make the lease look held by ``pid`` on ``host`` until ``expires_in_s`` from now."""
    acker.spark.sql(
        f"update {acker.config.qualified(lease.LEASE_TABLE)} set holder = 'pid {pid} on {host}, "
        f"run', host = '{host}', pid = {pid}, claimed_at = current_timestamp(), "
        f"expires_at = current_timestamp() + make_dt_interval(0, 0, 0, {expires_in_s})"
    ).collect()


def _fenced_by(acker: Harness, table: str) -> str | None:
    return table_property(acker.spark, acker.config, table, "batchacker.writer.fence")


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert done.returncode == 0
    return int(subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True).stdout)


def test_of_two_claims_at_once_delta_commits_one(acker: Harness) -> None:
    with lease.writer_lease(acker.spark, acker.config, "run"):
        pass  # the lease now exists, released, token 1
    results: list[object] = []

    def claim(verb: str) -> None:
        try:
            results.append(lease.claim(acker.spark, acker.config, verb))
        except WriterBusy as busy:
            results.append(busy)

    threads = [threading.Thread(target=claim, args=(verb,)) for verb in ("run", "tick")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    won = [r for r in results if isinstance(r, lease.Lease)]
    refused = [r for r in results if isinstance(r, WriterBusy)]
    assert len(won) == 1 and len(refused) == 1, results
    assert won[0].token == 2
    row = lease.read_lease(acker.spark, acker.config)
    assert row is not None and (row.token, row.holder) == (2, won[0].holder)
    assert won[0].holder in str(refused[0]) and "token 2" in str(refused[0])


def test_the_lease_read_without_spark_is_the_row_delta_reads(acker: Harness) -> None:
    config, spark = acker.config, acker.spark
    lease.create_lease_table(spark, config)
    assert lease.read_lease(spark, config) is None
    assert lease.lease_in_files(config) is None, "no row before the first claim seeds it"
    with lease.writer_lease(spark, config, "run") as held:
        row = lease.lease_in_files(config)
        assert row is not None and (row.token, row.pid, row.host) == (
            held.token,
            os.getpid(),
            socket.gethostname(),
        )
        assert row.claimed_at == held.claimed_at and row.expires_at is not None
        assert row == lease.read_lease(spark, config)
        _set_lease(acker, "elsewhere", 1, expires_in_s=60)
        assert lease.lease_in_files(config) == lease.read_lease(spark, config)
        _set_lease(acker, socket.gethostname(), os.getpid(), expires_in_s=60)
    released = lease.lease_in_files(config)
    assert released is not None and released.expires_at is None
    assert released == lease.read_lease(spark, config)


def test_a_classic_session_claims_and_releases_the_lease_without_a_spark_job(
    acker: Harness,
) -> None:
    spark, config = acker.spark, acker.config
    with lease.writer_lease(spark, config, "run"):
        pass  # the lease now exists, released, token 1
    context = spark.sparkContext
    context.setJobGroup("lease", "a claim and its release")
    try:
        with lease.writer_lease(spark, config, "tick") as held:
            claimed = lease.lease_in_files(config)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert context.statusTracker().getJobIdsForGroup("lease") == []
    assert claimed is not None and (claimed.token, claimed.holder) == (2, held.holder)
    row = lease.read_lease(spark, config)
    assert row is not None and (row.token, row.holder, row.expires_at) == (2, held.holder, None)
    history = spark.sql(f"describe history {config.qualified(lease.LEASE_TABLE)}")
    operations = [r.operation for r in history.orderBy("version").collect()]
    assert operations[-2:] == ["UPDATE", "UPDATE"], operations


def test_a_held_lease_is_refused_until_it_lapses_and_its_taker_fences_every_table(
    acker: Harness,
) -> None:
    config, spark = acker.config, acker.spark
    acker.batch(init(1, 5), init(2, 6))
    with lease.writer_lease(spark, config, "run") as stale:
        # Seen by another machine, the lease is held by a process it cannot check on.
        _set_lease(acker, "elsewhere", 1, expires_in_s=60)
        with pytest.raises(WriterBusy, match=r"pid 1 on elsewhere, run since .* lease until"):
            lease.claim(spark, config, "tick")
        _set_lease(acker, "elsewhere", 1, expires_in_s=-1)
        taker = lease.claim(spark, config, "tick")
        assert taker.token == stale.token + 1
        assert {t: _fenced_by(acker, t) for t in lease.FENCED_TABLES} == {
            t: str(taker.token) for t in lease.FENCED_TABLES
        }
        # The stale writer's DELETE, carrying its older token, is skipped by Delta.
        with lease.dml_fence(spark, config):
            spark.sql(f"delete from {config.qualified('pending')}").collect()
        assert acker.pending_ids() == {1, 2}
        # Paused past a third of its lease, its next write renews first, finds the lease
        # taken and stops, naming the new holder.
        stale.renewed -= config.writer.lease_s / 3
        with pytest.raises(WriterFenced, match=rf"token {taker.token} of"):
            lease.check_lease(config)
    # Leaving, the stale writer released nothing: the taker still holds the lease.
    row = lease.read_lease(spark, config)
    assert row is not None and row.token == taker.token and row.expires_at is not None


def test_a_lease_whose_holder_died_on_this_host_is_claimed_without_fencing(
    acker: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with lease.writer_lease(acker.spark, acker.config, "run"):
        pass
    _set_lease(acker, socket.gethostname(), _dead_pid(), expires_in_s=600)
    with lease.writer_lease(acker.spark, acker.config, "run") as held:
        assert held.token == 2
        row = lease.read_lease(acker.spark, acker.config)
        assert row is not None and row.pid == os.getpid() and row.expires_at is not None
    assert _fenced_by(acker, "pending") is None
    row = lease.read_lease(acker.spark, acker.config)
    assert row is not None and row.token == 2 and row.expires_at is None, "released"
    # What an operator asks of the command line.
    conf = write_conf(acker.config, tmp_path / "acker.toml")
    query = "select token, expires_at from writer_lease"
    assert main(["sql", query, "--format", "csv", "--conf", str(conf)]) == 0
    assert capsys.readouterr().out == "token,expires_at\n2,\n"


def test_a_writer_told_to_wait_claims_the_lease_once_its_holder_releases_it(
    acker: Harness,
) -> None:
    heard: list[str] = []
    claimed: list[lease.Lease] = []
    with lease.writer_lease(acker.spark, acker.config, "maintain") as holder:
        waiter = threading.Thread(
            target=lambda: claimed.append(
                lease.claim(acker.spark, acker.config, "run", wait=True, say=heard.append)
            )
        )
        waiter.start()
        waiter.join(timeout=3)
        assert waiter.is_alive() and not claimed
    waiter.join(timeout=120)
    assert [c.token for c in claimed] == [holder.token + 1]
    assert len(heard) == 1 and heard[0].startswith("waiting for the writer lease:")
    assert holder.holder in heard[0]


def test_run_ingest_lands_its_files_while_another_writer_holds_the_lease(
    acker: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The ingest runs beside the claim and holds no lease: refused, the run has still landed
    # the files, and the next run applies them without ingesting them again.
    with lease.writer_lease(acker.spark, acker.config, "run"):
        pass
    _set_lease(acker, "elsewhere", 1, expires_in_s=600)
    conf = str(write_conf(acker.config, tmp_path / "acker.toml"))
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "events.jsonl").write_bytes(TOUR_EVENTS.read_bytes())
    assert main(["run", "--ingest", str(landing), "--conf", conf]) == 1
    refused = capsys.readouterr()
    assert "ingested 1 files: 1437 events into" in refused.out
    assert "WriterBusy: another acker writer holds the writer lease: pid 1 on elsewhere" in (
        refused.err
    )
    assert acker.table("ack_events").count() == 1437
    assert acker.table("batches").count() == 0
    _set_lease(acker, "elsewhere", 1, expires_in_s=-1)
    assert main(["run", "--ingest", str(landing), "--conf", conf]) == 0
    ran = capsys.readouterr().out
    assert "1 files already ingested, skipped" in ran
    assert "processed 1 micro-batches, 1437 events" in ran
    assert acker.table("ack_events").count() == 1437


@pytest.mark.fast
def test_the_lease_settings_are_checked() -> None:
    from pipelines.config import ConfigError, parse_config

    with pytest.raises(ConfigError, match=r"writer.lease_s = 1.0: must be a finite number >= 3"):
        parse_config({"writer": {"lease_s": 1}})
    assert isinstance(parse_config({"writer": {"lock_dir": "/tmp/x"}}), Config)
