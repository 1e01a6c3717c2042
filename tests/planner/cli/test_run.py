"""``gpuplan run``: the control loop from the command line (dryrun executor)."""

from __future__ import annotations

import importlib.metadata
import io
import json
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from models import Plan, Scenario
from planner.cli import main
from planner.executors import ENTRY_POINT_GROUP, ApplyReport, ClusterState
from planner.executors.dryrun import DryRunExecutor
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


def test_a_run_through_a_linked_ledger_keeps_its_files_beside_the_real_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--ledger LINK locks, keeps its run state and its status beside the file the link
    names, so a run on the real name sees it (and is refused while it runs)."""
    (tmp_path / "alias.sqlite").symlink_to("u.sqlite")
    code = main(["run", "tiny", "--executor", "dryrun", "-o", f"log={tmp_path / 'log'}",
                 "--epochs", "1", "--slice-seconds", "0.2", "--policy", "fairshare",
                 "--ledger", str(tmp_path / "alias.sqlite")])
    assert code == 0, capsys.readouterr().err
    names = {p.name for p in tmp_path.iterdir()}
    assert {"u.sqlite.lock", "u.sqlite.run.json", "u.sqlite.status.json"} <= names
    assert not any(n.startswith("alias.sqlite.") for n in names)


class _Plugin:
    """A third-party executor (the dryrun cluster) that fails as ``-o fail=`` says."""

    name = "plug"

    def __init__(self, scenario: Scenario, options: Mapping[str, str]) -> None:
        self.fail = options.get("fail", "")
        self.inner = DryRunExecutor(scenario, io.StringIO())
        self.submit = self.inner.submit
        self.observed = 0

    def observe(self) -> ClusterState:
        self.observed += 1
        if self.fail == "first-observe" or (self.fail == "later-observe" and self.observed > 5):
            raise OSError("socket closed")
        if self.fail == "hang" and self.observed > 5:
            time.sleep(60)  # a call that never returns in time
        return self.inner.observe()

    def apply(self, plan: Plan, slice_index: int) -> ApplyReport:
        return self.inner.apply(plan, slice_index)


def _needs_url(scenario: Scenario, options: Mapping[str, str]) -> _Plugin:
    options["url"]  # the docs' example: a required option read by key
    return _Plugin(scenario, options)


@pytest.fixture()
def plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Executors ``plug`` and ``needs-url`` installed through entry points."""
    module = types.ModuleType("gpuplan_test_run_plugin")
    module.Plugin = _Plugin  # type: ignore[attr-defined]
    module.needs_url = _needs_url  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    eps = [importlib.metadata.EntryPoint(name="plug", value=f"{module.__name__}:Plugin", group=ENTRY_POINT_GROUP),
           importlib.metadata.EntryPoint(name="needs-url", value=f"{module.__name__}:needs_url",
                                         group=ENTRY_POINT_GROUP)]
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group: eps if group == ENTRY_POINT_GROUP else [])
    yield module.__name__


def _run_plugin(tmp_path: Path, *args: str) -> int:
    return main(["run", "tiny", "--epochs", "1", "--slice-seconds", "0.2", "--poll", "0.05",
                 "--policy", "fairshare", "--ledger", str(tmp_path / "u.sqlite"), *args])


def test_a_missing_plugin_option_exits_2_naming_the_executor(
    plugin: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A factory reading an option that was not given (KeyError) is bad input: exit 2,
    one line naming the executor and the option."""
    assert _run_plugin(tmp_path, "--executor", "needs-url") == 2
    err = capsys.readouterr().err
    assert err == "gpuplan: error: executor 'needs-url': missing option 'url' (give -o url=VALUE)\n"


def test_a_plugin_that_cannot_observe_at_start_exits_2_naming_it(
    plugin: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An OSError from the first observe() is one line naming the executor, before any
    file is created."""
    assert _run_plugin(tmp_path, "--executor", "plug", "-o", "fail=first-observe") == 2
    err = capsys.readouterr().err
    assert "executor 'plug': observe() failed: OSError: socket closed" in err
    assert "Traceback" not in err and list(tmp_path.iterdir()) == []


def test_a_plugin_failing_mid_run_exits_1_after_recording_usage(
    plugin: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An OSError from a later observe(): usage recorded, a `stopped at` line, then one
    error line naming the executor and the method; no traceback."""
    assert _run_plugin(tmp_path, "--executor", "plug", "-o", "fail=later-observe") == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-2].startswith("stopped at ")
    assert err.splitlines()[-1] == "gpuplan: error: executor 'plug': observe() failed: OSError: socket closed"
    with Ledger(tmp_path / "u.sqlite") as ledger:
        assert len(ledger) > 0


def test_a_second_signal_stops_a_run_whose_executor_hangs(
    plugin: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGTERM asks for a stop at the next safe moment, which a hanging observe() never
    reaches; a second one stops at once (exit 130), with the usage up to then recorded."""
    def signal_twice() -> None:
        time.sleep(1.5)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=signal_twice, daemon=True).start()
    started = time.monotonic()
    assert _run_plugin(tmp_path, "--executor", "plug", "-o", "fail=hang") == 130
    assert time.monotonic() - started < 30
    err = capsys.readouterr().err
    assert "received SIGTERM again: stopping now" in err and "Traceback" not in err
    with Ledger(tmp_path / "u.sqlite") as ledger:
        assert len(ledger) > 0
