"""``gpuplan status``: tables, JSON and ``--job`` from a ledger and a status file written here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models import (
    JobLine,
    LiveStatus,
    PendingReason,
    Preemption,
    ProjectStatus,
    QueuedJob,
    SchedulerCounters,
)
from planner.cli import main
from planner.ledger import Ledger, Usage, lock_for_run
from planner.status_file import status_path, write_status

HOUR = 3600.0
WAIT_NLP = "waiting: project research/nlp is at 130 % of its share this week; 3 jobs of projects further below go first"


def project(name: str, ratio: float, **kw: float) -> ProjectStatus:
    values = {"share": 0.5, "owed_gpu_h": 0.0, "delivered_gpu_h": 0.0, "charged_gpu_h": 0.0,
              "unallocated_gpu_h": 0.0, "headroom_gpu_h": 5.0, **kw}
    return ProjectStatus(project=name, ratio=ratio, **values)  # type: ignore[arg-type]


def live_status() -> LiveStatus:
    return LiveStatus(
        at=10 * HOUR, wall=1_767_571_200.0, origin=1_767_571_200.0 - 10 * HOUR,
        lookback_s=7 * 86400.0, policy="mip", executor="slurm",
        projects=(project("research/nlp", 1.3, running_gpus=8, waiting_gpus=16),
                  project("research/cv", 0.4, running_gpus=16)),
        queue=(
            QueuedJob(job="j2", project="research/nlp", user="ana", gpus=16, submitted=9 * HOUR,
                      wait_s=HOUR, position=2, reason=PendingReason.FAIR_SHARE_RANK, text=WAIT_NLP),
            QueuedJob(job="j5", project="research/cv", user="bo", gpus=8, submitted=9.5 * HOUR,
                      wait_s=0.5 * HOUR, position=1, reason=None, text="waiting to be planned"),
        ),
        preemptions=(Preemption(job="j1", project="research/nlp", user="ana", at=9 * HOUR,
                                reason="its nodes went to j4 (research/cv), ranked ahead by fair share"),),
        scheduler=SchedulerCounters(plan_seconds=0.42, gap=0.0, fallbacks_total=1),
        jobs=(
            JobLine(job="j2", project="research/nlp", user="ana", state="waiting", text=WAIT_NLP),
            JobLine(job="j4", project="research/cv", user="bo", state="running_contract",
                    text="running under contract until 11:00"),
        ),
    )


@pytest.fixture()
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "usage.sqlite"
    with Ledger(path) as led:
        led.record([
            Usage("research/nlp", 0.0, 5 * HOUR, allocated_gpu_h=40.0, charged_gpu_h=52.0,
                  unallocated_gpu_h=3.0, owed_gpu_h=40.0),
            Usage("research/cv", 0.0, 5 * HOUR, allocated_gpu_h=10.0, owed_gpu_h=25.0),
            # After the status's time: not in its lookback window.
            Usage("research/cv", 10 * HOUR, 11 * HOUR, allocated_gpu_h=99.0, owed_gpu_h=99.0),
        ])
    write_status(status_path(path), live_status())
    return path


def status_json(ledger: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    assert main(["status", "--ledger", str(ledger), "--json", *extra]) == 0
    data: dict[str, object] = json.loads(capsys.readouterr().out)
    return data


def test_json_hours_come_from_the_ledger_over_the_lookback(ledger: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--json gives the ledger's hours up to the status's time and the scheduler's ratio."""
    data = status_json(ledger, capsys)
    projects = {p["project"]: p for p in data["projects"]}  # type: ignore[attr-defined]
    nlp, cv = projects["research/nlp"], projects["research/cv"]
    assert (nlp["owed_gpu_h"], nlp["delivered_gpu_h"], nlp["charged_gpu_h"], nlp["unallocated_gpu_h"]) == (
        40.0, 40.0, 52.0, 3.0)
    assert (cv["owed_gpu_h"], cv["delivered_gpu_h"]) == (25.0, 10.0)
    assert (nlp["ratio"], nlp["running_gpus"], nlp["waiting_gpus"]) == (1.3, 8, 16)
    assert LiveStatus.model_validate(data).queue[0].reason is PendingReason.FAIR_SHARE_RANK


def test_tables_show_projects_queue_and_preemptions(ledger: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The text output has the three tables, the queue in position order with reasons."""
    assert main(["status", "--ledger", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert "PROJECT" in out and "RATIO" in out and "recent preemptions" in out
    assert out.index("research/cv  ") < out.index("research/nlp  ")  # lowest ratio first
    queue = out.split("\nqueue\n")[1].split("\n\n")[0].splitlines()
    assert queue[0].split() == ["POS", "JOB", "PROJECT", "USER", "GPUS", "WAIT", "REASON"]
    assert queue[2].split()[:6] == ["1", "j5", "research/cv", "bo", "8", "30m"]
    assert queue[3].endswith(WAIT_NLP)
    assert "its nodes went to j4" in out


def test_job_says_why_it_waits(ledger: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--job J prints J's state line, its queue position and its project's standing."""
    assert main(["status", "--ledger", str(ledger), "--job", "j2"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "job j2 (project research/nlp, user ana, 16 GPUs)"
    assert f"state: {WAIT_NLP}" in out
    assert "queue: position 2" in out and "pending reason fair_share_rank" in out
    assert "ratio 1.30" in out and "owed 40.0 and delivered 40.0 GPU-h this week" in out


def test_unknown_job_exits_1(ledger: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A job the run does not know is said so on stderr, exit code 1."""
    assert main(["status", "--ledger", str(ledger), "--job", "nope"]) == 1
    assert "job nope is not known" in capsys.readouterr().err


def test_unknown_project_exits_1_naming_the_programs(ledger: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A --project that matches no project of the run is said so (a typo shows), exit 1."""
    assert main(["status", "--ledger", str(ledger), "--project", "reserch"]) == 1
    err = capsys.readouterr().err
    assert "project reserch is not known" in err and "programs: research" in err


def test_a_user_without_jobs_gets_a_note(ledger: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--ledger", str(ledger), "--user", "nobody"]) == 0
    assert "user nobody has no queued, running or recently preempted job" in capsys.readouterr().err


def test_filters_by_program_and_user(ledger: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--project takes a program prefix; --user keeps only that user's jobs and projects."""
    data = status_json(ledger, capsys, "--project", "research/cv")
    assert [q["job"] for q in data["queue"]] == ["j5"]  # type: ignore[attr-defined]
    assert [p["project"] for p in data["projects"]] == ["research/cv"]  # type: ignore[attr-defined]
    assert len(status_json(ledger, capsys, "--project", "research")["queue"]) == 2  # type: ignore[arg-type]
    data = status_json(ledger, capsys, "--user", "ana")
    assert [q["job"] for q in data["queue"]] == ["j2"]  # type: ignore[attr-defined]
    assert [p["job"] for p in data["preemptions"]] == ["j1"]  # type: ignore[attr-defined]
    assert [p["project"] for p in data["projects"]] == ["research/nlp"]  # type: ignore[attr-defined]


def test_missing_ledger_exits_2_and_creates_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing ledger is exit code 2 naming it; no file is created."""
    missing = tmp_path / "none.sqlite"
    assert main(["status", "--ledger", str(missing)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_missing_status_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ledger without a live status file is exit code 2 naming the status file."""
    path = tmp_path / "usage.sqlite"
    Ledger(path).close()
    assert main(["status", "--ledger", str(path)]) == 2
    assert "usage.sqlite.status.json: no live status" in capsys.readouterr().err


def test_invalid_status_file_exits_2_naming_the_field(ledger: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A status file with a bad field is exit code 2 naming the file and the field."""
    status_path(ledger).write_text('{"at": "soon", "wall": 0}')
    assert main(["status", "--ledger", str(ledger)]) == 2
    err = capsys.readouterr().err
    assert "usage.sqlite.status.json: not a gpuplan live status: at" in err


def test_ledger_from_the_environment(ledger: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --ledger the ledger comes from $GPUPLAN_LEDGER; with neither, exit code 2."""
    monkeypatch.setenv("GPUPLAN_LEDGER", str(ledger))
    assert main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["policy"] == "mip"
    monkeypatch.delenv("GPUPLAN_LEDGER")
    assert main(["status"]) == 2
    assert "--ledger" in capsys.readouterr().err


def test_status_while_a_run_holds_the_lock_is_called_live(ledger: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """While a run holds the ledger's lock, its status is the live one."""
    with lock_for_run(ledger):
        assert main(["status", "--ledger", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert ": live status of " in out.splitlines()[0] and "no longer running" not in out


def test_status_of_a_run_that_ended_says_so(ledger: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """After a crash or a stop (the lock file is there, nobody holds it) the status is
    not called live: the header says no run holds the lock."""
    lock_for_run(ledger).release()
    assert main(["status", "--ledger", str(ledger)]) == 0
    head = capsys.readouterr().out.splitlines()
    assert ": last status of " in head[0]
    assert head[1] == ("no run holds the ledger's lock: this is the last status written by a "
                       "run that is no longer running")
