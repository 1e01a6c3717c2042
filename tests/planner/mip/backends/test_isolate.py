"""A solver process that aborts or hangs is reported, replaced, and never takes us down."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from models import SolveStatus
from planner.mip import plan_epoch
from planner.mip.backends import cpsat
from planner.mip.backends.cpsat import CpSatBackend
from planner.mip.backends.isolate import Isolated, SolverDied, Unavailable
from planner.mip.model import LinearModel

from ..conftest import SnapBuilder


@pytest.fixture
def child() -> Isolated:
    proc = Isolated(grace=0.5)
    yield proc
    proc.close()


def small_model() -> LinearModel:
    m = LinearModel()
    a = m.add_var("a", 0, 3)
    b = m.add_var("b", 0, 3)
    m.add_constraint([(a, 1), (b, 2)], "<=", 4)
    m.add_objective(a, 3)
    m.add_objective(b, 5)
    return m


def test_a_child_that_cannot_start_makes_calls_unavailable() -> None:
    """A child whose first task fails to load raises Unavailable (callers run in-process)."""
    proc = Isolated(startup=os.abort)
    with pytest.raises(Unavailable):
        proc.call(os.getpid, (), timeout=30.0)
    with pytest.raises(Unavailable):
        proc.call(os.getpid, (), timeout=30.0)  # and stays so: no restart per call
    proc.close()


def test_the_child_imports_the_parents_planner_not_one_in_its_working_directory(
    tmp_path: Path,
) -> None:
    """A parent run from a directory holding another ``planner`` (a benchmark's --code
    checkout run from the other checkout's root) gets its own planner in the child too."""
    root = Path(__file__).resolve().parents[4]
    (tmp_path / "planner").mkdir()
    (tmp_path / "planner" / "__init__.py").write_text("raise ImportError('the wrong planner')\n")
    script = (
        f"import sys; sys.path.insert(0, {str(root)!r})\n"
        "import os\n"
        "from planner.mip.backends.isolate import Isolated\n"
        "child = Isolated()\n"
        "print(child.call(os.getcwd, (), timeout=30.0))\n"
        "child.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path)  # it ran there, with the right planner


def test_a_child_whose_parent_exits_mid_call_ends_quietly() -> None:
    """The parent exits while the child works (the parts process runs to the planner's
    deadline, after plan_epoch has returned): the child ends without printing anything
    on the stderr it shares with the parent."""
    root = Path(__file__).resolve().parents[4]
    script = (
        f"import sys; sys.path.insert(0, {str(root)!r})\n"
        "import threading, time\n"
        "from planner.mip.backends.isolate import Isolated\n"
        "child = Isolated()\n"
        "child.call(time.time, (), timeout=30.0)\n"
        "threading.Thread(target=child.call, args=(time.sleep, (1.0,), 30.0), daemon=True).start()\n"
        "time.sleep(0.3)\n"
    )
    # The pipe closes only when the child has ended too: what it prints is captured.
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0
    assert done.stderr == ""


def test_call_runs_in_another_process(child: Isolated) -> None:
    """The function runs in the child: its process id is not ours."""
    assert child.call(os.getpid, (), timeout=30.0) != os.getpid()


def test_an_abort_in_the_child_is_a_solver_error_and_the_next_call_works(child: Isolated) -> None:
    """os.abort() in the child (what OR-Tools#5288 does) raises SolverDied; a new child serves the next call."""
    first = child.call(os.getpid, (), timeout=30.0)
    with pytest.raises(SolverDied, match="died"):
        child.call(os.abort, (), timeout=30.0)
    assert child.call(os.getpid, (), timeout=30.0) not in (first, os.getpid())


def test_a_hung_child_is_killed_after_the_grace_period(child: Isolated) -> None:
    """A call that outlives its time limit plus the grace raises SolverDied within that time."""
    child.call(os.getpid, (), timeout=30.0)  # started and warm
    t0 = time.perf_counter()
    with pytest.raises(SolverDied, match="no answer"):
        child.call(time.sleep, (30.0,), timeout=0.2)
    assert time.perf_counter() - t0 < 5.0


def test_ctrl_c_reaches_the_parent_not_the_child_and_the_next_call_gets_its_own_answer(
    child: Isolated,
) -> None:
    """SIGINT to both (as Ctrl-C sends it to the terminal's process group, not sent to
    the group here: that holds the test runner too): the child ignores it; the parent's
    KeyboardInterrupt ends the child mid-call, so the next call gets its own answer."""
    first = child.call(os.getpid, (), timeout=30.0)

    def ctrl_c() -> None:
        os.kill(first, signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(0.5, ctrl_c)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            child.call(time.sleep, (3.0,), timeout=30.0)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert child.call(os.getpid, (), timeout=30.0) not in (first, os.getpid(), None)


def test_an_exception_in_the_child_comes_back_as_an_error(child: Isolated) -> None:
    """A Python exception in the child is raised here with its type and message."""
    with pytest.raises(RuntimeError, match="FileNotFoundError"):
        child.call(os.stat, ("/no/such/file",), timeout=30.0)


def test_an_answer_that_cannot_be_pickled_comes_back_as_an_error(child: Isolated) -> None:
    """The child's answer does not pickle: an error says why, and the child serves on."""
    with pytest.raises(RuntimeError, match="pickle"):
        child.call(threading.Lock, (), timeout=30.0)
    assert child.call(os.getpid, (), timeout=30.0) != os.getpid()


def test_cpsat_in_the_solver_process_solves_to_the_same_optimum() -> None:
    """Isolated and in-process CP-SAT reach the same optimum (a=2, b=1: 11)."""
    isolated = CpSatBackend().solve(small_model(), time_limit=30.0, rel_gap=0.0)
    here = CpSatBackend(isolate=False).solve(small_model(), time_limit=30.0, rel_gap=0.0)
    assert isolated.status is SolveStatus.OPTIMAL
    assert isolated.objective == here.objective == 11
    assert list(isolated.values) == [2, 1]


def test_a_dead_solver_process_makes_the_planner_fall_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the solver process dies, plan_epoch returns the flagged greedy plan, naming the cause."""

    def dies(*args: object, **kwargs: object) -> object:
        raise SolverDied("the solver process died (exit code -6)")

    monkeypatch.setattr(cpsat.SOLVER_PROCESS, "call", dies)
    snapshot = (
        SnapBuilder()
        .pool(nodes=2)
        .project("a", owed=8, ratio=0.0)
        .queued("a1", "a")
        .queued("a2", "a", gpus=4)
        .build()
    )
    plan = plan_epoch(snapshot, backend=CpSatBackend())
    assert plan.solver.fallback
    assert plan.solver.status is SolveStatus.ERROR
    assert "exit code -6" in plan.solver.message
    assert {a.job for a in plan.slices[0].assignments} == {"a1", "a2"}


def test_a_solve_counts_its_time_to_the_callers_deadline() -> None:
    """The time a model takes to reach the solver process comes off the search's limit:
    the search gets what is left to the caller's deadline, never more than its limit."""
    assert cpsat.time_left(2.0, None, now=100.0) == 2.0
    assert cpsat.time_left(2.0, 101.5, now=100.0) == 1.5
    assert cpsat.time_left(2.0, 105.0, now=100.0) == 2.0
    assert cpsat.time_left(2.0, 99.0, now=100.0) == 0.0


def test_is_ready_only_once_the_child_has_answered_its_first_request(child: Isolated) -> None:
    """Before any start the child is not ready; once started, it becomes ready without
    a call waiting for it."""
    assert not child.is_ready()
    child.warm()
    for _ in range(600):
        if child.is_ready():
            break
        time.sleep(0.1)
    assert child.is_ready()


def test_a_call_that_cannot_be_pickled_is_unavailable_and_the_child_stays(child: Isolated) -> None:
    """A local function cannot be sent: Unavailable (run it here), the same child serves on."""
    first = child.call(os.getpid, (), timeout=30.0)

    def local() -> int:
        return 1

    with pytest.raises(Unavailable, match="cannot be sent"):
        child.call(local, (), timeout=30.0)
    assert child.call(os.getpid, (), timeout=30.0) == first


def test_wait_ready_starts_the_child_and_waits_for_it(child: Isolated) -> None:
    """From no child at all, wait_ready starts one and returns once it is ready."""
    assert not child.is_ready()
    assert child.wait_ready(60.0)
    assert child.is_ready()


def test_wait_ready_gives_up_on_a_child_that_cannot_start() -> None:
    """A child whose first task kills it: wait_ready returns False without spending its
    timeout restarting it, and calls are Unavailable (run here) from then on."""
    proc = Isolated(startup=os.abort)
    t0 = time.monotonic()
    assert not proc.wait_ready(30.0)
    assert time.monotonic() - t0 < 15.0
    with pytest.raises(Unavailable):
        proc.call(os.getpid, (), timeout=30.0)
    proc.close()
