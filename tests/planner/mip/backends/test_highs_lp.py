"""HiGHS's LP session (:class:`planner.mip.backends.highs_lp.HighsLp`): its model solved as
integers (``run_integer``), for the Lagrangian bound's parts, and under new prices
(``set_objective``), for the master's columns."""

from __future__ import annotations

import numpy as np
import pytest

from planner.mip.backends.highs_lp import HighsLp, highs_available
from planner.mip.model import Constraint, LinearModel

pytestmark = pytest.mark.skipif(not highs_available(), reason="HiGHS is not installed")


def _half_each() -> LinearModel:
    """max 3x + 2y over integers 0..1 with 2x + 2y <= 3: the LP takes x = 1, y = 0.5
    (4); whole values, x = 1 and y = 0 (3)."""
    m = LinearModel()
    x, y = m.add_var("x", 0, 1), m.add_var("y", 0, 1)
    m.add_constraint([(x, 2), (y, 2)], "<=", 3)
    m.add_objective(x, 3)
    m.add_objective(y, 2)
    return m


def test_run_integer_proves_the_integer_optimum() -> None:
    """The bound is the integer optimum 3 (not the LP's 4), proved, with its point."""
    session = HighsLp(_half_each())
    answer = session.run_integer(5.0)
    assert answer is not None
    assert answer.exact
    assert answer.bound == pytest.approx(3.0)
    assert answer.values is not None and list(answer.values) == pytest.approx([1.0, 0.0])


def test_the_session_is_an_lp_again_after_run_integer() -> None:
    """The columns are continuous again: the next run is the LP's optimum, 4."""
    session = HighsLp(_half_each())
    assert session.run_integer(5.0) is not None
    assert session.run(5.0)
    assert session.objective() == pytest.approx(4.0)


def test_set_objective_solves_the_same_lp_under_new_prices() -> None:
    """After the LP's optimum (x = 1, y = 0.5), maximizing 1x + 4y instead takes y = 1
    and x = 0.5 (4.5), as a fresh session with that objective does."""
    session = HighsLp(_half_each())
    assert session.run(5.0)
    session.set_objective(np.array([1.0, 4.0]))
    assert session.run(5.0)
    assert session.objective() == pytest.approx(4.5)
    assert list(session.values()) == pytest.approx([0.5, 1.0])


def test_set_coefs_solves_the_lp_with_the_new_row() -> None:
    """After the LP's optimum (x = 1, y = 0.5), the row made 2x + 4y <= 3 takes
    y = 0.25 instead (3.5)."""
    session = HighsLp(_half_each())
    assert session.run(5.0)
    session.set_coefs(np.array([0]), np.array([1]), np.array([4]))
    assert session.run(5.0)
    assert session.objective() == pytest.approx(3.5)
    assert list(session.values()) == pytest.approx([1.0, 0.25])


def test_add_rows_cuts_the_optimum_off_and_drop_rows_restores_it() -> None:
    """After the LP's optimum (x = 1, y = 0.5, 4), the row x + y <= 1 takes y = 0 (3);
    dropped again, the LP is back at 4."""
    session = HighsLp(_half_each())
    assert session.run(5.0)
    session.add_rows([Constraint(np.array([0, 1]), np.array([1, 1]), "<=", 1, "cut")])
    assert session.run(5.0)
    assert session.objective() == pytest.approx(3.0)
    assert len(session.duals()) == 2
    session.drop_rows(1)
    assert session.run(5.0)
    assert session.objective() == pytest.approx(4.0)
    assert len(session.duals()) == 1


def _presolve(highs: object) -> str:
    """HiGHS's presolve option (some highspy releases return it with a status)."""
    value = highs.getOptionValue("presolve")  # type: ignore[attr-defined]
    return str(value[1] if isinstance(value, tuple) else value)


def test_lp_runs_skip_presolve_and_integer_runs_keep_it() -> None:
    """The LP runs go without HiGHS's presolve (the same optimum, faster on the epoch
    LPs); an integer run presolves, and the LP runs after it go without again."""
    session = HighsLp(_half_each())
    highs = session._h  # the HiGHS object, to read its options
    assert _presolve(highs) == "off"
    assert session.run(5.0)
    assert session.objective() == pytest.approx(4.0)
    seen: list[str] = []
    run = highs.run

    def spy() -> object:
        seen.append(_presolve(highs))
        return run()

    highs.run = spy
    assert session.run_integer(5.0) is not None
    assert seen == ["choose"]
    assert _presolve(highs) == "off"


def _knapsack() -> LinearModel:
    """Twelve 0/1 items of weights 3-14 within 40, each worth its weight plus one: the
    best fill (40 of weight) is worth 40 plus its item count."""
    m = LinearModel()
    for w in range(3, 15):
        v = m.add_var(f"x{w}", 0, 1)
        m.add_objective(v, w + 1)
    m.add_constraint([(v, w) for v, w in zip(range(12), range(3, 15), strict=True)], "<=", 40)
    return m


def test_run_integer_from_a_start_returns_at_least_the_start() -> None:
    """Given a start (items of weights 3-7 and 14: 39 of weight, worth 45) and no time
    for a search, the answer is that start or better, never worse and never none."""
    m = _knapsack()
    start = np.array([1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1], dtype=np.int64)
    assert m.value(start) == 45
    answer = HighsLp(m).run_integer(1e-6, start=start)
    assert answer is not None and answer.values is not None
    assert m.value(np.round(answer.values)) >= 45
