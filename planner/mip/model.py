"""A backend-neutral integer linear model: variables, linear constraints, an objective.

Every coefficient and bound is an integer. The formulation scales its quantities (GPU
work in tenths of an H100-equivalent GPU-slice, utilities in thousandths) so that
CP-SAT, which only takes integers, and the MIP solvers behind PuLP solve *the same*
model and reach the same optimal objective.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

Sense = Literal["<=", ">=", "=="]

#: Rows of at most this many terms are checked for repeated variables with a set.
SMALL_ROW = 32


@dataclass
class Constraint:
    """``sum(coefs * x[vars]) <sense> rhs``."""

    vars: npt.NDArray[np.int64]
    coefs: npt.NDArray[np.int64]
    sense: Sense
    rhs: int
    name: str = ""


@dataclass(frozen=True)
class Rows:
    """A model's constraints stacked: row ``i`` is ``vars[starts[i]:starts[i + 1]]``
    with ``coefs`` alike, ``rhs[i]``, and ``sense[i]`` (0 ``<=``, 1 ``>=``, 2 ``==``)."""

    count: int
    vars: npt.NDArray[np.int64]
    coefs: npt.NDArray[np.int64]
    starts: npt.NDArray[np.int64]
    rhs: npt.NDArray[np.int64]
    sense: npt.NDArray[np.int8]


@dataclass
class LinearModel:
    """An integer program to maximize, free of any solver object.

    Variables are referred to by their index. ``hint`` holds an optional warm start;
    ``stop_at`` an objective value at which a backend may stop at its first incumbent
    that reaches it (a request like the hint: backends that cannot honour it ignore it).
    """

    names: list[str] = field(default_factory=list)
    lower: list[int] = field(default_factory=list)
    upper: list[int] = field(default_factory=list)
    constraints: list[Constraint] = field(default_factory=list)
    objective: dict[int, int] = field(default_factory=dict)
    objective_offset: int = 0
    hint: dict[int, int] = field(default_factory=dict)
    stop_at: int | None = None
    _rows: Rows | None = field(default=None, init=False, repr=False, compare=False)

    def __getstate__(self) -> dict[str, object]:
        # A model goes to the solver process as its stacked rows, not as one object and
        # two small arrays per constraint: for a neighbourhood of 6,000 variables and as
        # many rows, pickling and unpickling those took 0.3 s on 2 cores, time the
        # search's limit did not count; a few arrays take milliseconds.
        state = dict(self.__dict__)
        rows = self.rows()
        state["constraints"] = None
        state["_rows"] = rows
        state["_constraint_names"] = [c.name for c in self.constraints]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        names = state.pop("_constraint_names", None)
        self.__dict__.update(state)
        if self.constraints is None:
            rows = self._rows
            assert rows is not None and isinstance(names, list)
            senses: tuple[Sense, ...] = ("<=", ">=", "==")
            starts = rows.starts.tolist()
            rhs = rows.rhs.tolist()
            sense = rows.sense.tolist()
            self.constraints = [
                Constraint(rows.vars[starts[i]:starts[i + 1]], rows.coefs[starts[i]:starts[i + 1]],
                           senses[sense[i]], rhs[i], names[i])
                for i in range(rows.count)
            ]

    @property
    def num_vars(self) -> int:
        """Number of variables."""
        return len(self.names)

    def add_var(self, name: str, lower: int, upper: int) -> int:
        """Add an integer variable in ``[lower, upper]``; returns its index."""
        if lower > upper:
            raise ValueError(f"variable {name}: lower bound {lower} above upper bound {upper}")
        self.names.append(name)
        self.lower.append(int(lower))
        self.upper.append(int(upper))
        return len(self.names) - 1

    def add_vars(self, names: list[str], lower: list[int], upper: list[int]) -> int:
        """Add integer variables ``names[i]`` in ``[lower[i], upper[i]]``; returns the
        index of the first (the others follow it). One call for many: the epoch model
        adds tens of thousands of start variables, and a call each was a tenth of its
        build time."""
        if not len(names) == len(lower) == len(upper):
            raise ValueError("add_vars: names, lower and upper differ in length")
        if any(map(operator.gt, lower, upper)):
            name, lo, up = next(t for t in zip(names, lower, upper, strict=True) if t[1] > t[2])
            raise ValueError(f"variable {name}: lower bound {lo} above upper bound {up}")
        first = len(self.names)
        self.names.extend(names)
        self.lower.extend(map(int, lower))
        self.upper.extend(map(int, upper))
        return first

    def add_constraint(
        self, terms: Iterable[tuple[int, int]], sense: Sense, rhs: int, name: str = ""
    ) -> None:
        """Add ``sum(coef * x[var] for var, coef in terms) <sense> rhs``.

        Repeated variables are summed; zero coefficients are dropped.
        """
        pairs = terms if isinstance(terms, list) else list(terms)
        n = len(pairs)
        flat = np.fromiter(itertools.chain.from_iterable(pairs), dtype=np.int64, count=2 * n)
        self.add_row(flat[0::2], flat[1::2], sense, rhs, name)

    def add_row(
        self,
        all_vars: npt.NDArray[np.int64],
        all_coefs: npt.NDArray[np.int64],
        sense: Sense,
        rhs: int,
        name: str = "",
    ) -> None:
        """Add ``sum(all_coefs[i] * x[all_vars[i]]) <sense> rhs``, the terms as two
        arrays (:meth:`add_constraint` with the pairs already split).

        Repeated variables are summed; zero coefficients are dropped.
        """
        all_vars = np.asarray(all_vars, dtype=np.int64)
        all_coefs = np.asarray(all_coefs, dtype=np.int64)
        n = len(all_vars)
        if n <= SMALL_ROW:
            # Small rows (most of them): a set tells duplicates apart faster than numpy.
            seen = all_vars.tolist()
            unique = len(set(seen)) == n
        else:
            ordered = np.sort(all_vars)
            unique = not bool((ordered[1:] == ordered[:-1]).any())
        if n and unique:
            keep = all_coefs != 0
            var_idx, coefs = all_vars[keep], all_coefs[keep]
        else:
            var_idx, inverse = np.unique(all_vars, return_inverse=True)
            coefs = np.zeros(len(var_idx), dtype=np.int64)
            np.add.at(coefs, inverse, all_coefs)
            keep = coefs != 0
            var_idx, coefs = var_idx[keep], coefs[keep]
        self.constraints.append(
            Constraint(
                vars=np.ascontiguousarray(var_idx, dtype=np.int64),
                coefs=np.ascontiguousarray(coefs, dtype=np.int64),
                sense=sense,
                rhs=int(rhs),
                name=name,
            )
        )

    def add_objective(self, var: int, coef: int) -> None:
        """Add ``coef * x[var]`` to the objective (maximized)."""
        if coef:
            self.objective[var] = self.objective.get(var, 0) + int(coef)

    def add_objectives(self, variables: npt.NDArray[np.int64], coefs: npt.NDArray[np.int64]) -> None:
        """:meth:`add_objective` for each ``variables[i]``, ``coefs[i]``."""
        objective = self.objective
        for var, coef in zip(variables.tolist(), coefs.tolist(), strict=True):
            if coef:
                objective[var] = objective.get(var, 0) + coef

    def objective_vector(self) -> npt.NDArray[np.float64]:
        """The objective's coefficients as one float per variable (the offset apart)."""
        out = np.zeros(self.num_vars)
        if self.objective:
            n = len(self.objective)
            out[np.fromiter(self.objective.keys(), dtype=np.int64, count=n)] = np.fromiter(
                self.objective.values(), dtype=np.float64, count=n
            )
        return out

    def value(self, values: npt.NDArray[np.int64]) -> int:
        """The objective at ``values``."""
        if not self.objective:
            return self.objective_offset
        n = len(self.objective)
        idx = np.fromiter(self.objective.keys(), dtype=np.int64, count=n)
        coefs = np.fromiter(self.objective.values(), dtype=np.int64, count=n)
        # Each value truncated to an integer first, as ``int(values[v])`` would.
        x = np.asarray(values)[idx].astype(np.int64)
        return self.objective_offset + int(np.dot(coefs, x))

    def rows(self) -> Rows:
        """The constraints stacked row after row (see :class:`Rows`).

        Stacked once per number of constraints and kept: the model only ever grows
        (:meth:`add_constraint` appends) or has a row's coefficients changed through
        :meth:`set_coefs`, which drops the stack, so the same count means the same rows.
        """
        if self._rows is not None and self._rows.count == len(self.constraints):
            return self._rows
        cs = self.constraints
        n = len(cs)
        lengths = np.fromiter((len(c.vars) for c in cs), dtype=np.int64, count=n)
        senses = {"<=": 0, ">=": 1, "==": 2}
        self._rows = Rows(
            count=n,
            vars=np.concatenate([c.vars for c in cs]).astype(np.int64) if n else np.zeros(0, np.int64),
            coefs=np.concatenate([c.coefs for c in cs]).astype(np.int64) if n else np.zeros(0, np.int64),
            starts=np.concatenate(([0], np.cumsum(lengths))).astype(np.int64),
            rhs=np.fromiter((c.rhs for c in cs), dtype=np.int64, count=n),
            sense=np.fromiter((senses[c.sense] for c in cs), dtype=np.int8, count=n),
        )
        return self._rows

    def set_coefs(self, row: int, coefs: npt.NDArray[np.int64]) -> None:
        """Give constraint ``row`` new coefficients for its variables (in their order)."""
        c = self.constraints[row]
        if len(coefs) != len(c.vars):
            raise ValueError(f"constraint {c.name}: {len(coefs)} coefficients for {len(c.vars)} variables")
        c.coefs = np.ascontiguousarray(coefs, dtype=np.int64)
        self._rows = None

    def row_values(self, values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Each constraint's left-hand side at ``values`` (each value truncated to an
        integer; 0 for an empty row)."""
        rows = self.rows()
        x = np.asarray(values).astype(np.int64)
        # Row sums as differences of one running sum: exact in integers, and empty rows
        # (which np.add.reduceat would get wrong) come out 0.
        running = np.concatenate(([0], np.cumsum(rows.coefs * x[rows.vars])))
        return running[rows.starts[1:]] - running[rows.starts[:-1]]

    def violations(self, values: npt.NDArray[np.int64]) -> list[str]:
        """Names of the bounds and constraints ``values`` breaks (empty when feasible)."""
        x = np.asarray(values).astype(np.int64)
        lo = np.asarray(self.lower[: len(x)], dtype=np.int64)
        hi = np.asarray(self.upper[: len(x)], dtype=np.int64)
        out = [f"bound of {self.names[i]}" for i in np.flatnonzero((x < lo) | (x > hi))]
        if not self.constraints:
            return out
        rows = self.rows()
        lhs = self.row_values(x)
        ok = np.where(
            rows.sense == 0, lhs <= rows.rhs, np.where(rows.sense == 1, lhs >= rows.rhs, lhs == rows.rhs)
        )
        out += [self.constraints[i].name or "constraint" for i in np.flatnonzero(~ok)]
        return out

    def with_bounds(self, lower: list[int], upper: list[int], hint: dict[int, int]) -> LinearModel:
        """This model with other bounds and hint; its constraints and objective shared."""
        out = LinearModel(
            names=self.names,
            lower=lower,
            upper=upper,
            constraints=self.constraints,
            objective=self.objective,
            objective_offset=self.objective_offset,
            hint=hint,
        )
        out._rows = self._rows  # the same rows: stacked once
        return out

    def restrict(
        self, lower: list[int], upper: list[int]
    ) -> tuple[LinearModel, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The model over the variables with ``lower < upper``, the others substituted.

        Returns the smaller model, the original index of each of its variables, and the
        full value vector with the fixed variables set (the free ones at 0): a solution
        ``y`` of the small model maps back as ``full[keep] = y``.
        """
        lo = np.asarray(lower, dtype=np.int64)
        hi = np.asarray(upper, dtype=np.int64)
        free = lo < hi
        keep = np.flatnonzero(free)
        new_index = np.full(self.num_vars, -1, dtype=np.int64)
        new_index[keep] = np.arange(len(keep))
        full = np.where(free, 0, lo)
        kept = keep.tolist()
        small = LinearModel(
            names=[self.names[v] for v in kept],
            lower=lo[keep].tolist(),
            upper=hi[keep].tolist(),
        )
        rows = self.rows()
        if rows.count:
            # Per row, at once: which terms are free, and the fixed terms' sum.
            mask = free[rows.vars]
            fixed_terms = np.where(mask, 0, rows.coefs * full[rows.vars])
            fixed_sum = np.concatenate(([0], np.cumsum(fixed_terms)))
            free_count = np.concatenate(([0], np.cumsum(mask)))
            starts = rows.starts
            n_free = free_count[starts[1:]] - free_count[starts[:-1]]
            fixed = fixed_sum[starts[1:]] - fixed_sum[starts[:-1]]
            small_vars = new_index[rows.vars]
            # Rows with all terms fixed are dropped: the caller's bounds are assumed
            # consistent.
            for i in np.flatnonzero(n_free > 0).tolist():
                c = self.constraints[i]
                a, b = int(starts[i]), int(starts[i + 1])
                here = mask[a:b]
                small.constraints.append(
                    Constraint(
                        vars=small_vars[a:b][here],
                        coefs=rows.coefs[a:b][here],
                        sense=c.sense,
                        rhs=c.rhs - int(fixed[i]),
                        name=c.name,
                    )
                )
        offset = self.objective_offset
        if self.objective:
            n = len(self.objective)
            obj_vars = np.fromiter(self.objective.keys(), dtype=np.int64, count=n)
            obj_coefs = np.fromiter(self.objective.values(), dtype=np.int64, count=n)
            on = free[obj_vars]
            small.objective = dict(
                zip(new_index[obj_vars[on]].tolist(), obj_coefs[on].tolist(), strict=True)
            )
            offset += int(np.dot(obj_coefs[~on], full[obj_vars[~on]]))
        small.objective_offset = offset
        if self.hint:
            n = len(self.hint)
            hint_vars = np.fromiter(self.hint.keys(), dtype=np.int64, count=n)
            hint_vals = np.fromiter(self.hint.values(), dtype=np.int64, count=n)
            on = free[hint_vars]
            small.hint = dict(zip(new_index[hint_vars[on]].tolist(), hint_vals[on].tolist(), strict=True))
        small.stop_at = self.stop_at  # the objectives are equal: the offset holds the rest
        return small, keep, full
