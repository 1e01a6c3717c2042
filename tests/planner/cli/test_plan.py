"""``gpuplan plan`` and ``gpuplan explain`` on the tiny scenario."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from models import Plan
from planner.cli import main


def test_plan_prints_slices_and_pending(capsys: pytest.CaptureFixture[str]) -> None:
    """plan prints a table per slice with pools, and the pending reasons."""
    assert main(["plan", "tiny", "--at", "2h"]) == 0
    out = capsys.readouterr().out
    assert "Slice 1 (02h00m - 02h15m)" in out
    assert "Slice 4 (02h45m - 03h00m)" in out
    assert "alpha/H100" in out
    assert re.search(r"j9 +maintenance", out)  # the 32-GPU gang: an alpha node is drained
    assert "alpha-h100-003" in out  # the drained node, with when it is free


def test_plan_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--json writes the plan, which loads back as a Plan with the contract's keys."""
    path = tmp_path / "plan.json"
    assert main(["plan", "tiny", "--at", "1h", "--backend", "pulp", "--json", str(path)]) == 0
    data = json.loads(path.read_text())
    assert {"epoch_start", "epoch_end", "slices", "actions", "pending", "projects", "solver"} <= set(data)
    assert set(data["solver"]) >= {"backend", "status", "objective", "bound", "gap", "seconds", "fallback"}
    plan = Plan.model_validate(data)
    assert plan.epoch_start == 3600.0 and plan.solver.backend == "pulp"


def test_plan_json_creates_its_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--json into a folder that does not exist yet creates the folder."""
    path = tmp_path / "out" / "plan.json"
    assert main(["plan", "tiny", "--json", str(path)]) == 0
    assert Plan.model_validate_json(path.read_text()).epoch_start == 0.0


def test_plan_bad_time_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """A bad --at is one error line and exit code 2."""
    assert main(["plan", "tiny", "--at", "soon"]) == 2
    assert "--at" in capsys.readouterr().err


def test_plan_after_the_workload_says_why_it_is_empty(capsys: pytest.CaptureFixture[str]) -> None:
    """A plan at a time when no job waits is empty, and a note on stderr says so and
    names the span of the scenario's submissions."""
    assert main(["plan", "tiny", "--at", "1000d", "--time-limit", "1"]) == 0
    captured = capsys.readouterr()
    assert "(nothing planned)" in captured.out
    assert "no job waits at 1000d00h00m" in captured.err
    assert "submitted between 00h00m and 04h00m" in captured.err


def test_plan_with_waiting_jobs_has_no_empty_note(capsys: pytest.CaptureFixture[str]) -> None:
    """A plan with a queue prints no empty-queue note."""
    assert main(["plan", "tiny", "--at", "2h", "--time-limit", "1"]) == 0
    assert "no job waits" not in capsys.readouterr().err


def test_explain_pending_job(capsys: pytest.CaptureFixture[str]) -> None:
    """explain says why a waiting job waits."""
    assert main(["explain", "tiny", "j9", "--at", "2h"]) == 0
    out = capsys.readouterr().out
    assert "job j9" in out
    assert "pending: maintenance" in out


def test_explain_placed_job(capsys: pytest.CaptureFixture[str]) -> None:
    """explain says where and when a placed job runs."""
    assert main(["explain", "tiny", "j1"]) == 0
    assert "placed: alpha/H100" in capsys.readouterr().out


def test_explain_unknown_job_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown job id is a clear error with exit code 2."""
    assert main(["explain", "tiny", "nope"]) == 2
    assert "no job 'nope'" in capsys.readouterr().err


def test_explain_job_not_yet_submitted(capsys: pytest.CaptureFixture[str]) -> None:
    """A job submitted after TIME is reported as not in the queue yet."""
    assert main(["explain", "tiny", "j12", "--at", "1h"]) == 0
    out = capsys.readouterr().out
    assert "not in the queue at 01h00m (it is submitted at " in out


@pytest.mark.parametrize("where", ["under a file", "a directory"])
def test_a_json_path_that_cannot_be_a_file_exits_2_before_the_solve(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from planner.cli import plan as plan_cli

    def no_solve(*args: object, **kwargs: object) -> None:
        raise AssertionError("planned although --json cannot be written")

    monkeypatch.setattr(plan_cli, "plan_epoch", no_solve)
    (tmp_path / "file").write_text("")
    target, needle = (
        (tmp_path / "file" / "plan.json", "is not a folder") if where == "under a file"
        else (tmp_path, "it is a directory")
    )
    assert main(["plan", "tiny", "--json", str(target)]) == 2
    err = capsys.readouterr().err
    assert f"--json: cannot write {target}: " in err and needle in err and "Traceback" not in err
