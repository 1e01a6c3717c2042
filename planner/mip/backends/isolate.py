"""Run solver calls in a child process, so that a solver that aborts cannot take us down.

OR-Tools 9.15 (the newest release) can abort the whole process from inside CP-SAT's
presolve when a solution hint is crushed (google/or-tools#5288: an uncaught
``std::out_of_range`` from ``absl::btree_map::at``, depending on which presolve path a
worker takes, so not reproducible at will). We hit it on the 3,000-job benchmark
epochs. An abort cannot be caught in Python, and the planner promises never to crash:
so CP-SAT runs in one long-lived child process, and a child that dies is reported as a
solver error (the planner then keeps its LP-dive incumbent or falls back to the greedy
plan) and replaced at the next call.

The child is a fresh interpreter (``python -c``, not ``multiprocessing``, which would
re-run the caller's main script in the child), started once per parent process and
talking over a socket pair; :meth:`Isolated.warm` starts it ahead of the first solve
so that its imports overlap the model building. A child that cannot start at all (a
broken install) makes calls run in this process instead.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any

#: Seconds a call may run past its own time limit before the child counts as hung.
GRACE = 5.0
#: Seconds a new child may take to start and import what it needs.
STARTUP = 60.0


class SolverDied(RuntimeError):
    """The child process died or hung during a call; the message says how."""


class Unavailable(RuntimeError):
    """No child process can be started here, or the call cannot be sent to one; run the
    call in this process."""


def serve(fd: int) -> None:
    """The child's loop: run each ``(function, args)`` received and send the outcome."""
    # Ctrl-C at a terminal reaches the whole process group: the parent decides what a
    # stop means (and ends this child); here it would only print a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(fd)
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if request is None:
            return
        fn, args = request
        try:
            reply = ("ok", fn(*args))
        except Exception as exc:  # the parent turns it into a solver error
            reply = ("error", f"{type(exc).__name__}: {exc}")
        # Pickled apart from the sending (as call() does): an answer that does not
        # pickle becomes an error, and only the sending can find the parent gone.
        try:
            data = ForkingPickler.dumps(reply)
        except Exception as exc:
            data = ForkingPickler.dumps(("error", f"{type(exc).__name__}: {exc}"))
        try:
            conn.send_bytes(data)
        except OSError:
            # The parent is gone: it exited while a call ran (the parts process works
            # to the planner's deadline, which may be after the planner has returned).
            # Nobody reads the answer, and a traceback here would reach the caller's
            # terminal after its program ended.
            return


def ready() -> bool:
    """A no-op call: the child has started and imported what the caller's module needs."""
    return True


class Isolated:
    """One child process that runs module-level functions on request.

    Calls are serialized (a lock), so threads of one process share the child.
    """

    def __init__(self, grace: float = GRACE, startup: Callable[[], Any] = ready) -> None:
        self.grace = grace
        self._startup = startup
        self._lock = threading.Lock()
        self._proc: Any = None
        self._conn: Connection | None = None
        self._unavailable = False
        self._pending = False  # a warm() whose reply has not been read yet

    def _start(self) -> Connection:
        if self._unavailable:
            raise Unavailable("no solver process can be started here")
        if self._proc is not None and self._proc.poll() is None and self._conn is not None:
            return self._conn
        self._stop()
        ours, theirs = socket.socketpair()
        # The child imports what this process imports: its path, in its order ("" is the
        # working directory); -P keeps the child's own working directory from coming
        # first (a benchmark's --code checkout run from another checkout's root got
        # that root's planner in the child).
        path = [p or os.getcwd() for p in sys.path]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
        code = f"from planner.mip.backends.isolate import serve; serve({theirs.fileno()})"
        try:
            proc = subprocess.Popen(
                [sys.executable, "-P", "-c", code],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=env,
            )
        except OSError as exc:
            self._unavailable = True
            raise Unavailable(str(exc)) from exc
        finally:
            theirs.close()
        self._proc, self._conn = proc, Connection(ours.detach())
        # A first request, answered once the child runs: call() waits for it, so that a
        # child that cannot start at all is told apart from one that dies in a solve.
        self._conn.send((self._startup, ()))
        self._pending = True
        return self._conn

    def _stop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait(timeout=5)
        self._proc = self._conn = None
        self._pending = False

    def warm(self) -> None:
        """Start the child, without waiting for it to be ready (nor for a call another
        thread has in flight: the child is started then)."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            with contextlib.suppress(Unavailable, OSError):
                self._start()
        finally:
            self._lock.release()

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], timeout: float) -> Any:
        """``fn(*args)`` in the child; raises :class:`SolverDied` or :class:`Unavailable`.

        A request that cannot be pickled raises :class:`Unavailable` before anything is
        sent, and the child stays up for the next call.
        """
        try:
            request = bytes(ForkingPickler.dumps((fn, args)))
        except (pickle.PicklingError, AttributeError, TypeError) as exc:  # a local or unpicklable object
            raise Unavailable(f"the call cannot be sent to the solver process: {exc}") from exc
        with self._lock:
            conn = self._start()
            try:
                if self._pending:
                    self._await_start(conn)
                conn.send_bytes(request)
                deadline = time.monotonic() + timeout + self.grace
                if not conn.poll(max(deadline - time.monotonic(), 0.0)):
                    raise SolverDied(f"the solver process gave no answer within {timeout + self.grace:.0f}s")
                kind, payload = conn.recv()
            except SolverDied:
                self._stop()
                raise
            except (EOFError, OSError) as exc:
                code = None
                if self._proc is not None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        code = self._proc.wait(timeout=2)
                self._stop()
                raise SolverDied(f"the solver process died (exit code {code})") from exc
            except BaseException:
                # Ctrl-C (which the child ignores) while it works: its answer would come
                # back to the next call, so it goes.
                self._stop()
                raise
            if kind == "error":
                raise RuntimeError(payload)
            return payload

    def _await_start(self, conn: Connection) -> None:
        """Wait for the child's first answer; a child that cannot start is unavailable."""
        try:
            if not conn.poll(STARTUP):
                raise EOFError
            conn.recv()
        except (EOFError, OSError) as exc:
            self._stop()
            self._unavailable = True
            raise Unavailable("the solver process did not start") from exc
        self._pending = False

    def is_ready(self) -> bool:
        """Whether the child runs, has answered its first request and has no call of
        another thread in flight (never waits)."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._proc is None or self._conn is None:
                return False
            if self._pending:
                try:
                    if not self._conn.poll(0):
                        if self._proc.poll() is None:
                            return False  # still starting
                        raise EOFError
                    self._conn.recv()
                except (EOFError, OSError):
                    # Dead before its first answer: it cannot start here (as _await_start).
                    self._stop()
                    self._unavailable = True
                    return False
                self._pending = False
            return self._proc.poll() is None
        finally:
            self._lock.release()

    def wait_ready(self, timeout: float, poll: float = 0.05) -> bool:
        """Start the child if need be and wait until :meth:`is_ready`, at most
        ``timeout`` seconds: whether it is (at once ``False`` where none can start)."""
        end = time.monotonic() + timeout
        while not self.is_ready():
            if self._unavailable or time.monotonic() + poll >= end:
                return False
            self.warm()
            time.sleep(poll)
        return True

    def kill(self) -> None:
        """Kill the child now, even while another thread waits in :meth:`call` (that call
        then raises :class:`SolverDied`)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()

    def close(self) -> None:
        """Stop the child (it is also stopped when this process exits)."""
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(OSError):
                    self._conn.send(None)
            self._stop()
