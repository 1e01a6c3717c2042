"""What ``gpuplan run`` checks before it acts, then the ledger and run state it opens.

A run that fails half-way may already have submitted jobs, created a ledger or written
``LEDGER.run.json``. Everything that can be known beforehand is checked here first, in
an order that creates nothing until every check has passed: Slurm's commands are
installed, the ledger is new or ours (never a foreign file), writable, the run-state
file (if any) is valid, and no other run holds the ledger. Only then is the lock taken
and the ledger and the run state created.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from planner.cli.errors import UsageError
from planner.ledger import (
    Ledger,
    RunLock,
    beside_ledger,
    check_writable,
    inspect_ledger_file,
    lock_for_run,
)
from planner.runstate import RunState

#: The commands the ``slurm`` executor runs.
SLURM_COMMANDS = ("sinfo", "squeue", "scontrol", "sbatch")


@dataclass
class RunSetup:
    """The opened ledger, the run state, and the run lock (``None`` without a file)."""

    ledger: Ledger
    run_state: RunState
    lock: RunLock | None

    def close(self) -> None:
        """Close the ledger and give the lock up."""
        self.ledger.close()
        if self.lock is not None:
            self.lock.release()


def check_executor_installed(executor: str) -> None:
    """Refuse the ``slurm`` executor when its commands are not on ``PATH``."""
    if executor != "slurm":
        return
    missing = [c for c in SLURM_COMMANDS if shutil.which(c) is None]
    if missing:
        raise UsageError(
            f"--executor slurm: {', '.join(missing)} not found on PATH; is Slurm installed? "
            "(nothing was created or submitted)"
        )


def prepare_run(
    executor: str, ledger_path: str | None, now: float, observe: Callable[[], Any] | None = None
) -> RunSetup:
    """Check what can be checked before acting; then open the ledger and the run state.

    ``observe`` (the executor's, read-only) is called once after the file checks, so a
    cluster that cannot be read (Slurm without a configuration, slurmctld down) stops
    the run before any file is created.

    Raises
    ------
    GpuplanError
        (``UsageError``, ``LedgerError``, ``RunStateError``) naming the file or option;
        when raised, no ledger, run-state or lock file has been created.
    """
    if ledger_path is not None and not ledger_path.strip():
        raise UsageError("--ledger: give a file path (leave the option out to keep usage in memory)")
    check_executor_installed(executor)
    state_file = beside_ledger(ledger_path, ".run.json") if ledger_path is not None else None
    if ledger_path is not None and state_file is not None:
        inspect_ledger_file(ledger_path)
        check_writable(ledger_path)
        RunState.read(state_file)
    if observe is not None:
        try:
            observe()
        except RuntimeError as exc:  # an executor's commands failing for good
            raise UsageError(
                f"--executor {executor}: cannot observe the cluster: {exc} (nothing was "
                "created or submitted)"
            ) from None
    if ledger_path is None:
        return RunSetup(Ledger(), RunState.load(None, now), None)
    lock = lock_for_run(ledger_path)
    try:
        ledger = Ledger(ledger_path)
        try:
            run_state = RunState.load(state_file, now)
        except BaseException:
            ledger.close()
            raise
    except BaseException:
        lock.release()
        raise
    return RunSetup(ledger, run_state, lock)
