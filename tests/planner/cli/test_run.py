"""``gpuplan run``: the control loop from the command line (dryrun executor)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.cli import main
from planner.ledger import Ledger


def test_dryrun_epoch_logs_actions_and_fills_the_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One short epoch on tiny: JSON-lines actions in the log, usage rows in the ledger,
    a summary on stdout and one line per decision on stderr."""
    log, ledger = tmp_path / "actions.jsonl", tmp_path / "ledger.sqlite"
    code = main(["run", "tiny", "--executor", "dryrun", "-o", f"log={log}", "--epochs", "1",
                 "--slice-seconds", "0.2", "--ledger", str(ledger), "--time-limit", "5"])
    out, err = capsys.readouterr()
    assert code == 0, err
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    assert {a["action"] for a in actions} >= {"submit", "start"}
    assert all(a["ok"] for a in actions)
    assert err.count(" start j") == 3
    assert "on dryrun under mip: 3 jobs submitted; 3 start; 0 failed actions" in out
    with Ledger(ledger) as recorded:
        assert len(recorded) > 0
        assert recorded.span() is not None
    assert (tmp_path / "ledger.sqlite.run.json").exists()


def test_list_executors(capsys: pytest.CaptureFixture[str]) -> None:
    """--list-executors prints the registered executors and where they come from."""
    assert main(["run", "--list-executors"]) == 0
    out = capsys.readouterr().out
    assert "dryrun" in out and "slurm" in out and "built-in" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--executor", "k8s"], "unknown executor 'k8s'"),
        (["-o", "nokey"], "expected KEY=VALUE"),
        (["-o", "colour=red"], "unknown option(s) colour"),
        (["--epochs", "0"], "--epochs must be at least 1"),
        (["--backend", "gurobi"], "--backend: unknown backend 'gurobi'"),
        (["--slice-seconds", "-1"], "--slice-seconds: must be a positive number, got -1"),
        (["--slice-seconds", "inf"], "--slice-seconds: must be a positive number, got inf"),
        (["--time-limit", "nan"], "--time-limit: must be a positive number, got nan"),
        (["-o", "log="], "log= needs a file path"),
    ],
)
def test_bad_arguments_exit_2_with_one_message(args: list[str], message: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Bad executor names, options and counts are one error line and exit code 2."""
    assert main(["run", "tiny", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_scenario_is_required_to_run(capsys: pytest.CaptureFixture[str]) -> None:
    """Without a scenario (and without --list-executors) run exits 2 saying what is missing."""
    assert main(["run"]) == 2
    assert "a SCENARIO is required" in capsys.readouterr().err


def test_missing_scenario_file_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A scenario path that does not exist is one error naming the file, exit code 2."""
    assert main(["run", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml" in capsys.readouterr().err


def test_a_metrics_port_in_use_leaves_no_ledger_or_run_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --metrics-port that cannot be bound exits 2 before the ledger, its lock or the
    run state exist (a run state left behind would set the next run's time origin)."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ledger = tmp_path / "new.db"
        code = main(["run", "tiny", "--executor", "dryrun", "--epochs", "1", "--slice-seconds", "0.2",
                     "--policy", "fairshare", "--ledger", str(ledger), "--metrics-port", str(port)])
    err = capsys.readouterr().err
    assert code == 2 and f"--metrics-port {port}: cannot listen" in err
    assert list(tmp_path.iterdir()) == []
