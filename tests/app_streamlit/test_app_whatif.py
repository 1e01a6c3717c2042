"""What-if runs, replicates, the program-first comparison and the downloads, without Streamlit."""

from __future__ import annotations

import math

import pytest

from app_streamlit import state, whatif
from models import walk


@pytest.fixture(scope="module")
def pair() -> tuple[whatif.RunResult, whatif.RunResult]:
    tiny = state.load_bundled("tiny").scenario
    edited = state.with_edited_shares(tiny, {"research/vision": 4.0})
    base = whatif.run(tiny, "fairshare", 0.5)
    other = whatif.run(edited, "fairshare", 0.5)
    return base, other


def test_run_keeps_the_simulators_figures(pair: tuple[whatif.RunResult, whatif.RunResult]) -> None:
    """A result set holds every project and job of the simulation, and occupancy per hour."""
    base, _ = pair
    assert list(base.projects["project"]) == ["research/nlp", "research/vision", "infra"]
    assert set(base.jobs["class"]) <= {"debug", "batch", "large"}
    assert len(base.occupancy) == 12  # half a day, hour by hour
    assert base.occupancy["occupancy"].between(0, 1).all()
    assert 0 < base.summary["delivered_over_owed"] <= 1


def test_a_mip_run_keeps_its_plan_counts() -> None:
    """A what-if run under mip keeps how many epochs it planned and how many of those
    plans were the greedy fallback (the benchmark reports it); fairshare has none."""
    tiny = state.load_bundled("tiny").scenario
    run = whatif.replicate_run(tiny, "mip", days=2 / 24, time_limit=2.0, backend="pulp")
    assert run.extra["plans"] == 2
    assert 0 <= run.extra["fallbacks"] <= 2
    assert whatif.plan_counts([run, run]) == (4, 2 * run.extra["fallbacks"])
    fair = whatif.run(tiny, "fairshare", 2 / 24)
    assert fair.extra == {} and whatif.plan_counts([fair]) == (0, 0)


def test_plan_words_name_the_fallbacks_only_when_there_are_some() -> None:
    """Plans all from the solver say so; with fallbacks the sentence counts them; no plans
    (another scheduler), no sentence."""
    assert whatif.plan_words(1008, 0) == "All 1,008 epoch plans of the runs are the solver's."
    assert "12 found no solver answer in time" in whatif.plan_words(1008, 12)
    assert whatif.plan_words(0, 0) == ""


def test_owed_follows_the_edited_shares(pair: tuple[whatif.RunResult, whatif.RunResult]) -> None:
    """The edited run owes research/vision more GPU-hours than the current one."""
    base, other = (r.projects.set_index("project")["owed_gpu_h"] for r in pair)
    assert other["research/vision"] > base["research/vision"]


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.0, "0 s"), (45.0, "45 s"), (600.0, "10 min"), (9000.0, "2.5 h"), (math.nan, "n/a")]
)
def test_format_wait_picks_a_human_unit(seconds: float, text: str) -> None:
    """Waits print in seconds, minutes or hours as a person would say them."""
    assert whatif.format_wait(seconds) == text


@pytest.fixture(scope="module")
def replicated() -> dict[whatif.Point, whatif.RunResult]:
    """Both sides of tiny, three replicates each, through the sweep (in this process)."""
    tiny = state.load_bundled("tiny")
    points = whatif.points_for("fairshare", 3)
    return whatif.run_points(tiny.scenario, points, {"research/vision": 4.0}, 0.38, fingerprint=tiny.key)


def _sides(runs: dict[whatif.Point, whatif.RunResult]) -> tuple[list[whatif.RunResult], list[whatif.RunResult]]:
    ordered = sorted(runs.items(), key=lambda kv: kv[0].replicate)
    return [r for p, r in ordered if p.budgets == "current"], [r for p, r in ordered if p.budgets == "edited"]


def test_replicates_run_each_side_once_per_seed(replicated: dict[whatif.Point, whatif.RunResult]) -> None:
    """Six runs come back: current and edited budgets, replicates 0, 1 and 2, each its own."""
    assert sorted((p.budgets, p.replicate) for p in replicated) == [
        (side, r) for side in ("current", "edited") for r in range(3)
    ]
    assert {r.replicate for r in replicated.values()} == {0, 1, 2}


def test_runs_finish_in_replicate_pairs() -> None:
    """Run one by one, the points finish pair by pair (current then edited of replicate 0
    first), so the first comparison is in after two runs, not after one side's all."""
    tiny = state.load_bundled("tiny")
    order: list[tuple[str, int]] = []
    whatif.run_points(
        tiny.scenario, whatif.points_for("fairshare", 2), {"research/vision": 4.0}, 0.1,
        fingerprint=tiny.key, on_point=lambda p, r, e: order.append((p.budgets, p.replicate)),
    )
    assert order == [("current", 0), ("edited", 0), ("current", 1), ("edited", 1)]


def test_first_pair_waits_for_both_sides_of_the_first_replicate(
    replicated: dict[whatif.Point, whatif.RunResult],
) -> None:
    """The first answer needs replicate 0 of both sides; then it is that pair."""
    have: dict[whatif.Point, whatif.RunResult] = {}
    for point in sorted(replicated, key=lambda p: (p.budgets, p.replicate)):  # all current first
        assert whatif.first_pair(have) is None
        have[point] = replicated[point]
        if point.budgets == "edited":
            break
    pair = whatif.first_pair(have)
    assert pair is not None
    assert (pair[0].label, pair[0].replicate, pair[1].label, pair[1].replicate) == (
        "current budgets", 0, "edited budgets", 0
    )


def test_mip_runs_get_the_whatif_options_and_fairshare_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """The what-if's mip plans stop at its own time limit; other schedulers get no options."""
    import functools

    import planner.simulator

    seen: list[tuple[str, dict[str, object]]] = []
    real = planner.simulator.simulate

    @functools.wraps(real)
    def spy(scenario: object, policy: str, **kw: object) -> object:
        seen.append((policy, {k: v for k, v in kw.items() if k not in ("days", "progress")}))
        return real(scenario, policy, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(planner.simulator, "simulate", spy)
    tiny = state.load_bundled("tiny")
    for policy in ("mip", "fairshare"):
        whatif.run_points(tiny.scenario, [whatif.Point("current", policy, 0)], {}, 0.05, fingerprint=tiny.key)
    assert seen == [("mip", whatif.RUN_OPTIONS["mip"]), ("fairshare", {})]


def test_the_quick_stage_runs_mip_with_shorter_plans() -> None:
    """The quick stage is mip with its own, shorter limit; the last stage is mip with the
    what-if's options; other schedulers run once with none."""
    assert whatif.stages("mip") == ("fairshare", whatif.QUICK_STAGE, "mip")
    assert whatif.stages("legacy") == ("legacy",)
    policy, options = whatif.stage_run(whatif.QUICK_STAGE)
    assert policy == "mip" and options["time_limit"] < whatif.RUN_OPTIONS["mip"]["time_limit"]
    assert whatif.stage_run("mip") == ("mip", whatif.RUN_OPTIONS["mip"])
    assert whatif.stage_run("fairshare") == ("fairshare", {})
    assert f"{whatif.QUICK_OPTIONS['time_limit']:g} s a plan" in whatif.stage_words(whatif.QUICK_STAGE)
    assert whatif.stage_words("mip") == whatif.POLICY_WORDS["mip"]


def test_each_edit_of_one_scenario_reuses_its_sweep_base(monkeypatch: pytest.MonkeyPatch) -> None:
    """Running what-ifs of the same scenario again dumps it into a sweep base once; another
    scenario (or fingerprint) gets its own."""
    from scenarios.sweep import SweepBase

    made: list[str | None] = []
    real = SweepBase.of_scenario

    def counting(scenario: object, fingerprint: str | None = None) -> SweepBase:
        made.append(fingerprint)
        return real(scenario, fingerprint)  # type: ignore[arg-type]

    monkeypatch.setattr(SweepBase, "of_scenario", counting)
    monkeypatch.setattr(whatif, "_BASE", [])
    tiny = state.load_bundled("tiny")
    point = [whatif.Point("edited", "fairshare", 0)]
    for share in (2.0, 3.0):
        whatif.run_points(tiny.scenario, point, {"research/vision": share}, 0.05, fingerprint=tiny.key)
    assert made == [tiny.key]
    whatif.run_points(tiny.scenario, point, {"research/vision": 2.0}, 0.05, fingerprint="other")
    assert made == [tiny.key, "other"]


def test_perturbed_arrivals_move_jobs_by_at_most_the_jitter() -> None:
    """A replicate moves each arrival by up to JITTER_S, never before the start; seed 0 is the workload."""
    s = state.load_bundled("tiny").scenario
    assert whatif.perturb_arrivals(s, 0) is s
    moved = whatif.perturb_arrivals(s, 2)
    shifts = [b.submit - a.submit for a, b in zip(s.jobs, moved.jobs, strict=True)]
    assert any(abs(d) > 0 for d in shifts)
    assert all(abs(d) <= whatif.JITTER_S for d in shifts)
    assert all(j.submit >= 0 for j in moved.jobs)
    assert [j.submit for j in whatif.perturb_arrivals(s, 2).jobs] == [j.submit for j in moved.jobs]


def test_program_totals_are_the_sum_of_their_projects(replicated: dict[whatif.Point, whatif.RunResult]) -> None:
    """A program's owed, delivered and capped hours are the sums over its projects."""
    s = state.load_bundled("tiny").scenario
    current, edited = _sides(replicated)
    units = whatif.compare_units(s, state.with_edited_shares(s, {"research/vision": 4.0}), current, edited)
    rows = units.set_index("unit")
    for column in ("owed_gpu_h_now", "delivered_gpu_h_edited", "delivered_within_owed_gpu_h_now"):
        assert rows.loc["research", column] == pytest.approx(
            rows.loc["research/nlp", column] + rows.loc["research/vision", column]
        )
    assert (units["delivered_within_owed_gpu_h_now"] <= units["owed_gpu_h_now"] + 1e-6).all()



def test_a_units_wait_and_jobs_are_those_of_its_projects_jobs(pair: tuple[whatif.RunResult, whatif.RunResult]) -> None:
    """Each unit's p90 wait, job count and owed hours are those of the projects at or
    under its path, taken straight from the job and project tables."""
    s = state.load_bundled("tiny").scenario
    result = pair[0]
    figures = whatif.unit_figures(s, result).set_index("unit")
    jobs = result.jobs
    for path, _ in walk(s.org):
        mine = jobs[(jobs["project"] == path) | jobs["project"].str.startswith(path + "/")]
        assert figures.loc[path, "jobs"] == len(mine)
        if len(mine):
            assert figures.loc[path, "wait_p90_s"] == pytest.approx(mine["wait_s"].quantile(0.9))
        projects = result.projects
        under = projects[(projects["project"] == path) | projects["project"].str.startswith(path + "/")]
        assert figures.loc[path, "owed_gpu_h"] == pytest.approx(under["owed_gpu_h"].sum())

def test_replicates_produce_a_spread(replicated: dict[whatif.Point, whatif.RunResult]) -> None:
    """Perturbed arrivals change the outcome: the paired changes of some figure spread."""
    s = state.load_bundled("tiny").scenario
    current, edited = _sides(replicated)
    units = whatif.compare_units(s, state.with_edited_shares(s, {"research/vision": 4.0}), current, edited)
    spreads = units[[c for c in units.columns if c.endswith("_spread")]]
    assert (spreads > 1e-6).to_numpy().any()
    assert len({round(r.summary["delivered_over_owed"], 9) for r in current}) > 1


@pytest.mark.parametrize(
    ("current", "edited", "apart"),
    [([1, 2, 3], [4, 5, 6], True), ([1, 2, 5], [4, 5, 6], False), ([3, 3, 3], [1, 2, 2.9], True), ([1], [1], False)],
)
def test_separated_only_when_the_replicates_do_not_overlap(current: list[float], edited: list[float], apart: bool) -> None:
    """A change is outside the noise only when every edited replicate lies on one side of every current one."""
    assert whatif.separated(current, edited) is apart


def test_change_words_mark_noise() -> None:
    """A change within noise says so; one outside carries its spread and percentage."""
    assert whatif.change_words(707.0, 120.0, 14000.0, True) == "+707 GPU-h ± 120 (+5.0%)"
    assert whatif.change_words(-12.0, 40.0, 0.0, False) == "-12 GPU-h ± 40, within noise"


def test_csv_carries_its_metadata_and_waits_in_hours() -> None:
    """A download starts with # key: value lines that read_csv skips, and waits come in hours too."""
    import io

    import pandas as pd

    frame = pd.DataFrame({"unit": ["a"], "wait_p90_s_all": [7200.0]})
    text = whatif.csv_with_metadata(whatif.with_readable_waits(frame), {"scenario": "tiny", "replicates": 3})
    assert text.splitlines()[:2] == ["# scenario: tiny", "# replicates: 3"]
    back = pd.read_csv(io.StringIO(text), comment="#")
    assert back.loc[0, "wait_p90_h_all"] == 2.0
