"""Lifted capped-work cuts: valid for every integer plan, they cut the LP's tenth of a
long job off a project's steep segments."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from models import Snapshot
from planner.mip.epoch import build_epoch
from planner.mip.formulation import Formulation, apply
from planner.mip.lifted import Lifted, lift_row, lifted_work_cuts

from .conftest import SnapBuilder
from .test_cuts import lhs


def two_classes(held: float, values: list[float]) -> Lifted | None:
    """Segments ending at 480, nothing fixed; class A's one start adds 416, class B's
    480; both of one member."""
    return lift_row(
        held=held,
        end=480.0,
        constant=0.0,
        coefs=np.array([416.0, 480.0]),
        values=np.array(values),
        group=np.array([0, 1]),
        members=np.array([1, 1]),
        whole=np.array([False, False]),
    )


def test_a_job_started_whole_leaves_the_tenth_only_what_is_below_the_end() -> None:
    """A started whole and a tenth of B bring the row to 464. With A in ``K`` it reads
    ``S <= 416 + min(480, 480 - 416) x_B``: 422.4 at that point, which it cuts off."""
    got = two_classes(464.0, [1.0, 0.1])
    assert got is not None
    assert (got.constant, got.cap, got.outside.tolist()) == (416.0, 64.0, [False, True])
    assert got.rhs == 416.0 + 64.0 * 0.1


def test_no_lifting_where_the_point_meets_the_row_integrally() -> None:
    """A started whole and B not at all: the lifting cannot cut that point off."""
    assert two_classes(416.0, [1.0, 0.0]) is None


@st.composite
def rows(draw: st.DrawFn) -> tuple[float, float, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A small capped-work row: 1-3 groups (classes of 1-2 members with 1-3 starts, or a
    running job's 1-2 slices), its coefficients capped at the end, and an LP point."""
    end = draw(st.integers(10, 200))
    constant = draw(st.integers(0, end // 2))
    coefs, values, group, members, whole = [], [], [], [], []
    for g in range(draw(st.integers(1, 3))):
        running = draw(st.booleans())
        n = 1 if running else draw(st.integers(1, 2))
        for _ in range(draw(st.integers(1, 2 if running else 3))):
            coefs.append(min(draw(st.integers(1, 250)), end))
            values.append(draw(st.floats(0.0, float(n))))
            group.append(g)
            members.append(n)
            whole.append(running)
    return (
        float(end), float(constant), np.array(coefs, dtype=float), np.array(values),
        np.array(group), np.array(members), np.array(whole),
    )


def integer_points(
    group: np.ndarray, members: np.ndarray, whole: np.ndarray
) -> list[np.ndarray]:
    """Every integer assignment: a running job's slices 0/1 each; a class's starts
    summing to at most its members."""
    ranges = [range(2) if whole[i] else range(int(members[i]) + 1) for i in range(len(group))]
    out = []
    for point in itertools.product(*ranges):
        x = np.array(point)
        if all(
            x[group == g].sum() <= members[group == g][0]
            for g in np.unique(group) if not whole[group == g][0]
        ):
            out.append(x)
    return out


@settings(max_examples=150, deadline=None)
@given(rows())
def test_every_lifting_holds_at_every_integer_point(row: tuple) -> None:  # type: ignore[type-arg]
    """Whatever lifting the separation returns, every integer assignment of the row's
    variables meets it with ``S`` at its most, ``min(E, C + sum a x)``."""
    end, constant, coefs, values, group, members, whole = row
    held = min(end, constant + float(np.dot(coefs, values)))
    got = lift_row(held, end, constant, coefs, values, group, members, whole)
    if got is None:
        return
    assert got.rhs < held
    for x in integer_points(group, members, whole):
        most = min(end, constant + float(np.dot(coefs, x)))
        lifted = got.constant + float(np.dot(np.minimum(coefs[got.outside], got.cap), x[got.outside]))
        assert most <= lifted + 1e-9, (x.tolist(), most, lifted)


def short_project() -> Snapshot:
    """Project ``a`` owed 3 GPUs (120 quanta over the epoch; its first two segments end
    at 60 and 120), with a 2-GPU job (80 quanta) and an 8-GPU gang (320) queued."""
    return (
        SnapBuilder()
        .pool(nodes=2)
        .project("a", owed=3)
        .queued("a1", "a", gpus=2, duration=3600.0)
        .queued("a2", "a", gpus=8, duration=3600.0)
        .build()
    )


def first_start(f: Formulation, gpus: int) -> int:
    (cls,) = [c.index for c in f.epoch.classes if c.gpus == gpus]
    return f.x[(cls, 0, 0)]


def test_the_small_job_whole_and_a_third_of_the_gang_is_cut_off() -> None:
    """The LP's way to fill the first two segments (120): the 2-GPU job whole (80) and
    a third of the gang (capped at 120 in the row: 40). The lifted row, the small job
    in ``K`` (at most 80), reads ``u0 + u1 <= 80 + 40 x_gang``: 93.3 there."""
    f = apply(build_epoch(short_project()))
    small, gang = first_start(f, 2), first_start(f, 8)
    point = np.zeros(f.model.num_vars)
    point[small], point[gang] = 1.0, 1.0 / 3.0
    point[f.u[("a", 0)]], point[f.u[("a", 1)]] = 60.0, 60.0
    cuts = {c.name: c for c in lifted_work_cuts(f, point)}
    cut = cuts["lifted[cut_work[a,1]]"]
    terms = dict(zip(cut.vars.tolist(), cut.coefs.tolist(), strict=True))
    assert cut.rhs == 80 and terms[gang] == -40 and small not in terms
    at = {i: float(v) for i, v in enumerate(point) if v}
    assert lhs(cut, at) - cut.rhs > 25.0
    whole_gang = {f.u[("a", 0)]: 60.0, f.u[("a", 1)]: 60.0, gang: 1.0}
    assert lhs(cut, whole_gang) <= cut.rhs  # the gang started whole fills 120: allowed
