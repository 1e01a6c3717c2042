"""Sweep errors and the column names every result row has."""

from __future__ import annotations

from scenarios.errors import ScenarioError

#: Columns every result row has besides the point's parameters and metrics.
POINT_COLUMN = "point"
POLICY_COLUMN = "policy"
SEED_COLUMN = "seed"
ERROR_COLUMN = "error"
ELAPSED_COLUMN = "elapsed_s"

#: The generator's seed, which ``seeds`` sets.
SEED_KEY = "workloads.generate.seed"
#: Grid keys under this prefix are simulator options, not scenario edits.
OPTION_PREFIX = "options."


class SweepError(ScenarioError):
    """Bad sweep input (a grid key, the seeds, the scheduler...): nothing was run."""


class SchedulerUnreachable(SweepError):
    """The Dask scheduler given by address did not answer."""
