"""The Streamlit app, driven headless with ``streamlit.testing.v1.AppTest``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app_streamlit import state, views, whatif
from scenarios.errors import ScenarioError
from scenarios.load import bundled_scenarios

APP = str(Path(state.__file__).resolve().parent / "app.py")
SHARE = state.COL_SHARE


def _app(scenario: str = "tiny") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["scenario_choice"] = scenario
    return at


def _editor_key(name: str) -> str:
    return f"shares::{state.load_bundled(name).key}"


def _edit(at: AppTest, name: str, row: int, share: float) -> None:
    # AppTest applies data_editor edits through the widget's edit state in session_state.
    at.session_state[_editor_key(name)] = {
        "edited_rows": {row: {SHARE: share}},
        "added_rows": [],
        "deleted_rows": [],
    }


# Read-only tables carry no key in AppTest; each is found by a column only it has.
TABLES = {
    "pools_table": "Capacity (H100-eq GPUs)",
    "owed_table": "Owed edited (GPU-h)",
    "verdicts": "Verdict (edited vs current budgets)",
    "summary_table": "Metric",
    "pending": "Detail",
}


def _table(at: AppTest, name: str) -> pd.DataFrame:
    found = [d.value for d in at.dataframe if TABLES[name] in d.value.columns]
    assert len(found) == 1, f"{len(found)} tables {name!r} on the page"
    return found[0]


def _chart_keys(at: AppTest) -> set[str]:
    return {c.key for c in at.get("plotly_chart") if c.key}


@pytest.mark.parametrize("name", sorted(bundled_scenarios()))
def test_app_loads_each_bundled_scenario(name: str) -> None:
    """Each bundled scenario loads: cluster, org editor and owed figures, no error."""
    at = _app(name)
    at.run()
    assert not at.exception
    assert not at.error, [e.value for e in at.error]
    assert at.header[0].value.startswith(f"Scenario {state.load_bundled(name).scenario.name}")
    assert [d.key for d in at.data_editor] == [_editor_key(name)]
    assert len(_table(at, "pools_table")) == len(state.load_bundled(name).scenario.pools)
    assert {"org_sunburst", "owed_bars"} <= _chart_keys(at)


def test_editing_a_share_changes_the_owed_figures() -> None:
    """Raising research/vision's share in the editor raises its owed GPU-hours at once."""
    at = _app()
    at.run()
    before = _table(at, "owed_table").set_index("Project")
    assert (before["Change (GPU-h)"] == 0).all()
    _edit(at, "tiny", row=2, share=4.0)  # row 2 is research/vision
    at.run()
    assert not at.exception and not at.error
    after = _table(at, "owed_table").set_index("Project")
    vision = after.loc["research/vision"]
    assert vision["Owed edited (GPU-h)"] > before.loc["research/vision", "Owed now (GPU-h)"]
    assert vision["Share edited (%)"] == pytest.approx(50.0)
    assert after.loc["research/nlp", "Change (GPU-h)"] < 0
    assert any("research/vision share 1 → 4" in s.value for s in at.success)


def test_a_share_of_zero_is_refused_on_the_page() -> None:
    """A share that is not above zero is named in an error and ignored, without a traceback."""
    at = _app()
    at.run()
    _edit(at, "tiny", row=3, share=0.0)
    at.run()
    assert not at.exception
    assert any("share of 'infra' must be greater than 0" in e.value for e in at.error)
    assert (_table(at, "owed_table")["Change (GPU-h)"] == 0).all()


def test_whatif_run_produces_both_result_sets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Running the what-if shows current and edited results, verdicts and every chart.

    It runs in an empty working folder, which stays empty: nothing is written to a ledger.
    """
    monkeypatch.chdir(tmp_path)
    at = _app()
    at.run()
    _edit(at, "tiny", row=2, share=4.0)
    at.session_state[f"days::{state.load_bundled('tiny').key}"] = 0.5
    at.run()
    assert at.selectbox(key="policy").value == "mip"  # our planner is the default
    at.button(key="run_whatif").click()
    at.run()
    assert not at.exception
    assert not at.error, [e.value for e in at.error]
    request, results = at.session_state["whatif"]
    assert [r.label for r in results] == ["current budgets", "edited budgets"]
    assert request.shares == (("research/vision", 4.0),) and request.days == 0.5
    assert [r.policy for r in results] == ["mip", "mip"]
    # The two runs differ in budgets: the owed hours follow the shares.
    owed = {r.label: r.projects.set_index("project")["owed_gpu_h"] for r in results}
    assert owed["edited budgets"]["research/vision"] > owed["current budgets"]["research/vision"]
    verdicts = _table(at, "verdicts")
    assert list(verdicts["Project"]) == ["research/nlp", "research/vision", "infra"]
    assert all("delivered" in v and "p90 wait" in v for v in verdicts.iloc[:, 1])
    summary = _table(at, "summary_table")
    assert list(summary.columns) == ["Metric", "current budgets", "edited budgets"]
    assert {
        "chart_delivered", "chart_occupancy", "chart_preemptions",
        *(f"chart_wait_{c}" for c in whatif.CLASSES),
    } <= _chart_keys(at)
    assert {b.key for b in at.get("download_button")} >= {"download_projects", "download_summary"}
    assert list(tmp_path.iterdir()) == []


def test_changing_budgets_after_a_run_marks_results_stale() -> None:
    """Results shown for other budgets than the editor's carry a warning to rerun."""
    at = _app()
    at.session_state["policy"] = "fairshare"
    at.run()
    at.session_state[f"days::{state.load_bundled('tiny').key}"] = 0.25
    at.button(key="run_whatif").click()
    at.run()
    assert not any("earlier settings" in w.value for w in at.warning)
    _edit(at, "tiny", row=3, share=2.0)
    at.run()
    assert any("earlier settings" in w.value for w in at.warning)


def test_invalid_upload_shows_its_validation_error() -> None:
    """An uploaded file that is not a scenario shows ScenarioError's text, not a traceback."""
    bad = b"name: broken\nclusters: []\norg: [{name: a, share: 1}]\n"
    with pytest.raises(ScenarioError) as expected:
        state.load_uploaded("broken.yaml", bad)
    at = _app(views.UPLOAD)
    at.run()
    assert any("Upload a scenario file" in i.value for i in at.info)
    at.sidebar.get("file_uploader")[0].upload("broken.yaml", bad, "application/x-yaml")
    at.run()
    assert not at.exception
    assert any("not a valid scenario" in e.value for e in at.error)
    assert [c.value for c in at.code] == [str(expected.value)]
    assert str(expected.value).startswith("broken.yaml: clusters")
    assert not at.tabs


def test_valid_upload_loads_like_a_bundled_scenario() -> None:
    """A valid uploaded file opens the same pages as a bundled one."""
    text = bundled_scenarios()["tiny"].read_bytes()
    at = _app(views.UPLOAD)
    at.run()
    at.sidebar.get("file_uploader")[0].upload("mine.yaml", text, "application/x-yaml")
    at.run()
    assert not at.exception and not at.error
    assert at.header[0].value.startswith("Scenario tiny")


def test_plan_view_shows_the_epoch_and_why_jobs_wait() -> None:
    """Planning the epoch at hour 2 draws the Gantt and names each pending job's reason."""
    at = _app()
    at.run()
    at.session_state[f"plan_hours::{state.load_bundled('tiny').key}"] = 2.0
    at.run()
    at.button(key="run_plan").click()
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "chart_gantt" in _chart_keys(at)
    pending = _table(at, "pending").set_index("Job")
    # j9 wants all 32 GPUs of alpha while one of its nodes is drained.
    assert pending.loc["j9", "Waiting because"].startswith("the only nodes it fits on are drained")
    assert any(c.value.startswith("Solved with") for c in at.caption)
