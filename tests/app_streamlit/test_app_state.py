"""The app's scenario loading and budget editing, without Streamlit."""

from __future__ import annotations

import pytest
import yaml

from app_streamlit import state
from models import effective_shares
from scenarios.errors import ScenarioError
from scenarios.load import bundled_scenarios, parse_scenario


@pytest.fixture(scope="module")
def tiny() -> state.LoadedScenario:
    return state.load_bundled("tiny")


def test_edited_scenario_changes_shares_and_nothing_else(tiny: state.LoadedScenario) -> None:
    """An edited copy carries the new shares; the original scenario is untouched."""
    edited = state.with_edited_shares(tiny.scenario, {"research/vision": 2.0})
    assert effective_shares(edited.org)["research/vision"] == pytest.approx(0.375)
    assert effective_shares(tiny.scenario.org)["research/vision"] == pytest.approx(0.25)
    assert edited.jobs == tiny.scenario.jobs
    assert state.with_edited_shares(tiny.scenario, {}) is tiny.scenario


def test_download_keeps_the_generate_source() -> None:
    """The downloaded ai2-like file keeps `generate:` and loads back with the edited share."""
    loaded = state.load_bundled("ai2-like")
    project = loaded.scenario.projects[0]
    text = state.edited_scenario_yaml(loaded, {project: 42.0})
    data = yaml.safe_load(text)
    assert "generate" in data["workloads"] and "jobs" not in data["workloads"]
    again = parse_scenario(text, bundled_scenarios()["ai2-like"])
    assert {p: u.share for p, u in state.walk(again.org)}[project] == 42.0
    assert len(again.jobs) == len(loaded.scenario.jobs)
    assert text.startswith("# ai2-like: budgets edited")


def test_download_of_an_unknown_unit_is_an_error(tiny: state.LoadedScenario) -> None:
    """Editing a unit the file does not have is refused rather than silently dropped."""
    with pytest.raises(ScenarioError, match="unknown org unit"):
        state.edited_scenario_yaml(tiny, {"nobody": 1.0})


def test_uploaded_file_that_is_not_a_scenario_raises_the_validation_error() -> None:
    """An invalid upload raises ScenarioError naming the file and the field."""
    with pytest.raises(ScenarioError, match=r"^bad\.yaml: clusters: required field is missing"):
        state.load_uploaded("bad.yaml", b"name: x\norg: [{name: a, share: 1}]\n")
    with pytest.raises(ScenarioError, match="not a text file"):
        state.load_uploaded("bin.yaml", b"\xff\xfe\x00")


def test_default_period_reaches_the_busiest_hour() -> None:
    """The proposed period covers the hour where demand most exceeds the cluster: the
    first day of ai2-like (contended from the start), five days of philly-week."""
    for name, days in (("ai2-like", 1.0), ("philly-week", 5.0)):
        s = state.load_bundled(name).scenario
        assert state.default_days(s) == days
        busy, hours = state.contended_hours(state.demand_profile(s), 0.0, days)
        assert busy > hours / 10


def test_default_period_never_passes_the_workload(tiny: state.LoadedScenario) -> None:
    """A workload shorter than a day is simulated whole, no longer."""
    assert state.default_days(tiny.scenario) == pytest.approx(round(state.workload_days(tiny.scenario), 2))


@pytest.mark.parametrize(("text", "value"), [("22", 22.0), ("22.5", 22.5), ("10%", 10.0), (" 7 % ", 7.0)])
def test_parse_percent_reads_what_a_director_types(text: str, value: float) -> None:
    """A percentage may carry a % sign and spaces; "10%" is ten percent."""
    assert state.parse_percent(text, siblings=3) == value


@pytest.mark.parametrize(
    ("text", "message"),
    [("abc", "is not a percentage"), ("0", "above 0"), ("-3", "above 0"), ("100", "below 100"), ("", "not a percentage")],
)
def test_parse_percent_refuses_with_a_sentence(text: str, message: str) -> None:
    """Text, zero or less, and 100 % with siblings are refused with a reason."""
    with pytest.raises(ValueError, match=message):
        state.parse_percent(text, siblings=3)


def test_a_typed_percentage_is_what_the_unit_gets_and_siblings_rescale() -> None:
    """vision typed at 25 % of the cluster gets exactly 25 %; the other programs keep their
    proportions among themselves and the group sums to 100 %."""
    s = state.load_bundled("ai2-like").scenario
    before = state.parent_percents(s)
    shares, problems = state.shares_from_percents(s, {state.ROOT: {"vision": 25.0}})
    after = state.parent_percents(s, shares)
    assert not problems
    assert after["vision"] == pytest.approx(25.0)
    programs = [u.name for u in s.org]
    assert sum(after[p] for p in programs) == pytest.approx(100.0)
    others = [p for p in programs if p != "vision"]
    ratio = {p: after[p] / before[p] for p in others}
    assert max(ratio.values()) == pytest.approx(min(ratio.values()))
    # A team's percentage of its program is untouched by the programs' split.
    assert after["vision/multimodal"] == pytest.approx(before["vision/multimodal"])


def test_percentages_that_leave_nothing_for_the_others_are_a_group_problem() -> None:
    """Typed percentages of 100 % or more, with siblings left blank, are refused for the group."""
    s = state.load_bundled("ai2-like").scenario
    shares, problems = state.shares_from_percents(s, {state.ROOT: {"vision": 60.0, "language": 40.0}})
    assert shares == {}
    assert "leaves nothing" in problems[state.ROOT]


def test_every_percentage_typed_is_scaled_to_make_a_hundred(tiny: state.LoadedScenario) -> None:
    """When every sibling is typed and they do not sum to 100 %, each is scaled and a note says so."""
    edit = state.edit_group(tiny.scenario, ["research", "infra"], {"research": 60.0, "infra": 60.0})
    assert edit.note is not None and "scaled" in edit.note
    total = sum(edit.shares.values())
    assert edit.shares["research"] / total == pytest.approx(0.5)
