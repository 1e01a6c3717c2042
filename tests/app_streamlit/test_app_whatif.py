"""What-if runs, verdicts and the result tables, without Streamlit."""

from __future__ import annotations

import math

import pytest

from app_streamlit import state, whatif


def test_verdict_reads_like_a_sentence() -> None:
    """A verdict gives the delivered change in % and the p90 wait change in minutes or hours."""
    before = {"delivered_gpu_h": 100.0, "wait_p90_s": 3600.0}
    assert whatif.verdict(before, {"delivered_gpu_h": 112.0, "wait_p90_s": 1200.0}) == (
        "+12% delivered, p90 wait -40 min"
    )
    assert whatif.verdict(before, {"delivered_gpu_h": 90.0, "wait_p90_s": 3 * 3600.0}) == (
        "-10% delivered, p90 wait +2.0 h"
    )
    assert whatif.verdict(before, {"delivered_gpu_h": 100.2, "wait_p90_s": 3600.0}) == (
        "delivered unchanged, p90 wait unchanged"
    )


def test_verdict_handles_projects_with_nothing_before() -> None:
    """A project that got nothing before says so instead of dividing by zero."""
    none = {"delivered_gpu_h": 0.0, "wait_p90_s": math.nan}
    assert whatif.verdict(none, {"delivered_gpu_h": 30.0, "wait_p90_s": 60.0}) == (
        "30 GPU-h delivered (none before), p90 wait n/a"
    )
    assert whatif.verdict(none, none) == "nothing delivered either way, p90 wait n/a"


def test_runs_for_lists_current_edited_and_baselines() -> None:
    """A request runs current and edited budgets, then each baseline on the edited ones."""
    request = whatif.Request("k", (("a", 2.0),), "mip", ("fairshare",), 1.0)
    runs = whatif.runs_for(request)
    assert [(r.budgets, r.policy) for r in runs] == [
        ("current", "mip"), ("edited", "mip"), ("edited", "fairshare")
    ]
    assert len({r.label for r in runs}) == 3


@pytest.fixture(scope="module")
def pair() -> tuple[whatif.RunResult, whatif.RunResult]:
    tiny = state.load_bundled("tiny").scenario
    edited = state.with_edited_shares(tiny, {"research/vision": 4.0})
    base = whatif.labelled(whatif.run(tiny, "fairshare", 0.5), "current budgets")
    other = whatif.labelled(whatif.run(edited, "fairshare", 0.5), "edited budgets")
    return base, other


def test_run_keeps_the_simulators_figures(pair: tuple[whatif.RunResult, whatif.RunResult]) -> None:
    """A result set holds every project and job of the simulation, and occupancy per hour."""
    base, _ = pair
    assert list(base.projects["project"]) == ["research/nlp", "research/vision", "infra"]
    assert set(base.jobs["class"]) <= {"debug", "batch", "large"}
    assert len(base.occupancy) == 12  # half a day, hour by hour
    assert base.occupancy["occupancy"].between(0, 1).all()
    assert 0 < base.summary["delivered_over_owed"] <= 1


def test_owed_follows_the_edited_shares(pair: tuple[whatif.RunResult, whatif.RunResult]) -> None:
    """The edited run owes research/vision more GPU-hours than the current one."""
    base, other = pair
    owed = {r.label: r.projects.set_index("project")["owed_gpu_h"] for r in pair}
    assert owed[other.label]["research/vision"] > owed[base.label]["research/vision"]


def test_tables_put_result_sets_side_by_side(pair: tuple[whatif.RunResult, whatif.RunResult]) -> None:
    """The summary has a column per result set; per-project and verdict tables a row per project."""
    base, other = pair
    summary = whatif.summary_frame(list(pair))
    assert list(summary["variant"]) == ["current budgets", "edited budgets"]
    table = whatif.summary_table(summary)
    assert list(table.columns) == ["Metric", "current budgets", "edited budgets"]
    assert table.set_index("Metric").loc["Preemptions (count)", "current budgets"] == (
        f"{base.summary['preemptions']:,}"
    )
    verdicts = whatif.verdicts(base, other)
    assert len(verdicts) == 3 and verdicts.iloc[:, 1].str.contains("delivered").all()
    projects = whatif.projects_frame(list(pair))
    assert len(projects) == 6
    csv = projects.to_csv(index=False)
    assert csv.splitlines()[0].startswith("variant,policy,project,owed_gpu_h,delivered_gpu_h")


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.0, "0 s"), (45.0, "45 s"), (600.0, "10 min"), (9000.0, "2.5 h"), (math.nan, "n/a")]
)
def test_format_wait_picks_a_human_unit(seconds: float, text: str) -> None:
    """Waits print in seconds, minutes or hours as a person would say them."""
    assert whatif.format_wait(seconds) == text
