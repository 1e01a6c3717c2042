"""The app's charts show what they claim, with units on their axes."""

from __future__ import annotations

import pandas as pd
import pytest

from app_streamlit import charts, planview, state


@pytest.fixture(scope="module")
def tiny() -> state.LoadedScenario:
    return state.load_bundled("tiny")


def test_wait_cdf_with_no_jobs_of_a_class_says_so() -> None:
    """An empty class shows a note rather than a blank chart."""
    jobs = pd.DataFrame({"variant": ["a"], "class": ["debug"], "wait_s": [0.0], "started": [True]})
    fig = charts.wait_cdf(jobs, ["a"], "large")
    assert fig.layout.annotations[0].text == "No large jobs in the simulated period"
    fig = charts.wait_cdf(jobs, ["a"], "debug")
    assert list(fig.data[0].y) == [0.0, 100.0]
    assert fig.layout.xaxis.ticktext[0] == "≤1 s"


def test_wait_cdf_top_is_the_share_of_jobs_that_started() -> None:
    """Jobs that never started count in the total but not on the curve."""
    jobs = pd.DataFrame(
        {"variant": ["a"] * 4, "class": ["batch"] * 4, "wait_s": [10.0, 60.0, 600.0, 9e4],
         "started": [True, True, True, False]}
    )
    fig = charts.wait_cdf(jobs, ["a"], "batch")
    assert max(fig.data[0].y) == pytest.approx(75.0)


def test_each_project_of_ai2_like_has_its_own_colour() -> None:
    """The Gantt's colours tell all 40 ai2-like projects apart, the same in every pool."""
    projects = state.load_bundled("ai2-like").scenario.projects
    colours = charts.project_colours(projects)
    assert len(set(colours.values())) == len(projects)
    assert charts.project_colours(projects[:3]) == {p: colours[p] for p in projects[:3]}


def test_program_gantt_has_a_row_per_job_of_the_program() -> None:
    """A program's Gantt reads one row per job, its GPUs and nodes on the bar."""
    frame = pd.DataFrame(
        {
            "pool": ["a/H100"] * 3, "node": ["n1", "n2", "n1"], "start_h": [0.0, 0.0, 0.25],
            "end_h": [0.25, 0.25, 0.5], "job": ["j1", "j1", "j1"], "project": ["p/x"] * 3,
            "gpus": [8, 8, 16], "charged": ["yes"] * 3, "lane": [0] * 3, "lanes": [1] * 3,
        }
    )
    bars = planview.job_bars(frame)
    assert bars[["start_h", "end_h", "gpus", "nodes"]].to_numpy().tolist() == [[0.0, 0.25, 16, 2], [0.25, 0.5, 16, 1]]
    fig = charts.program_gantt(bars, "t", [0.0, 0.25, 0.5], ["p/x"])
    assert set(fig.data[0].y) == {"j1 · x"}
    assert fig.data[0].text[0] == "16 GPUs on 2 nodes"
