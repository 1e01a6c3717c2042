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


def test_violations_check_every_sense_and_empty_rows() -> None:
    """violations() checks <=, >= and == rows, in row order, and an empty row as 0."""
    m = LinearModel()
    a = m.add_var("a", 0, 5)
    b = m.add_var("b", 0, 5)
    m.add_constraint([(a, 1), (b, 1)], ">=", 3, "at_least")
    m.add_constraint([(a, 0)], "<=", -1, "empty")  # no terms left: 0 <= -1 breaks
    m.add_constraint([(a, 2), (b, -1)], "==", 1, "equal")
    assert m.violations(np.array([1, 1])) == ["at_least", "empty"]
    assert m.violations(np.array([2, 2])) == ["empty", "equal"]


def test_row_values_follow_added_constraints() -> None:
    """row_values() gives each row's left-hand side, also for rows added after a call."""
    m = knapsack()
    assert m.row_values(np.array([2, 1])).tolist() == [7]
    m.add_constraint([(0, 1), (1, -4)], "<=", 0, "more")
    assert m.row_values(np.array([2, 1])).tolist() == [7, -2]
    assert m.rows().count == 2


def test_set_coefs_changes_a_row_and_its_stack() -> None:
    """set_coefs() gives a row new coefficients; the stacked rows and checks follow."""
    m = knapsack()
    assert m.rows().coefs.tolist() == [2, 3]
    m.set_coefs(0, np.array([2, 1]))
    assert m.rows().coefs.tolist() == [2, 1]
    assert m.row_values(np.array([3, 1])).tolist() == [7]
    assert m.violations(np.array([3, 1])) == []  # 2 * 3 + 1 <= 7; it was 9 before


def test_set_coefs_rejects_a_wrong_count() -> None:
    """A coefficient per variable of the row, or a ValueError that names the row."""
    m = knapsack()
    with pytest.raises(ValueError, match="cap: 1 coefficients for 2 variables"):
        m.set_coefs(0, np.array([2]))


def test_value_truncates_like_int() -> None:
    """value() reads each value as int() would, offset included."""
    m = knapsack()
    m.objective_offset = 10
    assert m.value(np.array([2.9, 1.0])) == 10 + 3 * 2 + 5 * 1


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


def test_cpsat_reports_earlier_incumbents() -> None:
    """CP-SAT returns the incumbents it found before its answer: feasible, distinct, worse."""
    backend = BACKENDS["cpsat"]
    if not backend.is_available():
        pytest.skip("OR-Tools not installed")
    # Too hard for presolve alone, so the search improves its incumbent several times.
    m = hard_knapsack()
    m.hint = dict.fromkeys(range(m.num_vars), 0)  # a feasible, poor start to improve on
    result = backend.solve(m, time_limit=2.0, rel_gap=0.0)
    assert result.values is not None and result.objective is not None
    assert result.earlier
    for values in result.earlier:
        assert m.violations(values) == []
        assert not np.array_equal(values, result.values)
        assert m.value(values) <= result.objective


def hard_knapsack() -> LinearModel:
    """A multi-dimensional knapsack that CP-SAT cannot prove optimal at once."""
    rng = np.random.default_rng(7)
    m = LinearModel()
    xs = [m.add_var(f"x{i}", 0, 1) for i in range(150)]
    for r in range(6):
        weights = rng.integers(5, 60, size=len(xs))
        m.add_constraint([(x, int(w)) for x, w in zip(xs, weights, strict=True)], "<=", 1500, f"cap{r}")
    for x in xs:
        m.add_objective(x, int(rng.integers(1, 60)))
    return m


def test_restrict_keeps_the_stop_objective() -> None:
    """The restricted model keeps stop_at: both objectives are the same, offset included."""
    m = knapsack()
    m.stop_at = 9
    small, _, _ = m.restrict([0, 1], [3, 1])
    assert small.stop_at == 9


def test_cpsat_stops_at_the_first_incumbent_reaching_stop_at() -> None:
    """With stop_at far below the optimum, CP-SAT returns an unproven incumbent that reaches it."""
    backend = BACKENDS["cpsat"]
    if not backend.is_available():
        pytest.skip("OR-Tools not installed")
    full = backend.solve(hard_knapsack(), time_limit=10.0, rel_gap=0.0)
    assert full.objective is not None
    m = hard_knapsack()
    m.stop_at = int(0.5 * full.objective)
    result = backend.solve(m, time_limit=10.0, rel_gap=0.0)
    assert result.objective is not None and result.values is not None
    assert m.stop_at <= result.objective < full.objective
    assert m.violations(result.values) == []


def test_restrict_drops_fixed_rows_and_keeps_orders() -> None:
    """restrict() drops rows with every term fixed, moves fixed terms to the rhs, and
    keeps the objective's and the hint's order over the free variables."""
    m = LinearModel()
    a = m.add_var("a", 0, 3)
    b = m.add_var("b", 0, 3)
    c = m.add_var("c", 0, 3)
    m.add_constraint([(a, 1), (b, 1)], "<=", 4, "ab")
    m.add_constraint([(c, 2), (b, 1)], ">=", 1, "cb")
    m.add_objective(c, 7)
    m.add_objective(b, 2)
    m.add_objective(a, 1)
    m.hint = {c: 1, a: 2, b: 0}
    small, keep, full = m.restrict([0, 2, 0], [3, 2, 3])  # b fixed at 2
    assert list(keep) == [0, 2]
    assert [(k.name, k.vars.tolist(), k.coefs.tolist(), k.rhs) for k in small.constraints] == [
        ("ab", [0], [1], 2),
        ("cb", [1], [2], -1),
    ]
    assert list(small.objective.items()) == [(1, 7), (0, 1)]
    assert small.objective_offset == 4
    assert list(small.hint.items()) == [(1, 1), (0, 2)]
    tiny, _, _ = m.restrict([1, 2, 0], [1, 2, 3])  # a and b fixed: row "ab" drops out
    assert [k.name for k in tiny.constraints] == ["cb"]


def test_with_bounds_shares_the_rows() -> None:
    """with_bounds() gives the same constraints and objective under new bounds and hint."""
    m = knapsack()
    m.rows()
    other = m.with_bounds([1, 0], [1, 0], {0: 1})
    assert other.constraints is m.constraints and other.objective is m.objective
    assert other.rows() is m.rows()
    assert (other.lower, other.upper, other.hint) == ([1, 0], [1, 0], {0: 1})


@pytest.mark.parametrize("size", [3, 100])
def test_add_constraint_sums_repeats_and_drops_zeros(size: int) -> None:
    """A row keeps its terms' order when no variable repeats (zero coefficients dropped),
    and sums repeated variables in variable order otherwise, small rows and large alike."""
    m = LinearModel()
    for i in range(size):
        m.add_var(f"v{i}", 0, 1)
    order = list(range(size))[::-1]
    m.add_constraint([(v, 0 if v == 1 else v + 1) for v in order], "<=", 5, "distinct")
    rest = [(v, 1) for v in range(3, size)]
    m.add_constraint((t for t in [(2, 3), (0, 1), *rest, (2, -3), (1, 2), (0, 1)]), ">=", 1, "repeats")
    distinct, repeats = m.constraints
    assert distinct.vars.tolist() == [v for v in order if v != 1]
    assert distinct.coefs.tolist() == [v + 1 for v in order if v != 1]
    assert repeats.vars.tolist() == [0, 1, *range(3, size)]
    assert repeats.coefs.tolist() == [2, 2] + [1] * (size - 3)


def test_a_model_sent_to_another_process_arrives_whole() -> None:
    """Pickled as stacked rows (how it reaches the solver process), a model unpickles to
    the same variables, rows (terms, sense, right-hand side, name), objective and hint."""
    import pickle

    m = LinearModel()
    a = m.add_var("a", 0, 5)
    b = m.add_var("b", -2, 5)
    m.add_constraint([(a, 1), (b, 1)], ">=", 3, "at_least")
    m.add_constraint([(a, 0)], "<=", -1, "empty")
    m.add_constraint([(a, 2), (b, -1)], "==", 1, "equal")
    m.add_objective(a, 3)
    m.hint = {a: 2}
    m.stop_at = 4
    copy = pickle.loads(pickle.dumps(m))
    assert (copy.names, copy.lower, copy.upper) == (["a", "b"], [0, -2], [5, 5])
    assert [(c.vars.tolist(), c.coefs.tolist(), c.sense, c.rhs, c.name) for c in copy.constraints] == [
        ([a, b], [1, 1], ">=", 3, "at_least"),
        ([], [], "<=", -1, "empty"),
        ([a, b], [2, -1], "==", 1, "equal"),
    ]
    assert (copy.objective, copy.hint, copy.stop_at) == ({a: 3}, {a: 2}, 4)
    assert copy.violations(np.array([1, 1])) == m.violations(np.array([1, 1])) == ["at_least", "empty"]
    copy.add_constraint([(b, 1)], "<=", 4, "more")  # and it still grows
    assert len(copy.rows().rhs) == 4 and len(m.constraints) == 3


def test_add_vars_appends_after_the_existing_in_order() -> None:
    """add_vars returns the first new index; the variables follow it in order."""
    m = LinearModel()
    m.add_var("a", 0, 1)
    first = m.add_vars(["b", "c"], [0, -1], [3, 4])
    assert first == 1
    assert (m.names, m.lower, m.upper) == (["a", "b", "c"], [0, 0, -1], [1, 3, 4])


def test_add_vars_rejects_bad_bounds_and_adds_none() -> None:
    """A variable whose lower bound is above its upper is named; nothing is added."""
    m = LinearModel()
    with pytest.raises(ValueError, match="variable c: lower bound 5 above upper bound 4"):
        m.add_vars(["b", "c"], [0, 5], [3, 4])
    with pytest.raises(ValueError, match="differ in length"):
        m.add_vars(["b"], [0, 0], [1, 1])
    assert m.num_vars == 0


def test_add_row_is_add_constraint_with_the_terms_split() -> None:
    """add_row and add_constraint make the same row, repeats summed and zeros dropped."""
    pairs = [(2, 3), (0, 1), (2, -3), (1, 0), (0, 4)]
    a, b = LinearModel(), LinearModel()
    for m in (a, b):
        m.add_vars(["x", "y", "z"], [0, 0, 0], [1, 1, 1])
    a.add_constraint(pairs, "<=", 7, "r")
    b.add_row(np.array([v for v, _ in pairs]), np.array([c for _, c in pairs]), "<=", 7, "r")
    (ra,), (rb,) = a.constraints, b.constraints
    assert (ra.vars.tolist(), ra.coefs.tolist(), ra.sense, ra.rhs, ra.name) == ([0], [5], "<=", 7, "r")
    assert (rb.vars.tolist(), rb.coefs.tolist(), rb.sense, rb.rhs, rb.name) == ([0], [5], "<=", 7, "r")


def test_add_objectives_sums_like_add_objective() -> None:
    """Coefficients add to those already there; zeros add no entry."""
    m = LinearModel()
    m.add_vars(["x", "y", "z"], [0, 0, 0], [1, 1, 1])
    m.add_objective(0, 2)
    m.add_objectives(np.array([0, 1, 2]), np.array([3, 0, -1]))
    assert m.objective == {0: 5, 2: -1}
