"""Fuzz: random mutations of a valid scenario load, or fail with the clean error only."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenarios import ScenarioError, parse_scenario

TINY = yaml.safe_load((Path(__file__).resolve().parents[2] / "scenarios" / "tiny.yaml").read_text())

JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["1h", "-5m", "0s", "H100", "research/nlp", "alpha", "9h", "1e400"]),
    st.lists(st.integers(min_value=-3, max_value=100), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


PATHS = _paths(TINY)


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    data = copy.deepcopy(TINY)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(PATHS))
        parent: Any = data
        try:
            for key in path[:-1]:
                parent = parent[key]
            action = draw(st.sampled_from(["replace", "delete", "add"]))
            if action == "replace":
                parent[path[-1]] = draw(JUNK)
            elif action == "delete":
                del parent[path[-1]]
            elif isinstance(parent, dict):
                parent[draw(st.text(min_size=1, max_size=6))] = draw(JUNK)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or retyped the path
    return data


@settings(derandomize=True, max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutations_load_or_fail_cleanly(data: dict[str, Any]) -> None:
    """Any mutation either yields a Scenario or raises ScenarioError with a one-line message."""
    try:
        text = yaml.safe_dump(data)
    except yaml.YAMLError:
        return
    try:
        parse_scenario(text, "fuzz.yaml")
    except ScenarioError as err:
        message = str(err)
        assert message.startswith("fuzz.yaml: ")
        assert "Traceback" not in message
        assert len(message) < 600
