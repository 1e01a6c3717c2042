"""The Python API raises the project's own errors: one root class, no CLI in the core."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from models import GpuplanError
from planner.cli.errors import UsageError
from planner.ledger import LedgerError
from planner.runstate import RunStateError
from scenarios import ScenarioError, load_scenario
from scenarios.sweep import SweepError

REPO = Path(__file__).resolve().parents[2]
TINY: dict[str, Any] = yaml.safe_load((REPO / "scenarios" / "tiny.yaml").read_text())


@pytest.mark.parametrize("error", [ScenarioError, UsageError, LedgerError, RunStateError, SweepError])
def test_every_project_error_derives_from_the_root(error: type[Exception]) -> None:
    """One class to catch (and the one the CLI maps to exit code 2)."""
    assert issubclass(error, GpuplanError)


def test_the_ledger_and_run_state_do_not_import_the_cli() -> None:
    """The core stays free of CLI imports (the ledger imported planner.cli.errors)."""
    code = (
        "import sys, planner.ledger, planner.runstate, models, scenarios; "
        "bad = sorted(m for m in sys.modules if m.startswith('planner.cli')); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _with_csv(tmp_path: Path, csv_text: str) -> Path:
    (tmp_path / "jobs.csv").write_text(csv_text)
    data = copy.deepcopy(TINY)
    data["workloads"] = {"csv": "jobs.csv"}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("was", "make"),
    [
        ("UnicodeDecodeError", lambda d: (d / "s.yaml").write_bytes("name: caf\xe9\n".encode("latin-1")) and d / "s.yaml"),
        ("RecursionError", lambda d: (d / "s.yaml").write_text("org: " + "[" * 3000 + "]" * 3000) and d / "s.yaml"),
        ("ValueError", lambda d: (d / "s.yaml").write_text("name: x\nstart: 2024-13-45\n") and d / "s.yaml"),
        ("_csv.Error", lambda d: _with_csv(d, "id,project,gpus\nj1,research/nlp," + "8" * 200_000 + "\n")),
        ("AttributeError", lambda d: _with_csv(d, "id,project,gpus\nj1,research/nlp,8,9\n")),
    ],
)
def test_load_scenario_raises_only_scenario_error(tmp_path: Path, was: str, make: Any) -> None:
    """The five exception types the issue saw from load_scenario are ScenarioError now."""
    path = make(tmp_path)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert type(info.value) is ScenarioError and str(info.value).startswith(str(tmp_path))
