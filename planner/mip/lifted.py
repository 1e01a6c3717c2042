"""Capped-work rows lifted over whole job groups: cuts separated from an LP point.

A project's capped-work row (``cut_work``, ``cut_free``: Constraints, 9 in
docs/formulation.md) reads ``S <= C + sum_j a_j v_j``: ``S`` is the work its first
utility segments hold, at most ``E`` (their end, or the owed share), and ``v_j`` a start
or a running slice that adds ``a_j``. Take some of the row's variables, ``K``, whose job
groups (a class's starts, a running job's slices) can add at most ``M_K`` together: a
class of ``n`` members at most ``n`` times its largest ``a_j`` in ``K`` (its starts
share the members), a running job the sum over its slices. Then every integer plan meets

    S <= C + M_K + sum_{j not in K} min(a_j, D) v_j,   D = E - C - M_K > 0:

a variable outside ``K`` with ``a_j >= D`` that is at least 1 brings the right-hand
side to ``E`` on its own; otherwise each keeps its ``a_j`` and ``K`` adds at most
``M_K``. With ``K`` empty it is the row itself.

The LP fills a project's steep segments with one job started whole and a tenth of a
long one (to the segments' end), which the row allows; with the first job in ``K`` the
tenth is worth only what is left below ``E`` (``tests/planner/mip/test_lifted.py``).
The largest group of HiGHS's root cuts on the whole model of urgent-heavy seed 1 is
over utility segments and starts alone, as these are (286 of 536; *Thirty-third pass*,
docs/formulation-passes.md).

Separation (:func:`lift_row`) walks the row's groups in two orders (what the LP leaves
unused of them, least first; how full the LP makes them, fullest first) and tries every
prefix as ``K``, a class entering either whole or without its variables of the largest
``a_j`` (those stay outside ``K``, their coefficient cut to ``D``); it keeps the lowest
right-hand side.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.mip.formulation import Formulation
from planner.mip.model import Constraint, LinearModel

#: A lifting is returned only where it cuts the point off by more than this share of
#: the row's ``S`` (of 1 where ``S`` is smaller): less is within the LP's tolerances.
MIN_VIOLATION = 1e-4


@dataclass(frozen=True)
class Lifted:
    """One lifted row: its right-hand side at the LP point (``rhs``), the cap ``D``,
    which of the row's variables stay outside ``K`` (their coefficient ``min(a_j, D)``)
    and the row's constant ``C + M_K``."""

    rhs: float
    cap: float
    outside: npt.NDArray[np.bool_]
    constant: float


def lift_row(
    held: float,
    end: float,
    constant: float,
    coefs: npt.NDArray[np.float64],
    values: npt.NDArray[np.float64],
    group: npt.NDArray[np.int64],
    members: npt.NDArray[np.int64],
    whole: npt.NDArray[np.bool_],
) -> Lifted | None:
    """The most violated lifting of one capped-work row at an LP point, or ``None``.

    ``held`` is the LP's ``S``, ``end`` its most (``E``), ``constant`` the row's ``C``;
    per variable: ``coefs`` its ``a_j``, ``values`` the LP's value, ``group`` its job
    group, ``members`` how many members the group has, ``whole`` whether the group's
    variables can all be 1 at once (a running job's slices) rather than share the
    members (a class's starts). ``None`` when no lifting cuts the point off."""
    keys, first, inverse = np.unique(group, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    count = len(keys)
    contribution = coefs * values
    top = np.zeros(count)
    np.maximum.at(top, inverse, coefs)
    below = coefs < top[inverse]
    top_below = np.zeros(count)
    np.maximum.at(top_below, inverse[below], coefs[below])
    is_whole = whole[first]
    n = members[first].astype(np.float64)
    # Items: each group whole (a class at n times its largest a_j, a running job at the
    # sum of its slices), and a class without its variables of the largest a_j.
    full_m = np.where(is_whole, np.bincount(inverse, weights=coefs, minlength=count), n * top)
    full_l = np.bincount(inverse, weights=contribution, minlength=count)
    part = ~is_whole & (top_below > 0)
    part_m = n * top_below
    part_l = np.bincount(inverse[below], weights=contribution[below], minlength=count)
    item_group = np.concatenate((np.arange(count), np.flatnonzero(part)))
    item_m = np.concatenate((full_m, part_m[part]))
    item_l = np.concatenate((full_l, part_l[part]))
    item_full = np.arange(len(item_group)) < count
    used = values > 1e-9
    a_used, x_used, g_used, below_used = coefs[used], values[used], inverse[used], below[used]
    best: Lifted | None = None
    best_rhs = constant + float(contribution.sum())
    room = end - constant
    for order in (
        np.argsort(item_m - item_l, kind="stable"),  # least left unused first
        np.argsort(-item_l / np.maximum(item_m, 1e-9), kind="stable"),  # fullest first
    ):
        # Walk the prefixes: each group's M in K, and the step its variables entered.
        level = np.zeros(count)
        entered_full = np.full(count, len(order))
        entered_part = np.full(count, len(order))
        steps: list[float] = []
        bound_k = 0.0
        for i in order.tolist():
            k, m_k = int(item_group[i]), float(item_m[i])
            if m_k <= level[k]:
                continue
            if room - (bound_k - level[k] + m_k) <= 0:
                break
            bound_k += m_k - level[k]
            level[k] = m_k
            if item_full[i]:
                entered_full[k] = len(steps)
            else:
                entered_part[k] = len(steps)
            steps.append(bound_k)
        if not steps:
            continue
        bound_at = np.array(steps)
        cap_at = room - bound_at
        entered = np.where(below_used, np.minimum(entered_part[g_used], entered_full[g_used]), entered_full[g_used])
        outside = entered[None, :] > np.arange(len(steps))[:, None]
        rhs_at = constant + bound_at + (outside * np.minimum(a_used[None, :], cap_at[:, None]) * x_used).sum(axis=1)
        step = int(np.argmin(rhs_at))
        if rhs_at[step] < best_rhs - 1e-9:
            best_rhs = float(rhs_at[step])
            inside = np.where(below, np.minimum(entered_part[inverse], entered_full[inverse]), entered_full[inverse]) <= step
            best = Lifted(best_rhs, float(cap_at[step]), ~inside, constant + float(bound_at[step]))
    if best is None or held - best.rhs <= MIN_VIOLATION * max(held, 1.0):
        return None
    return best


def lifted_work_cuts(form: Formulation, values: npt.NDArray[np.float64]) -> list[Constraint]:
    """The capped-work rows (:attr:`Formulation.work_rows`) lifted where that cuts the
    LP point ``values`` off, as ``<=`` rows over the model's variables; only rows where
    the LP starts or runs some job in part (at integer decisions no lifting is
    violated: the point meets the row's integer meaning already)."""
    model = form.model
    n = model.num_vars
    group = np.full(n, -1, dtype=np.int64)
    members = np.ones(n, dtype=np.int64)
    whole = np.zeros(n, dtype=bool)
    table = form.start_table()
    group[table.var] = table.cls
    sizes = np.array([len(c.jobs) for c in form.epoch.classes], dtype=np.int64)
    if len(table.var):
        members[table.var] = sizes[table.cls]
    offset = len(form.epoch.classes)
    for (j, _), var in form.z.items():
        group[var] = offset + j
        whole[var] = True
    out: list[Constraint] = []
    for row, end in form.work_rows:
        c = model.constraints[row]
        tail = c.coefs < 0
        tv = c.vars[tail]
        x = values[tv]
        if not (np.abs(x - np.round(x)) > 1e-6).any() or (group[tv] < 0).any():
            continue
        head = c.vars[~tail]
        a = -c.coefs[tail].astype(np.float64)
        lifted = lift_row(
            float(values[head].sum()), float(end), float(c.rhs), a, x, group[tv], members[tv], whole[tv]
        )
        if lifted is None:
            continue
        keep = lifted.outside
        coefs = np.concatenate((np.ones(len(head), dtype=np.int64), -np.minimum(a[keep], lifted.cap).astype(np.int64)))
        out.append(
            Constraint(
                vars=np.concatenate((head, tv[keep])),
                coefs=coefs,
                sense="<=",
                rhs=int(round(lifted.constant)),
                name=f"lifted[{c.name}]",
            )
        )
    return out


def add_cuts(model: LinearModel, cuts: list[Constraint]) -> None:
    """Append ``cuts`` to ``model`` (in order, as an LP session took them)."""
    for cut in cuts:
        model.add_row(cut.vars, cut.coefs, cut.sense, cut.rhs, cut.name)
