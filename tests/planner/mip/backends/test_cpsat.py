"""CP-SAT searches several models at once, one worker each."""

from __future__ import annotations

import pytest

from models import SolveStatus
from planner.mip.backends.cpsat import CpSatBackend
from planner.mip.model import LinearModel


def knapsack(capacity: int) -> LinearModel:
    """Items of weight 3, 4, 5 and value 4, 5, 6: the best value within ``capacity``."""
    m = LinearModel()
    xs = [m.add_var(f"x{i}", 0, 1) for i in range(3)]
    m.add_constraint(list(zip(xs, (3, 4, 5), strict=True)), "<=", capacity)
    for x, value in zip(xs, (4, 5, 6), strict=True):
        m.add_objective(x, value)
    return m


@pytest.mark.parametrize("isolate", [False, True])
def test_solve_many_answers_each_model_in_its_order(isolate: bool) -> None:
    """Two models searched at once: each result is its own model's optimum (capacity 7:
    items 1 and 2, value 9; capacity 5: item 3 alone, value 6), in the order asked."""
    backend = CpSatBackend(isolate=isolate)
    found = backend.solve_many([knapsack(7), knapsack(5)], time_limit=10.0, rel_gap=0.0)
    assert [r.status for r in found] == [SolveStatus.OPTIMAL, SolveStatus.OPTIMAL]
    assert [r.objective for r in found] == [9.0, 6.0]
    assert found[0].values is not None and found[0].values.tolist() == [1, 1, 0]
    assert found[1].values is not None and found[1].values.tolist() == [0, 0, 1]
