"""``gpuplan run`` checks what it can before acting: when a check fails, nothing is created."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from planner.cli import main
from planner.cli.errors import UsageError
from planner.cli.run_checks import prepare_run
from planner.ledger import lock_for_run


def _run(tmp_path: Path, *extra: str) -> list[str]:
    return ["run", "tiny", "--epochs", "1", "--slice-seconds", "0.05", "--time-limit", "2",
            "--ledger", str(tmp_path / "ledger.db"), *extra]


def _fails_cleanly(argv: list[str], capsys: pytest.CaptureFixture[str], needle: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and err.count("\n") == 1, err
    return err


def _created(tmp_path: Path) -> set[str]:
    return {p.name for p in tmp_path.iterdir()}


def test_a_one_byte_text_file_as_ledger_is_left_unchanged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's case: the user's file is refused, not replaced by a new ledger."""
    (tmp_path / "ledger.db").write_bytes(b"x")
    _fails_cleanly(_run(tmp_path), capsys, "ledger.db: not a gpuplan ledger (not an SQLite file); left unchanged")
    assert (tmp_path / "ledger.db").read_bytes() == b"x"
    assert _created(tmp_path) == {"ledger.db"}


def test_another_applications_sqlite_file_is_not_switched_to_wal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The foreign database keeps its bytes (its journal mode lives in them)."""
    path = tmp_path / "ledger.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE contacts (name TEXT)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    _fails_cleanly(_run(tmp_path), capsys, "not a gpuplan ledger (no schema_version/usage tables)")
    assert path.read_bytes() == before
    assert _created(tmp_path) == {"ledger.db"}


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda p: p.mkdir(), "ledger.db.run.json: is a directory"),
        (lambda p: p.write_text('{"origin": NaN}'), "ledger.db.run.json: origin: expected the run's start as a finite"),
    ],
)
def test_a_bad_run_state_file_stops_the_run_before_the_ledger_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: object, needle: str
) -> None:
    """LEDGER.run.json that is a directory or holds NaN: exit 2, no ledger created."""
    make(tmp_path / "ledger.db.run.json")  # type: ignore[operator]
    _fails_cleanly(_run(tmp_path), capsys, needle)
    assert _created(tmp_path) == {"ledger.db.run.json"}


def test_an_unwritable_log_path_stops_the_run_before_the_ledger_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-o log=` in a missing folder fails at executor creation, before any file is made."""
    _fails_cleanly(_run(tmp_path, "-o", f"log={tmp_path}/no/such/dir/actions.jsonl"), capsys,
                   "dryrun executor: log=")
    assert _created(tmp_path) == set()


def test_a_missing_slurm_installation_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without sinfo & co. on PATH: exit 2, and neither the ledger nor run.json exists."""
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("SLURM_CONF", raising=False)
    _fails_cleanly(_run(tmp_path, "--executor", "slurm"), capsys, "not found on PATH; is Slurm installed?")
    assert _created(tmp_path) == {"bin"}


def test_a_cluster_that_cannot_be_observed_creates_nothing(tmp_path: Path) -> None:
    """An executor whose first observation fails stops the run before the ledger exists."""

    def observe() -> None:
        raise RuntimeError("slurmctld is not responding")

    with pytest.raises(UsageError, match="cannot observe the cluster: slurmctld is not responding"):
        prepare_run("dryrun", str(tmp_path / "ledger.db"), 0.0, observe=observe)
    assert _created(tmp_path) == set()


def test_a_second_run_on_the_same_ledger_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """While a run holds the ledger, another run exits 2 naming the holder; the ledger is untouched."""
    with lock_for_run(tmp_path / "ledger.db"):
        _fails_cleanly(_run(tmp_path), capsys, f"another gpuplan run is using this ledger (pid {os.getpid()})")
    assert not (tmp_path / "ledger.db").exists()
    assert not (tmp_path / "ledger.db.run.json").exists()


def test_a_read_only_ledger_is_refused_before_acting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger the run could not write to: exit 2 before the loop starts."""
    assert main(_run(tmp_path)) == 0
    capsys.readouterr()
    ledger = tmp_path / "ledger.db"
    before = ledger.read_bytes()
    real_access = os.access
    monkeypatch.setattr(
        "planner.ledger.os.access",
        lambda target, mode: False if str(target) == str(ledger) and mode & os.W_OK else real_access(target, mode),
    )
    _fails_cleanly(_run(tmp_path), capsys, "ledger.db: the ledger is read-only")
    assert ledger.read_bytes() == before


def test_runs_one_after_the_other_share_the_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The lock goes with the run: a later run on the same ledger is not refused."""
    assert main(_run(tmp_path)) == 0
    assert main(_run(tmp_path)) == 0
    capsys.readouterr()
    assert {"ledger.db", "ledger.db.run.json", "ledger.db.lock"} <= _created(tmp_path)


def test_an_empty_ledger_path_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--ledger ""` would be an SQLite temporary database and a `.run.json` in the cwd."""
    _fails_cleanly(["run", "tiny", "--ledger", ""], capsys, "--ledger: give a file path")
