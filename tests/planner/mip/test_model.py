"""The backend-neutral model and its restriction."""

from __future__ import annotations

import numpy as np
import pytest

from planner.mip.backends import BACKENDS
from planner.mip.model import LinearModel


def knapsack() -> LinearModel:
    m = LinearModel()
    a = m.add_var("a", 0, 3)
    b = m.add_var("b", 0, 1)
    m.add_constraint([(a, 2), (b, 3)], "<=", 7, "cap")
    m.add_objective(a, 3)
    m.add_objective(b, 5)
    return m


def test_violations_name_broken_constraints() -> None:
    """violations() lists the constraints and bounds a point breaks."""
    m = knapsack()
    assert m.violations(np.array([2, 1])) == []
    assert m.violations(np.array([3, 1])) == ["cap"]
    assert m.violations(np.array([4, 0])) == ["bound of a", "cap"]


def test_bad_bounds_are_rejected() -> None:
    """A variable with its lower bound above its upper bound is an error."""
    with pytest.raises(ValueError, match="lower bound"):
        LinearModel().add_var("x", 2, 1)


@pytest.mark.parametrize("name", [n for n, b in BACKENDS.items() if b.is_available()])
def test_backends_solve_the_knapsack(name: str) -> None:
    """Both backends find the optimum 11 (a=2, b=1) of the small knapsack."""
    result = BACKENDS[name].solve(knapsack(), time_limit=5.0, rel_gap=0.0)
    assert result.objective == 11
    assert list(result.values) == [2, 1]  # type: ignore[arg-type]


def test_restrict_substitutes_fixed_variables() -> None:
    """Fixing b=1 leaves a model over a with the rhs and objective offset adjusted."""
    m = knapsack()
    small, keep, full = m.restrict([0, 1], [3, 1])
    assert list(keep) == [0]
    assert small.constraints[0].rhs == 4
    assert small.objective_offset == 5
    full[keep] = [2]
    assert m.value(full) == 11


@pytest.mark.parametrize("name", [n for n, b in BACKENDS.items() if b.is_available()])
def test_objective_and_bound_include_the_constant(name: str) -> None:
    """Objective and bound are in the model's terms, constant included, bound >= objective."""
    m = knapsack()
    m.objective_offset = 100
    result = BACKENDS[name].solve(m, time_limit=5.0, rel_gap=0.0)
    assert result.objective == 111
    assert result.bound == 111
