"""The Streamlit app, driven headless with ``streamlit.testing.v1.AppTest``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app_streamlit import run_cache, state, views, whatif
from scenarios.errors import ScenarioError
from scenarios.load import bundled_scenarios

APP = str(Path(state.__file__).resolve().parent / "app.py")


def _app(scenario: str = "tiny") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["scenario_choice"] = scenario
    return at


@pytest.fixture(autouse=True)
def _in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """AppTest runs the replicates in its own process (the browser test covers Dask)."""
    monkeypatch.setenv(views.WORKERS_ENV, "0")


def _type(at: AppTest, name: str, unit: str, text: str) -> None:
    at.text_input(key=f"pct::{state.load_bundled(name).key}::{unit}").input(text).run()


# Read-only tables carry no key in AppTest; each is found by a column only it has.
TABLES = {
    "pools_table": "Capacity (H100-eq GPUs)",
    "programs": "Share edited (%)",
    "tree": "Change in delivered",
    "summary_table": "Metric",
    "pending": "Detail",
}


def _table(at: AppTest, name: str) -> pd.DataFrame:
    found = [_data(d.value) for d in at.dataframe if TABLES[name] in _data(d.value).columns]
    assert len(found) == 1, f"{len(found)} tables {name!r} on the page"
    return found[0]


def _data(value: object) -> pd.DataFrame:
    """A table's frame (a styled table hands back its Styler's data)."""
    return value.data if hasattr(value, "data") else value  # type: ignore[return-value]


def _chart_keys(at: AppTest) -> set[str]:
    return {c.key for c in at.get("plotly_chart") if c.key}


@pytest.mark.parametrize("name", sorted(bundled_scenarios()))
def test_app_loads_each_bundled_scenario(name: str) -> None:
    """Each bundled scenario loads: programs first, the percentage editor, no error."""
    at = _app(name)
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.header[0].value.startswith(f"Scenario {state.load_bundled(name).scenario.name}")
    programs = _table(at, "programs")
    assert programs["Share of the cluster now (%)"].sum() == pytest.approx(100.0, abs=0.2)
    editors = [t for t in at.text_input if t.key != "live_ledger"]  # the live tab's ledger box
    assert len(editors) == len(state.load_bundled(name).scenario.org)


def test_a_percentage_edit_gives_the_shown_percentages() -> None:
    """research typed at 60 % reads 60 % of the cluster, and infra, rescaled, 40 %."""
    at = _app()
    at.run()
    _type(at, "tiny", "research", "60")
    assert not at.error, [e.value for e in at.error]
    programs = _table(at, "programs").set_index("Program")
    assert programs.loc["research", "Share edited (%)"] == 60.0
    assert programs.loc["infra", "Share edited (%)"] == 40.0
    assert any(m.value.startswith("40.0 % of parent (+15.0 points, rescaled)") for m in at.markdown)
    assert [s.value for s in at.success] == ["Applied: research 75.0 % → 60.0 %. Rescaled to keep 100 %: infra."]


@pytest.mark.parametrize(
    ("text", "message"), [("abc", "'abc' is not a percentage"), ("0", "must be above 0 %"), ("100", "below 100 %")]
)
def test_an_invalid_entry_shows_its_message(text: str, message: str) -> None:
    """An unusable percentage is refused with a sentence next to it, and changes nothing."""
    at = _app()
    at.run()
    _type(at, "tiny", "infra", text)
    assert not at.exception
    assert any(e.value.startswith("infra: ") and message in e.value for e in at.error), [e.value for e in at.error]
    assert (_table(at, "programs")["Change (points)"] == 0).all()
    assert not at.success


def _run(at: AppTest, policy: str = "fairshare", replicates: int = 3) -> None:
    at.session_state["policy"] = policy
    at.session_state["replicates"] = replicates
    at.run()
    at.button(key="run_whatif").click()
    at.run()


def test_whatif_with_replicates_shows_program_deltas_with_spread_and_noise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A what-if of three replicates a side shows a tile per program, the tree with its
    within-noise marks, and every chart; the working folder stays empty (no ledger)."""
    monkeypatch.chdir(tmp_path)
    at = _app()
    at.run()
    _type(at, "tiny", "research", "60")
    _run(at)
    assert not at.exception
    assert not at.error, [e.value for e in at.error]
    request, policy, runs = at.session_state["whatif"]
    assert policy == "fairshare" and request.replicates == 3
    assert sorted((p.budgets, p.replicate) for p in runs) == [(s, r) for s in ("current", "edited") for r in range(3)]
    assert [m.label.split(" · ")[0].strip("*") for m in at.metric] == ["research", "infra"]
    tree = _table(at, "tree")
    assert tree["Change in delivered"].str.contains("within noise").any()
    current = [r for p, r in runs.items() if p.budgets == "current"]
    assert len({round(r.summary["delivered_over_owed"], 9) for r in current}) > 1  # replicates differ
    assert {"chart_program_deltas", "chart_delivered", "chart_occupancy", "chart_preemptions",
            *(f"chart_wait_{c}" for c in whatif.CLASSES)} <= _chart_keys(at)
    assert list(tmp_path.iterdir()) == []


def test_the_first_replicate_pair_is_shown_while_the_others_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """With three replicates a side, the first answer (replicate 0 of both sides) is drawn
    once, as soon as that pair is in: after two of the six runs."""
    drawn: list[tuple[int, int, int]] = []
    original = views._first_answer

    def spy(s: object, request: object, pair: tuple[whatif.RunResult, whatif.RunResult], seconds: float) -> None:
        drawn.append((pair[0].replicate, pair[1].replicate, len(views._results())))
        original(s, request, pair, seconds)  # type: ignore[arg-type]

    monkeypatch.setattr(views, "_first_answer", spy)
    views._results().clear()
    at = _app()
    at.run()
    _type(at, "tiny", "research", "55")
    _run(at)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert drawn == [(0, 0, 2)]


def test_a_restarted_app_answers_a_whatif_it_ran_before_from_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finished runs are kept on disk: the next app process (nothing in memory) shows the
    same what-if again without running anything."""
    monkeypatch.setenv(run_cache.CACHE_ENV, str(tmp_path / "runs"))
    views._results.clear()
    try:
        at = _app()
        at.run()
        _type(at, "tiny", "research", "60")
        _run(at, replicates=2)
        assert not at.exception and not at.error, [e.value for e in at.error]
        before = {p: r.summary for p, r in at.session_state["whatif"][2].items()}
        assert len(list((tmp_path / "runs").glob(f"*{run_cache.SUFFIX}"))) == 4

        views._results.clear()  # a new app process
        started: list[object] = []
        monkeypatch.setattr(whatif, "run_points", lambda *a, **k: started.append(a) or {})
        again = _app()
        again.run()
        _type(again, "tiny", "research", "60")
        _run(again, replicates=2)
        assert not again.exception and not again.error, [e.value for e in again.error]
        assert started == []
        assert {p: r.summary for p, r in again.session_state["whatif"][2].items()} == before
    finally:
        views._results.clear()  # the next test's cache follows its own environment


def test_mip_shows_the_fairshare_preview_first() -> None:
    """Under mip, the fairshare runs come first, then the quick mip answer, and the mip
    result replaces them."""
    at = _app()
    at.run()
    _run(at, "mip", replicates=1)
    assert not at.exception and not at.error, [e.value for e in at.error]
    request, stage, _ = at.session_state["whatif"]
    assert stage == "mip" == request.policy
    ran = {k[2] for k in views._results() if k[0] == state.load_bundled("tiny").key and k[3] == request.days}
    assert {"fairshare", whatif.QUICK_STAGE, "mip"} <= ran


def test_a_quick_mip_answer_is_marked_as_such() -> None:
    """Results of the quick stage say so on the page and in the details, with its plan
    limit; the final mip results do not."""
    at = _app()
    at.run()
    _run(at, "mip", replicates=1)
    request, stage, runs = at.session_state["whatif"]
    assert not any("Quick mip answer" in i.value for i in at.info)
    at.session_state["whatif"] = (request, whatif.QUICK_STAGE, runs)
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(i.value.startswith(f"**Quick mip answer**: each plan searched for {whatif.QUICK_S}") for i in at.info)
    assert any(whatif.stage_words(whatif.QUICK_STAGE) in c.value for c in at.caption)


def test_a_mip_answer_says_how_many_plans_were_the_greedy_fallback() -> None:
    """Under mip the caption counts the runs' epoch plans and those that found no solver
    answer in time; a fairshare answer has no such line."""
    at = _app()
    at.run()
    _run(at, "mip", replicates=1)
    _, _, runs = at.session_state["whatif"]
    plans, fallbacks = whatif.plan_counts(runs.values())
    assert plans > 0
    assert any(whatif.plan_words(plans, fallbacks) in c.value for c in at.caption)
    _run(at, "fairshare", replicates=1)
    assert not any("epoch plans" in c.value for c in at.caption)


def test_the_local_dask_client_is_made_once_and_kept() -> None:
    """The app's Dask client is made once per process, with its workers, and the second
    call gets the same one."""
    client = views._dask(None, 1)
    try:
        assert len(client.scheduler_info()["workers"]) == 1
        assert views._dask(None, 1) is client
    finally:
        # Stop what this test started, and let no later test get the closed client.
        views._forget_dask()
        cluster = client.cluster
        client.close()
        cluster.close()


def test_the_apps_local_workers_run_below_the_pages_priority() -> None:
    """The app's local Dask workers lower their priority as they start, so the page is
    drawn first when both want the CPU."""
    import os

    from app_streamlit.worker_priority import NICENESS

    client = views._dask(None, 1)
    try:
        niceness = list(client.run(os.nice, 0).values())
        assert niceness == [os.nice(0) + NICENESS]
    finally:
        views._forget_dask()
        cluster = client.cluster
        client.close()
        cluster.close()


def test_the_whatif_page_starts_the_dask_connection_before_any_run() -> None:
    """Drawing the what-if page starts the connection in the background (here: none, 0
    workers), so the first Run what-if does not wait for a cluster to start."""
    views._forget_dask()
    at = _app()
    at.run()
    assert not at.exception
    started = views._CLIENTS.get((None, 0))
    assert started is not None
    assert started.result(timeout=30) is None
    assert "whatif" not in at.session_state  # nothing was run


def _edit_and_run(at: AppTest) -> dict[Any, Any]:
    """Give research 60 %, press Run what-if; the runs stored, after checking that the
    page shows no error."""
    _type(at, "tiny", "research", "60")
    at.button(key="run_whatif").click()
    at.run()
    assert not at.exception
    assert not at.error, [e.value for e in at.error]
    return dict(at.session_state["whatif"][2])


@pytest.fixture
def one_worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The app on a fresh local Dask cluster of one worker, with nothing run or warmed
    yet; the cluster is closed afterwards."""
    monkeypatch.setenv(views.WORKERS_ENV, "1")
    views._forget_dask()
    views._forget_warmup()
    views._results().clear()
    try:
        yield
    finally:
        started = views._CLIENTS.get((None, 1))
        views._forget_dask()
        views._forget_warmup()
        if started is not None:
            client = started.result(timeout=60)
            cluster = client.cluster
            client.close()
            cluster.close()


@pytest.mark.usefixtures("one_worker")
def test_the_whatif_page_runs_the_current_side_before_run_is_pressed() -> None:
    """Drawn with a local Dask cluster, the what-if page runs the current side's
    replicates in the background; Run what-if then uses those results instead of running
    them again, and runs only the edited side."""
    at = _app()
    at.session_state["policy"] = "fairshare"
    at.session_state["replicates"] = 2
    at.run()
    assert not at.exception
    key = state.load_bundled("tiny").key
    for _ in range(600):  # the warm-up's two runs, and the cluster's start
        if not views._WARMUP.busy:
            break
        threading.Event().wait(0.1)
    warmed = {k: r for k, r in views._results().items() if k[0] == key}
    assert sorted((k[1], k[2], k[4]) for k in warmed) == [((), "fairshare", 0), ((), "fairshare", 1)]
    runs = _edit_and_run(at)
    current = {p.replicate: r for p, r in runs.items() if p.budgets == "current"}
    assert all(current[k[4]] is r for k, r in warmed.items())  # the same results, not a rerun
    assert sorted(p.replicate for p in runs if p.budgets == "edited") == [0, 1]


@pytest.mark.usefixtures("one_worker")
def test_run_pressed_during_the_warm_up_runs_each_replicate_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Run what-if pressed while the page's warm-up of the current side is under way
    waits for those runs instead of starting them again: every run happens once."""
    batches: list[list[tuple[str, int]]] = []
    real = whatif.run_points

    def counted(scenario: Any, points: Any, *args: Any, **kwargs: Any) -> Any:
        batches.append(sorted((p.budgets, p.replicate) for p in points))
        return real(scenario, points, *args, **kwargs)

    monkeypatch.setattr(whatif, "run_points", counted)
    at = _app()
    at.session_state["policy"] = "fairshare"
    at.session_state["replicates"] = 2
    at.run()
    runs = _edit_and_run(at)
    assert len(runs) == 4
    ran = sorted(point for batch in batches for point in batch)
    assert ran == [("current", 0), ("current", 1), ("edited", 0), ("edited", 1)]


def test_a_failed_connection_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection that failed is not kept: the next what-if tries again."""
    views._forget_dask()
    calls: list[int] = []

    def flaky(scheduler: str | None, workers: int) -> object:
        calls.append(workers)
        if len(calls) == 1:
            raise OSError("scheduler unreachable")
        return "client"

    monkeypatch.setattr(views, "_connect", flaky)
    with pytest.raises(OSError):
        views._start_dask("tcp://nowhere:8786", 2).result(timeout=30)
    assert views._start_dask("tcp://nowhere:8786", 2).result(timeout=30) == "client"
    assert calls == [2, 2]
    views._forget_dask()


def test_mip_stages_follow_one_another() -> None:
    """The stage after each stored one: preview, quick mip, mip, then nothing; a
    scheduler without stages runs once."""
    request = whatif.Request(key="k", shares=(), policy="mip", days=1.0)
    seen = [views._next_stage(request, None)]
    while seen[-1] is not None:
        seen.append(views._next_stage(request, (request, seen[-1], {})))
    assert seen == ["fairshare", whatif.QUICK_STAGE, "mip", None]
    other = whatif.Request(key="k", shares=(), policy="fairshare", days=1.0)
    assert views._next_stage(other, None) == "fairshare"
    assert views._next_stage(other, (other, "fairshare", {})) is None
    # Results of other settings do not count as a stage done.
    assert views._next_stage(request, (other, "mip", {})) == "fairshare"


def test_the_quick_stage_downloads_say_its_plan_limit() -> None:
    """A download of the quick stage names the scheduler and its shorter plans."""
    tiny = state.load_bundled("tiny")
    request = whatif.Request(key=tiny.key, shares=(), policy="mip", days=1.0)
    meta = views.metadata(tiny.scenario, request, whatif.QUICK_STAGE)
    assert meta["scheduler"] == "mip"
    assert json.loads(meta["scheduler_options"])["time_limit"] == whatif.QUICK_OPTIONS["time_limit"]
    assert json.loads(views.metadata(tiny.scenario, request, "mip")["scheduler_options"]) == whatif.RUN_OPTIONS["mip"]


def test_the_csvs_carry_their_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each CSV download starts with the scenario, period, scheduler, replicates and shares."""
    import streamlit.testing.v1.app_test as app_test
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    stores: list[MemoryMediaFileStorage] = []

    class Kept(MemoryMediaFileStorage):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            stores.append(self)

    monkeypatch.setattr(app_test, "MemoryMediaFileStorage", Kept)
    at = _app()
    at.run()
    _type(at, "tiny", "research", "60")
    _run(at, replicates=2)
    buttons = {b.key: b for b in at.get("download_button")}
    for key in ("download_units", "download_summary"):
        name = buttons[key].proto.url.rsplit("/", 1)[-1]
        text = stores[-1].get_file(name).content.decode()
        header = [line for line in text.splitlines() if line.startswith("# ")]
        meta = dict(line[2:].split(": ", 1) for line in header)
        assert meta["scenario"] == "tiny" and meta["scheduler"] == "fairshare" and meta["replicates"] == "2"
        assert meta["period_days"] == str(state.default_days(state.load_bundled("tiny").scenario))
        assert "research" in meta["edited_shares"] and "arrival" in meta["replicate_method"]
        columns = text.splitlines()[len(header)]
        assert "_h" in columns  # waits in hours as well as seconds


def test_changing_budgets_after_a_run_marks_results_stale() -> None:
    """Results shown for other budgets than the editor's carry a warning to rerun."""
    at = _app()
    at.run()
    _run(at, replicates=1)
    assert not any("earlier settings" in w.value for w in at.warning)
    _type(at, "tiny", "infra", "30")
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
    assert pending.loc["j9", "Waiting because"].startswith("the only nodes it fits on are down for maintenance")
    assert any(i.value.startswith("Planned in") for i in at.info)
