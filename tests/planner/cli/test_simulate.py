"""``gpuplan simulate``: files with the exact keys, the table, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from planner.cli import main
from planner.simulator import SUMMARY_KEYS


def test_simulate_writes_the_four_files_with_exact_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """summary.json has {"policies": {NAME: metrics}}; CSVs and an offline report exist."""
    out = tmp_path / "run"
    code = main(["simulate", "tiny", "--policy", "legacy", "--policy", "fairshare,mip",
                 "--time-limit", "5", "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary) == ["policies"]
    assert list(summary["policies"]) == ["legacy", "fairshare", "mip"]
    for metrics in summary["policies"].values():
        assert tuple(metrics) == SUMMARY_KEYS
        assert set(metrics["wait_p90_s"]) == {"debug", "large", "batch", "all"}
    assert summary["policies"]["mip"]["plan_seconds_p50"] is not None
    jobs = pd.read_csv(out / "jobs.csv")
    assert jobs.columns[0] == "policy"
    assert set(jobs["policy"]) == {"legacy", "fairshare", "mip"}
    assert {"job", "submit", "first_start", "end", "wait_s", "class", "preemptions"} <= set(jobs.columns)
    projects = pd.read_csv(out / "projects.csv")
    assert {"policy", "project", "owed_gpu_h", "delivered_gpu_h", "delivered_over_owed"} <= set(projects.columns)
    html = (out / "report.html").read_text()
    assert "Plotly.newPlot" in html
    # The summary the report carries is summary.json itself, readable by JSON.parse.
    embedded = html.split("<script type='application/json' id='summary'>")[1].split("</script>")[0]
    assert json.loads(embedded) == summary
    assert "<script src=" not in html  # plotly.js is inline: the report works offline
    table = capsys.readouterr().out
    assert "delivered_over_owed" in table and "fairshare" in table


def test_simulate_without_out_prints_the_table_only(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --out the side-by-side table is printed and no file is needed."""
    assert main(["simulate", "tiny", "--policy", "fairshare", "--days", "0.25"]) == 0
    out = capsys.readouterr().out
    assert "occupancy" in out and "6 h simulated" in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["simulate", "tiny", "--policy", "sjf"], "--policy: unknown policy 'sjf'"),
        (["simulate", "tiny", "--days", "0"], "--days: must be a positive number"),
        (["simulate", "tiny", "--days", "inf"], "--days: must be a positive number, got inf"),
        (["simulate", "tiny", "--time-limit", "nan"], "--time-limit: must be a positive number"),
        (["simulate", "no-such-scenario"], "no-such-scenario"),
        (["simulate", "tiny", "--backend", "gurobi"], "--backend"),
    ],
)
def test_bad_input_exits_2_with_one_message(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad arguments exit 2 with one line naming what is wrong, no traceback."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert "Traceback" not in err and err.strip().count("\n") == 0


def test_job_without_duration_exits_2_naming_the_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A workload the simulator cannot replay (no duration) is one clear error, exit 2."""
    f = tmp_path / "live.yaml"
    f.write_text(
        "name: live\nclusters: [{name: c, node_groups: [{gpu_type: H100, nodes: 1}]}]\n"
        "org: [{name: a, share: 1}]\n"
        "workloads: {jobs: [{id: x, project: a, gpus: 1}]}\n"
    )
    assert main(["simulate", str(f), "--policy", "fairshare"]) == 2
    err = capsys.readouterr().err
    assert "(id 'x').duration" in err and str(f) in err
    assert "Traceback" not in err


def test_mip_options_reach_the_policy(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """--no-holds, --hold-fraction, --no-fast-lane and --replan-slices are passed to the mip policy."""
    import planner.simulator as sim

    seen: dict[str, object] = {}
    real = sim.simulate

    def spy(scenario, policy, **kwargs):  # type: ignore[no-untyped-def]
        seen.update(kwargs)
        return real(scenario, policy, **kwargs)

    monkeypatch.setattr(sim, "simulate", spy)
    code = main(["simulate", "tiny", "--policy", "mip", "--days", "0.25", "--time-limit", "2",
                 "--no-holds", "--hold-fraction", "0.5", "--no-fast-lane", "--replan-slices"])
    assert code == 0
    assert seen["holds"] is False and seen["fast_lane"] is False
    assert seen["replan_slices"] is True and seen["hold_fraction"] == 0.5


def test_hold_fraction_out_of_range_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """A hold fraction outside (0, 1] is one error line and exit code 2."""
    assert main(["simulate", "tiny", "--policy", "mip", "--hold-fraction", "1.5"]) == 2
    assert "--hold-fraction" in capsys.readouterr().err


def test_a_simulation_of_too_many_slices_is_refused_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One-second epochs over a year is a valid scenario; simulating it would take days."""
    import yaml

    data = yaml.safe_load((Path(__file__).resolve().parents[3] / "scenarios" / "tiny.yaml").read_text())
    data["policy"] = {"epoch": "1s", "slices": 4}
    path = tmp_path / "fine.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["simulate", str(path), "--days", "365", "--policy", "fairshare"]) == 2
    err = capsys.readouterr().err
    assert "--days 365 spans 126,144,000 slices of 0.25s" in err and "at most 400,000" in err


@pytest.mark.parametrize("blocked", ["parent", "summary.json", "report.html"])
def test_an_out_folder_it_cannot_write_exits_2_before_simulating(
    blocked: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--out under a file, or with a directory where one of its files goes, is refused
    with one line naming the path, before any simulation runs."""
    from planner import simulator

    def no_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("simulated although the output cannot be written")

    monkeypatch.setattr(simulator, "simulate", no_run)
    if blocked == "parent":
        (tmp_path / "file").write_text("")
        out, needle = tmp_path / "file" / "sub", "--out: cannot create"
    else:
        out = tmp_path / "run"
        (out / blocked).mkdir(parents=True)
        needle = f"--out: cannot write {out / blocked}: it is a directory"
    assert main(["simulate", "tiny", "--policy", "fairshare", "--days", "0.1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_a_scenario_that_does_not_load_leaves_no_out_folder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["simulate", "no-such-scenario", "--out", str(out)]) == 2
    assert not out.exists()
