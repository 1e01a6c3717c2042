"""The root of gpuplan's own errors (the bottom layer: every other layer may import it)."""

from __future__ import annotations


class GpuplanError(Exception):
    """Bad input, or a file or resource gpuplan cannot use; ``str()`` is the whole message.

    Every error the project raises on purpose derives from this class
    (:class:`~scenarios.errors.ScenarioError`, :class:`~planner.ledger.LedgerError`,
    :class:`~planner.runstate.RunStateError`, the CLI's ``UsageError``), so a caller
    catches one class, and the command line maps it to exit code 2.
    """
