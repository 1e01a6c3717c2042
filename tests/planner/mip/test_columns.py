"""The restricted master over per-project columns (:mod:`planner.mip.columns`): dives
give integer points of each part, the master recombines them within the shared rows."""

from __future__ import annotations

import time

import numpy as np
import pytest

from planner.mip import columns
from planner.mip.backends import lp_backend
from planner.mip.backends.cpsat import CpSatBackend
from planner.mip.epoch import build_epoch
from planner.mip.formulation import Formulation, apply
from planner.mip.model import LinearModel
from planner.mip.relax import Parts, lp_available, part_model, split_parts

from .test_lagrangian import a_step_between_jobs

pytestmark = pytest.mark.skipif(not lp_available(), reason="no LP-capable backend")


def test_a_dive_ends_on_an_integer_point_of_its_model() -> None:
    """max 5a + 4b + 3c, 2a + 3b + 2c <= 5, binary: the LP takes b = 1/3; the dive
    fixes it and ends on a feasible integer point no better than the optimum 9."""
    m = LinearModel()
    xs = [m.add_var(n, 0, 1) for n in "abc"]
    m.add_constraint(zip(xs, [2, 3, 2], strict=True), "<=", 5, "cap")
    for x, c in zip(xs, [5, 4, 3], strict=True):
        m.add_objective(x, c)
    lp = lp_backend()
    assert lp is not None
    session = lp.open_lp(m)
    assert session.run(5.0)
    assert not np.allclose(session.values(), np.round(session.values()))
    point = columns.dive(
        lp.open_lp(m), np.zeros(3), np.ones(3), np.ones(3, dtype=bool), time.perf_counter() + 5.0
    )
    assert point is not None
    assert m.violations(point) == []
    assert m.value(point) <= 9


def test_a_dive_settles_the_decisions_before_what_follows_them() -> None:
    """A decision ``x`` (0..3) and what follows it, ``y <= 2x``, worth 1 a unit while
    ``x`` costs 1: the LP optimum has ``x`` at 1.5 under ``x <= 1.5``; the dive rounds
    ``x`` first, and ``y`` then follows the rounded ``x`` (never above ``2x``)."""
    m = LinearModel()
    x, y = m.add_var("x", 0, 3), m.add_var("y", 0, 10)
    m.add_constraint([(x, 2)], "<=", 3, "half")
    m.add_constraint([(y, 1), (x, -2)], "<=", 0, "follows")
    m.add_objective(x, -1)
    m.add_objective(y, 1)
    lp = lp_backend()
    assert lp is not None
    point = columns.dive(
        lp.open_lp(m), np.zeros(2), np.array([3.0, 10.0]), np.array([True, False]), time.perf_counter() + 5.0
    )
    assert point is not None
    assert m.violations(point) == []
    assert point[1] == 2 * point[0]


def test_each_price_vector_of_a_part_dives_from_the_parts_own_bounds() -> None:
    """One part, two price vectors, one LP: the first (5a + 4b + 3c) dives to a point
    with ``a`` or ``c`` fixed at 1; the second (-a - b + 10c) must not start from those
    fixings, and ends on its own optimum a = b = 0, c = 1."""
    m = LinearModel()
    xs = [m.add_var(n, 0, 1) for n in "abc"]
    m.add_constraint(zip(xs, [2, 3, 2], strict=True), "<=", 5, "cap")
    lp = lp_backend()
    assert lp is not None
    prices = [np.array([5.0, 4.0, 3.0]), np.array([-1.0, -1.0, 10.0])]
    [found] = columns.dive_parts(lp, [m], [prices], [np.ones(3, dtype=bool)], 5.0)
    assert len(found) == 2
    assert found[0][0] + found[0][2] >= 1
    assert found[1].tolist() == [0, 0, 1]


def _shared() -> tuple[LinearModel, list[int]]:
    """Two projects' starts ``a`` and ``b`` (each 0..4, in a row of its own) and a
    variable ``f`` in no project (0..1) share ``a + b + f <= 5``; ``a`` is worth 3 a
    unit, ``b`` 5, ``f`` 1. Optimum: b = 4, f = 1 (21)."""
    m = LinearModel()
    a, b, f = m.add_var("a", 0, 4), m.add_var("b", 0, 4), m.add_var("f", 0, 1)
    m.add_constraint([(a, 1)], "<=", 4, "own[a]")
    m.add_constraint([(b, 1)], "<=", 4, "own[b]")
    m.add_constraint([(a, 1), (b, 1), (f, 1)], "<=", 5, "capacity[0,0]")
    for var, coef in ((a, 3), (b, 5), (f, 1)):
        m.add_objective(var, coef)
    return m, [2]


def _by_name(m: LinearModel, parts: Parts) -> dict[str, int]:
    """Each part's root, by the name of its first variable."""
    return {m.names[int(idx[0])]: root for root, idx in parts.members.items()}


def test_the_master_recombines_the_columns_within_the_shared_rows() -> None:
    """From the incumbent a = 4, f = 1 (13), with the other column of each project
    (a = 0, b = 4): the master gives b's room to b, a = 0, b = 4, f = 1 (21)."""
    m, coupling = _shared()
    parts = split_parts(m, coupling)
    assert len(parts.rows) == 2
    by_name = _by_name(m, parts)
    found = columns.ColumnSet(
        parts, {by_name["a"]: [np.array([0])], by_name["b"]: [np.array([4])]}
    )
    incumbent = np.array([4, 0, 1])
    master = columns.restricted_master(m, coupling, found, incumbent)
    answer = CpSatBackend().solve(master.model, time_limit=10.0, rel_gap=0.0)
    assert answer.values is not None
    values = master.values(answer.values)
    assert values.tolist() == [0, 4, 1]
    assert m.violations(values) == []
    assert m.value(values) == answer.objective == 21


def test_the_masters_shared_row_charges_each_column_what_it_uses() -> None:
    """Project ``a`` (two variables) and ``b`` share ``f + 2 a1 + 3 a2 + b <= 12`` with a
    free ``f``. The master's row: ``f`` as it is, the incumbent's column of ``a``
    (2, 0) at 4, its column (1, 2) at 8, (0, 0) left out (it uses nothing), and ``b``'s
    columns 1 and 3 at 1 and 3, in the order the row names them."""
    m = LinearModel()
    f, a1, a2, b = (m.add_var(n, 0, 3) for n in ("f", "a1", "a2", "b"))
    m.add_constraint([(a1, 1), (a2, 1)], "<=", 3, "own[a]")
    m.add_constraint([(b, 1)], "<=", 3, "own[b]")
    m.add_constraint([(f, 1), (a1, 2), (a2, 3), (b, 1)], "<=", 12, "capacity[0,0]")
    parts = split_parts(m, [2])
    by_name = _by_name(m, parts)
    found = columns.ColumnSet(
        parts, {by_name["a1"]: [np.array([1, 2]), np.array([0, 0])], by_name["b"]: [np.array([3])]}
    )
    master = columns.restricted_master(m, [2], found, np.array([0, 2, 0, 1]))
    row = master.model.constraints[-1]
    terms = [(master.model.names[v], c) for v, c in zip(row.vars.tolist(), row.coefs.tolist(), strict=True)]
    a, bb = by_name["a1"], by_name["b"]
    assert terms == [("f", 1), (f"column[{a},0]", 4), (f"column[{a},1]", 8), (f"column[{bb},0]", 1), (f"column[{bb},1]", 3)]
    assert (row.sense, row.rhs, row.name) == ("<=", 12, "capacity[0,0]")


def test_a_point_gives_a_column_to_each_part_where_it_is_integral() -> None:
    """No dived column for either project; the point a = 0, b = 4 (integral in both)
    gives each part a column, and the master recombines them: b = 4, f = 1 (21)."""
    m, coupling = _shared()
    parts = split_parts(m, coupling)
    by_name = _by_name(m, parts)
    found, added = columns.with_point_columns(columns.ColumnSet(parts, {}), np.array([0.0, 4.0, 0.3]))
    assert added == 2
    assert {r: [c.tolist() for c in cols] for r, cols in found.columns.items()} == {
        by_name["a"]: [[0]],
        by_name["b"]: [[4]],
    }
    master = columns.restricted_master(m, coupling, found, np.array([4, 0, 1]))
    answer = CpSatBackend().solve(master.model, time_limit=10.0, rel_gap=0.0)
    assert answer.values is not None
    assert master.values(answer.values).tolist() == [0, 4, 1]


def test_a_point_fractional_in_a_part_gives_it_no_column() -> None:
    """The point a = 0.5, b = 4: only ``b`` gets a column."""
    m, coupling = _shared()
    parts = split_parts(m, coupling)
    half, added = columns.with_point_columns(columns.ColumnSet(parts, {}), np.array([0.5, 4.0, 0.0]))
    assert added == 1
    assert list(half.columns) == [_by_name(m, parts)["b"]]


def test_a_point_adds_no_column_a_part_has_already() -> None:
    """Both parts already hold the point's pieces (a = 0, b = 4): nothing is added."""
    m, coupling = _shared()
    parts = split_parts(m, coupling)
    by_name = _by_name(m, parts)
    found = columns.ColumnSet(parts, {by_name["a"]: [np.array([0])], by_name["b"]: [np.array([4])]})
    again, added = columns.with_point_columns(found, np.array([0.0, 4.0, 0.0]))
    assert added == 0
    assert again.count == 2


def test_a_master_with_only_the_incumbents_columns_keeps_the_incumbent() -> None:
    """No column found for either project: the incumbent is the master's only point
    (its free variable ``f`` at the best the shared row leaves)."""
    m, coupling = _shared()
    found = columns.ColumnSet(split_parts(m, coupling), {})
    incumbent = np.array([4, 0, 1])
    master = columns.restricted_master(m, coupling, found, incumbent)
    assert master.model.hint  # the incumbent, as a MIP start
    answer = CpSatBackend().solve(master.model, time_limit=10.0, rel_gap=0.0)
    assert answer.values is not None
    assert master.values(answer.values).tolist() == [4, 0, 1]


def test_the_masters_prices_are_read_back_onto_the_whole_models_rows() -> None:
    """The master of the shared instance from the incumbent a = 4, f = 1 and b's column
    4: its LP takes a quarter of b's column (17), so the shared row is worth 5 a unit
    (b's 20 over its 4 units); each part's price of a column is what its column in
    the LP's basis is worth at that price (a: 12 - 5 * 4 = -8)."""
    m, coupling = _shared()
    parts = split_parts(m, coupling)
    by_name = _by_name(m, parts)
    found = columns.ColumnSet(parts, {by_name["b"]: [np.array([4])]})
    master = columns.restricted_master(m, coupling, found, np.array([4, 0, 1]))
    lp = lp_backend()
    assert lp is not None
    session = lp.open_lp(master.model)
    assert session.run(5.0)
    assert session.objective() == pytest.approx(17.0)
    prices, per_column = master.prices(session.duals(), coupling, len(m.constraints))
    assert prices.tolist() == pytest.approx([0.0, 0.0, 5.0])
    assert per_column[by_name["a"]] == pytest.approx(-8.0)


def test_the_masters_prices_find_the_columns_it_lacks() -> None:
    """From the incumbent a = 4, f = 1 (13) with no other column: under the master's
    first prices (the shared row worth at most 1) b's dive starts b = 4, a new column;
    under the second (5 a unit, from b's 20 over 4) a's dive leaves a = 0. The master
    over them finds the optimum a = 0, b = 4, f = 1 (21)."""
    m, coupling = _shared()
    parts = split_parts(m, coupling)
    by_name = _by_name(m, parts)
    lp = lp_backend()
    assert lp is not None
    incumbent = np.array([4, 0, 1])
    decisions = np.ones(3, dtype=bool)
    priced = columns.priced_by_master(
        m, coupling, columns.ColumnSet(parts, {}), incumbent, decisions, lp, time.perf_counter() + 10.0, rounds=2
    )
    found = priced.columns
    assert priced.dived == 2
    assert {r: [c.tolist() for c in cols] for r, cols in found.columns.items()} == {
        by_name["b"]: [[4]],
        by_name["a"]: [[0]],
    }
    master = columns.restricted_master(m, coupling, found, incumbent)
    answer = CpSatBackend().solve(master.model, time_limit=10.0, rel_gap=0.0)
    assert answer.values is not None
    assert master.values(answer.values).tolist() == [0, 4, 1]
    assert answer.objective == 21


def test_one_round_of_the_masters_prices_gives_only_the_column_its_first_prices_ask_for() -> None:
    """One round: b's column 4 joins; a's dive at the first prices starts a = 4 again,
    the incumbent's own column, which does not join."""
    m, coupling = _shared()
    parts = split_parts(m, coupling)
    lp = lp_backend()
    assert lp is not None
    priced = columns.priced_by_master(
        m, coupling, columns.ColumnSet(parts, {}), np.array([4, 0, 1]), np.ones(3, dtype=bool), lp,
        time.perf_counter() + 10.0, rounds=1,
    )
    assert priced.dived == 1
    assert list(priced.columns.columns) == [_by_name(m, parts)["b"]]


def test_the_masters_prices_past_their_deadline_add_nothing() -> None:
    m, coupling = _shared()
    lp = lp_backend()
    assert lp is not None
    now = time.perf_counter()
    priced = columns.priced_by_master(
        m, coupling, columns.ColumnSet(split_parts(m, coupling), {}), np.array([4, 0, 1]), np.ones(3, dtype=bool),
        lp, now - 1.0, exact_until=now - 1.0,
    )
    assert (priced.dived, priced.exact, priced.solved, priced.columns.count) == (0, 0, 0, 0)


def _knapsacks(worth: tuple[int, ...]) -> tuple[LinearModel, list[int]]:
    """One part per entry of ``worth``: three 0/1 choices weighing 3, 2 and 2 within 4,
    worth ``w``, ``0.6 w`` and ``0.6 w``; the parts share a row they never fill. The
    LP takes the first and half another (1.3 w); its dive rounds the half down, then
    the next half too (w); the best choice is the other two (1.2 w)."""
    m = LinearModel()
    shared: list[tuple[int, int]] = []
    for k, w in enumerate(worth):
        x, y, z = (m.add_var(f"{n}{k}", 0, 1) for n in "xyz")
        m.add_constraint([(x, 3), (y, 2), (z, 2)], "<=", 4, f"own[{k}]")
        for var, coef in ((x, w), (y, 3 * w // 5), (z, 3 * w // 5)):
            m.add_objective(var, coef)
        shared += [(x, 1), (y, 1), (z, 1)]
    m.add_constraint(shared, "<=", 3 * len(worth), "capacity[0,0]")
    return m, [len(worth)]


def _priced_knapsacks(
    worth: tuple[int, ...], exact: bool, exact_parts: int = columns.EXACT_PARTS
) -> tuple[columns.Priced, dict[str, list[list[int]]]]:
    """:func:`~planner.mip.columns.priced_by_master` on :func:`_knapsacks` from the
    incumbent that chooses nothing; the columns by the name of each part's first
    variable."""
    m, coupling = _knapsacks(worth)
    parts = split_parts(m, coupling)
    lp = lp_backend()
    assert lp is not None
    now = time.perf_counter()
    priced = columns.priced_by_master(
        m, coupling, columns.ColumnSet(parts, {}), np.zeros(m.num_vars, dtype=np.int64),
        np.ones(m.num_vars, dtype=bool), lp, now + 10.0, rounds=3,
        exact_until=now + 20.0 if exact else None, exact_parts=exact_parts,
    )
    named = {
        name: [c.tolist() for c in priced.columns.columns.get(root, [])]
        for name, root in _by_name(m, parts).items()
    }
    return priced, named


def test_the_dives_alone_miss_a_parts_best_column() -> None:
    """Three rounds of dives give the knapsack only x (worth 5), never y and z (6)."""
    priced, named = _priced_knapsacks((5,), exact=False)
    assert named == {"x0": [[1, 0, 0]]}
    assert (priced.exact, priced.solved) == (0, 0)


def test_exact_pricing_finds_the_column_the_dive_misses() -> None:
    """After the dives' x (5), the master's LP prices a column at 5; the part's LP
    (6.5) is above it, so the part is solved exactly: y and z (6) join."""
    priced, named = _priced_knapsacks((5,), exact=True)
    assert named == {"x0": [[1, 0, 0], [0, 1, 1]]}
    assert (priced.dived, priced.exact, priced.solved) == (1, 1, 1)


def test_exact_pricing_takes_the_parts_farthest_below_their_lp_first() -> None:
    """With one part to solve exactly, the one worth 10 (its dive 3 below its LP) goes
    before the one worth 5 (1.5 below)."""
    priced, named = _priced_knapsacks((5, 10), exact=True, exact_parts=1)
    assert named == {"x0": [[1, 0, 0]], "x1": [[1, 0, 0], [0, 1, 1]]}
    assert (priced.exact, priced.solved) == (1, 1)


def _beside_on_the_step_instance() -> tuple[Formulation, columns.ColumnsBeside]:
    """The step instance (two projects sharing one node), its LP solved, and columns
    started from it with a deadline a minute away."""
    f = apply(build_epoch(a_step_between_jobs()))
    lp = lp_backend()
    assert lp is not None
    session = lp.open_lp(f.model)
    assert session.run(5.0)
    coupling = f.coupling_rows()
    beside = columns.ColumnsBeside(
        f.model, coupling, split_parts(f.model, coupling), session.duals(), session.values(), f.decisions(), lp,
        time.perf_counter() + 60.0,
    )
    return f, beside


def test_columns_beside_find_integer_points_of_every_part() -> None:
    """Columns found in the parts process: every part gets at least one, each feasible
    for its part's own rows."""
    f, beside = _beside_on_the_step_instance()
    assert beside.done.wait(90.0)
    found = beside.result()
    assert set(found.columns) == set(found.parts.rows)
    for root, cols in found.columns.items():
        assert cols
        sub = part_model(f.model, found.parts.members[root], found.parts.rows[root])
        for col in cols:
            assert sub.violations(col) == []


def test_diving_here_takes_the_parts_the_parts_process_did_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no parts process to send a batch to, the thread ends without a column, and
    :meth:`dive_here` dives every part in this process, off the same queue."""
    monkeypatch.setattr(columns.PARTS_PROCESS, "wait_ready", lambda *args, **kwargs: False)
    f, beside = _beside_on_the_step_instance()
    assert beside.done.wait(10.0)
    assert beside.result().columns == {}
    beside.dive_here(time.perf_counter() + 60.0)
    found = beside.result()
    assert set(found.columns) == set(found.parts.rows)
    for root, cols in found.columns.items():
        assert cols
        sub = part_model(f.model, found.parts.members[root], found.parts.rows[root])
        assert all(sub.violations(col) == [] for col in cols)


def test_diving_here_past_its_deadline_takes_no_part(monkeypatch: pytest.MonkeyPatch) -> None:
    """A deadline already past: nothing is taken off the queue here."""
    monkeypatch.setattr(columns.PARTS_PROCESS, "wait_ready", lambda *args, **kwargs: False)
    _, beside = _beside_on_the_step_instance()
    assert beside.done.wait(10.0)
    beside.dive_here(time.perf_counter() - 1.0)
    assert beside.result().columns == {}


def test_stopped_columns_beside_send_no_further_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped before its first batch (one part a batch, the deadline far away): it
    ends at once, with no columns."""
    monkeypatch.setattr(columns, "BATCH_PARTS", 1)
    gate = columns.threading.Event()
    real_priced = columns.priced_objective

    def held_priced(*args: object) -> object:
        gate.wait(10.0)
        return real_priced(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(columns, "priced_objective", held_priced)
    _, beside = _beside_on_the_step_instance()
    beside.stop()
    gate.set()
    assert beside.done.wait(10.0)
    assert beside.result().columns == {}


def test_columns_beside_that_fail_end_quietly_with_what_they_have(monkeypatch: pytest.MonkeyPatch) -> None:
    """A part model that cannot be built: the thread ends (``done``), keeps no column,
    and no exception escapes it (nothing for ``threading.excepthook``)."""
    escaped: list[object] = []
    monkeypatch.setattr(columns.threading, "excepthook", escaped.append)

    def broken(*args: object) -> LinearModel:
        raise ValueError("no part")

    monkeypatch.setattr(columns, "part_model", broken)
    _, beside = _beside_on_the_step_instance()
    assert beside.done.wait(10.0)
    assert beside.result().columns == {}
    assert escaped == []


def test_a_forced_column_holds_its_variable_at_the_value_asked() -> None:
    """At prices where ``a`` costs more than it earns (its part's LP leaves it at 0),
    ``a`` held at 2 or more dives to the column a = 2; the other part keeps its own."""
    m, coupling = _shared()
    parts = split_parts(m, coupling)
    by_name = {m.names[int(idx[0])]: root for root, idx in parts.members.items()}
    found = columns.ColumnSet(parts, {by_name["a"]: [np.array([0])], by_name["b"]: [np.array([4])]})
    lp = lp_backend()
    assert lp is not None
    cost = np.array([-1.0, 1.0, -3.0])  # (3, 5, 1) less 4 on each shared term
    both = columns.forced_columns(m, found, cost, [(0, 2)], np.ones(3, dtype=bool), lp, time.perf_counter() + 30.0)
    assert [c.tolist() for c in both.columns[by_name["a"]]] == [[0], [2]]
    assert [c.tolist() for c in both.columns[by_name["b"]]] == [[4]]


def test_a_forced_variable_in_no_part_and_a_past_deadline_add_nothing() -> None:
    """``f`` is in no part (only the shared row holds it): nothing to dive; and with the
    deadline gone, ``a`` is not dived either."""
    m, coupling = _shared()
    parts = split_parts(m, coupling)
    found = columns.ColumnSet(parts, {})
    lp = lp_backend()
    assert lp is not None
    cost = np.array([3.0, 5.0, 1.0])
    f_only = columns.forced_columns(m, found, cost, [(2, 1)], np.ones(3, dtype=bool), lp, time.perf_counter() + 30.0)
    assert all(not cols for cols in f_only.columns.values())
    late = columns.forced_columns(m, found, cost, [(0, 1)], np.ones(3, dtype=bool), lp, time.perf_counter() - 1.0)
    assert all(not cols for cols in late.columns.values())
