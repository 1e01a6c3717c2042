"""The executor interface: a small required protocol plus optional capabilities.

An executor carries a :class:`models.Plan` out on a cluster. It needs two operations,
:meth:`Executor.observe` and :meth:`Executor.apply`; the capabilities below are optional
and callers test for them with ``isinstance`` (the protocols are runtime-checkable), the
way Kueue's integrations offer ``JobWithCustomStop`` and friends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar, runtime_checkable

from pydantic import ValidationError

from models import Job, Plan
from planner.executors.state import ActionResult, ApplyReport, ClusterState
from scenarios.errors import from_validation_error


@runtime_checkable
class Executor(Protocol):
    """Applies plans to one cluster (or a set of clusters behind one controller).

    Implementations must make :meth:`apply` idempotent: applying the same slice twice
    changes nothing the second time, and an apply after a crash reconciles from what
    :meth:`observe` reports instead of from memory.
    """

    name: str

    def observe(self) -> ClusterState:
        """The cluster's nodes and jobs now, under the planner's names."""
        ...

    def apply(self, plan: Plan, slice_index: int) -> ApplyReport:
        """Make the cluster run slice ``slice_index`` of ``plan``; report what happened."""
        ...


@runtime_checkable
class SupportsSubmit(Protocol):
    """Can submit a planner job to the cluster, held until the plan starts it."""

    def submit(self, job: Job) -> ActionResult:
        """Submit ``job`` held (a no-op when a job of that name is already there)."""
        ...


@runtime_checkable
class SupportsSuspend(Protocol):
    """Can suspend a running job in place and resume it later (no requeue)."""

    def suspend(self, job: str) -> ActionResult: ...

    def resume(self, job: str) -> ActionResult: ...


@runtime_checkable
class SupportsDrain(Protocol):
    """Can drain a node (no new work) and return it to service."""

    def drain(self, node: str, reason: str) -> ActionResult: ...

    def undrain(self, node: str) -> ActionResult: ...


@runtime_checkable
class SupportsReasons(Protocol):
    """Can show a job's gpuplan state, in plain words, where the cluster's users look.

    ``gpuplan run`` calls :meth:`set_reason` for every managed job whose state line
    changed (``planner.reasons``); implementations keep the last text per job and skip
    the cluster call when it is unchanged, so the controller is not flooded.
    """

    def set_reason(self, job: str, text: str) -> ActionResult:
        """Show ``text`` as ``job``'s state; ``changed`` is false when it was shown already."""
        ...


class ExecutorUnavailable(RuntimeError):
    """The cluster's controller cannot be reached (after the executor's own retries).

    The control loop catches it, waits and tries again; nothing about the plan is lost.
    """


class ExecutorFailure(RuntimeError):
    """A call into an executor raised something other than :class:`ExecutorUnavailable`,
    or returned what the protocol does not allow; names the executor and the method.

    The control loop stops on it (after recording usage up to then): retrying a plugin's
    bug would repeat it every poll.
    """

    def __init__(self, executor: str, method: str, problem: str) -> None:
        super().__init__(f"executor {executor!r}: {method}() {problem}")
        self.executor = executor
        self.method = method
        self.problem = problem


def describe_error(exc: BaseException, *, typed: bool = True) -> str:
    """``exc`` in one line: its type (unless not ``typed``) and message; a pydantic
    error: its first field."""
    if isinstance(exc, ValidationError):
        return f"invalid {from_validation_error(exc, None, prefix=exc.title)}"
    lines = str(exc).strip().splitlines()
    if not typed and lines:
        return lines[0]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


_R = TypeVar("_R")


def checked_call(executor: str, method: str, call: Callable[[], object], returns: type[_R]) -> _R:
    """``call()`` (a method of executor ``executor``), whose result must be a ``returns``.

    Raises
    ------
    ExecutorUnavailable
        As raised by the call (the caller retries).
    ExecutorFailure
        When the call raises anything else, or returns something else.
    """
    try:
        result = call()
    except ExecutorUnavailable:
        raise
    except Exception as exc:  # a plugin's error of any kind stops the run, named
        raise ExecutorFailure(executor, method, f"failed: {describe_error(exc)}") from exc
    if not isinstance(result, returns):
        got = "None" if result is None else f"a {type(result).__name__}"
        raise ExecutorFailure(executor, method, f"returned {got}; expected {returns.__name__}")
    return result
