"""The LP relaxation of a :class:`LinearModel` in HiGHS (``highspy``), as an LP session.

Only the backends that declare ``lp_relaxation`` hand these out
(:meth:`planner.mip.backends.pulp.PulpBackend.open_lp`); the LP-guided path
(:mod:`planner.mip.relax`) sees the :class:`~planner.mip.backends.base.LpSession`
protocol, never a HiGHS object.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.mip.backends.base import IntegerAnswer, quiet_stdout
from planner.mip.model import Constraint, LinearModel


def highs_available() -> bool:
    """Whether HiGHS's Python interface is installed (found, not imported)."""
    return importlib.util.find_spec("highspy") is not None


class HighsLp:
    """The LP relaxation of ``model`` held by one HiGHS object, solved incrementally."""

    def __init__(self, model: LinearModel, objective: npt.NDArray[np.float64] | None = None) -> None:
        import highspy

        self._highspy = highspy
        self._offset = model.objective_offset
        self._made = time.perf_counter()
        n = model.num_vars
        # HiGHS minimizes.
        cost = -np.asarray(model.objective_vector() if objective is None else objective, dtype=np.float64)
        rows = model.rows()
        rhs = rows.rhs.astype(np.float64)
        row_lo = np.where(rows.sense == 0, -highspy.kHighsInf, rhs)  # >= and == rows
        row_hi = np.where(rows.sense == 1, highspy.kHighsInf, rhs)  # <= and == rows
        a_index = rows.vars.astype(np.int32)
        a_value = rows.coefs.astype(np.float64)
        with quiet_stdout():
            h = highspy.Highs()  # type: ignore[no-untyped-call]
        h.setOptionValue("output_flag", False)
        h.setOptionValue("threads", 1)
        # The LP without HiGHS's presolve: on the benchmark families' epoch LPs the
        # simplex alone reaches the same optimum in a median 0.64 of the time (21
        # epochs, 2 cores; its reductions cost more than they save on these rows).
        h.setOptionValue("presolve", "off")
        lp = highspy.HighsLp()
        lp.num_col_ = n
        lp.num_row_ = len(model.constraints)
        lp.col_cost_ = cost
        lp.col_lower_ = np.asarray(model.lower, dtype=np.float64)
        lp.col_upper_ = np.asarray(model.upper, dtype=np.float64)
        lp.row_lower_ = row_lo
        lp.row_upper_ = row_hi
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = rows.starts.astype(np.int32)
        lp.a_matrix_.index_ = a_index
        lp.a_matrix_.value_ = a_value
        h.passModel(lp)
        self._h: Any = h

    def run(self, time_limit: float) -> bool:
        """Solve (from the last basis) within ``time_limit``; whether it is optimal."""
        # HiGHS's clock runs across calls: its limit is the time since it was made.
        elapsed = time.perf_counter() - self._made
        self._h.setOptionValue("time_limit", max(elapsed + time_limit, 0.01))
        self._h.run()
        return bool(self._h.getModelStatus() == self._highspy.HighsModelStatus.kOptimal)

    def infeasible(self) -> bool:
        """Whether the last run proved the LP infeasible (HiGHS's "unbounded or
        infeasible" too: every variable of a :class:`LinearModel` has finite bounds)."""
        status = self._h.getModelStatus()
        kinds = self._highspy.HighsModelStatus
        return bool(status in (kinds.kInfeasible, kinds.kUnboundedOrInfeasible))

    def values(self) -> npt.NDArray[np.float64]:
        """The last solution's values."""
        return np.asarray(self._h.getSolution().col_value, dtype=np.float64)

    def duals(self) -> npt.NDArray[np.float64]:
        """The last solution's row duals, for the maximized objective: ``<=`` rows get
        values >= 0, ``>=`` rows values <= 0 (what one more unit of the row's bound
        is worth)."""
        # HiGHS minimizes the negated objective; its duals are the negated ones.
        return -np.asarray(self._h.getSolution().row_dual, dtype=np.float64)

    def objective(self) -> float:
        """The last solution's objective, maximized, offset included."""
        return -float(self._h.getInfo().objective_function_value) + self._offset

    def set_bounds(
        self,
        idx: npt.NDArray[np.int64],
        lower: npt.NDArray[np.float64],
        upper: npt.NDArray[np.float64],
    ) -> None:
        """Set the bounds of columns ``idx``."""
        if len(idx):
            cols = np.asarray(idx, dtype=np.int32)
            self._h.changeColsBounds(len(cols), cols, lower[cols], upper[cols])

    def set_objective(self, objective: npt.NDArray[np.float64]) -> None:
        """Maximize ``objective`` from now on (the offset stays), from the last basis."""
        n = self._h.getNumCol()
        self._h.changeColsCost(n, np.arange(n, dtype=np.int32), -np.asarray(objective, dtype=np.float64))

    def set_coefs(
        self, rows: npt.NDArray[np.int64], idx: npt.NDArray[np.int64], coefs: npt.NDArray[np.int64]
    ) -> None:
        """Make ``coefs[i]`` the coefficient of column ``idx[i]`` in row ``rows[i]``."""
        change = self._h.changeCoeff
        for row, col, value in zip(rows.tolist(), idx.tolist(), coefs.tolist(), strict=True):
            change(row, col, float(value))

    def add_rows(self, rows: Sequence[Constraint]) -> None:
        """Append ``rows`` after the last row; the basis stays (the new rows' slacks
        enter it)."""
        if not rows:
            return
        inf = self._highspy.kHighsInf
        lower = np.array([-inf if r.sense == "<=" else float(r.rhs) for r in rows])
        upper = np.array([inf if r.sense == ">=" else float(r.rhs) for r in rows])
        lengths = np.array([len(r.vars) for r in rows], dtype=np.int32)
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int32)
        index = np.concatenate([r.vars for r in rows]).astype(np.int32)
        value = np.concatenate([r.coefs for r in rows]).astype(np.float64)
        self._h.addRows(len(rows), lower, upper, len(index), starts, index, value)

    def drop_rows(self, first: int) -> None:
        """Remove the rows from index ``first`` on."""
        last = self._h.getNumRow()
        if last > first:
            self._h.deleteRows(last - first, np.arange(first, last, dtype=np.int32))

    def run_integer(self, time_limit: float, start: npt.NDArray[np.int64] | None = None) -> IntegerAnswer | None:
        """Solve the model with every column integer (HiGHS's MIP: presolve, cuts and
        branching) within ``time_limit``, then make the columns continuous again.

        The bound is HiGHS's proven one (its MIP dual bound), valid when it stops early
        too; ``None`` when it proved none (out of time before its root LP)."""
        highspy = self._highspy
        h = self._h
        n = h.getNumCol()
        cols = np.arange(n, dtype=np.int32)
        kinds = highspy.HighsVarType
        h.changeColsIntegrality(n, cols, np.full(n, kinds.kInteger))
        # Branch and bound needs the presolve the LPs go without.
        h.setOptionValue("presolve", "choose")
        elapsed = time.perf_counter() - self._made
        h.setOptionValue("time_limit", max(elapsed + time_limit, 0.01))
        # Exact, not HiGHS's default 0.01% gap: a part's bound is summed with 100 others.
        h.setOptionValue("mip_rel_gap", 0.0)
        if start is not None:
            given = highspy.HighsSolution()
            given.col_value = np.asarray(start, dtype=np.float64).tolist()
            given.value_valid = True
            h.setSolution(given)
        try:
            h.run()
            info = h.getInfo()
            status = h.getModelStatus()
            dual = float(info.mip_dual_bound)
            if not np.isfinite(dual) or abs(dual) >= highspy.kHighsInf:
                return None
            exact = bool(status == highspy.HighsModelStatus.kOptimal)
            found = int(info.primal_solution_status) == int(highspy.SolutionStatus.kSolutionStatusFeasible)
            values = np.asarray(h.getSolution().col_value, dtype=np.float64) if found else None
            return IntegerAnswer(-dual + self._offset, exact and values is not None, values)
        finally:
            h.setOptionValue("presolve", "off")
            h.changeColsIntegrality(n, cols, np.full(n, kinds.kContinuous))
