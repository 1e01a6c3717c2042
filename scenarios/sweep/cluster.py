"""Dask: the client a sweep runs on (given, by address, or a new local cluster), and the
loop that hands each finished point back as it completes."""

from __future__ import annotations

import collections
import dataclasses
import importlib
import logging
import math
import queue
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from scenarios.sweep.errors import ELAPSED_COLUMN, ERROR_COLUMN, SchedulerUnreachable
from scenarios.sweep.grid import SweepBase
from scenarios.sweep.runner import HoursCallback, PointTask, _describe, _row_head, run_point_kept

if TYPE_CHECKING:
    from distributed import Client


@contextmanager
def dask_client(workers: int, scheduler: str | None, client: Client | None) -> Iterator[Client | None]:
    """The client to run on: the given one, one connected to ``scheduler``, one of a
    new local cluster, or ``None`` (run in this process)."""
    if client is not None:
        yield client
        return
    if scheduler is None and workers == 0:
        yield None
        return
    # distributed's constructors are untyped; go through Any rather than silence mypy.
    dd: Any = importlib.import_module("distributed")
    if scheduler is not None:
        try:
            connected = dd.Client(scheduler, timeout="10s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise SchedulerUnreachable(
                None, f"cannot connect to the Dask scheduler at {scheduler}: {exc}"
            ) from None
        with connected:
            yield connected
        return
    # Processes, one thread each: the simulator is pure Python, so threads would share
    # one GIL. The scheduler's HTTP server takes any free port (a fixed one clashes
    # between concurrent sweeps); the workers start none.
    with start_local_cluster(workers) as cluster, dd.Client(cluster) as local:
        yield local


def start_local_cluster(workers: int, preload: Sequence[str] = ()) -> Any:
    """A new local Dask cluster of ``workers`` processes, one thread each (see
    :func:`dask_client`); the caller closes it. For a caller that runs many sweeps
    (the what-if app), which would otherwise pay the start-up of workers each time.

    ``preload``: modules each worker imports as it starts (the runner's), so the first
    sweep does not wait for them.
    """
    dd: Any = importlib.import_module("distributed")
    return dd.LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        worker_dashboard_address=None,
        silence_logs=logging.ERROR,
        preload=list(preload),
    )


#: ``finish(row, result)``: a finished point's row and (when kept) the runner's result.
Finish = Callable[[dict[str, Any], Any], None]

SLOTS_EVERY_S = 5.0
"""How often a sweep asks the scheduler how many worker threads there are (workers that
join are used from the next ask on)."""


def run_on_dask(
    client: Any, tasks: Sequence[PointTask], finish: Finish, hours: HoursCallback | None = None
) -> None:
    """Run every task, in the order given, as many at once as the workers have threads,
    and hand each row to ``finish`` as soon as it completes.

    A worker that dies mid-point (killed, out of memory) does not lose the point: the
    scheduler reruns it on another worker, up to ``distributed.scheduler.allowed-failures``
    times, after which the point is reported as failed. With ``hours``, the workers log
    each running point's simulated hours as events, passed on here in this thread.
    """
    dd: Any = importlib.import_module("distributed")
    run_id = uuid.uuid4().hex[:8]
    topic = f"sweep-hours-{run_id}" if hours is not None else None
    events: queue.Queue[Any] = queue.Queue()
    if topic is not None:
        client.subscribe_topic(topic, events.put)
    # The base scenario goes to the workers once, not inside every task: a task's
    # arguments pass through the scheduler, which unpickles and repickles them (3.6 MB
    # for ai2-like's 11,000 jobs: about a second of the scheduler's time per point on a
    # busy machine, which held back the points queued behind).
    bases: dict[int, Any] = {}
    for task in tasks:
        if id(task.base) not in bases:
            bases[id(task.base)] = _scattered(client, task.base)
    # The points start in the order given (the what-if app puts replicate 0's pair
    # first, for its first answer). Tasks that share the scattered base are not held
    # back on the scheduler: all submitted at once, each worker got several at once and
    # ran them in an order of its own (the pair given first came in last in 2 of 3
    # what-ifs). So only as many go out as the workers have threads, and the next goes
    # as one ends.
    waiting = collections.deque(tasks)
    futures: dict[Any, PointTask] = {}

    asked = [0, -math.inf]  # worker threads, and when the scheduler was last asked

    def submit_more() -> None:
        # Each ask fetches every worker's details: on a big cluster, not once per point.
        if time.monotonic() - asked[1] >= SLOTS_EVERY_S:
            workers = client.scheduler_info()["workers"].values()
            asked[:] = [max(1, sum(int(w.get("nthreads", 1)) for w in workers)), time.monotonic()]
        slots = asked[0]
        while waiting and len(pending) < slots:
            task = waiting.popleft()
            future = client.submit(
                _run_with_base,
                bases[id(task.base)],
                dataclasses.replace(task, base=_NO_BASE, hours_topic=topic, side_by_side=True),
                key=f"sweep-{run_id}-{task.point.key}",
                pure=False,
            )
            futures[future] = task
            pending.add(future)

    pending: set[Any] = set()
    submit_more()
    try:
        while pending:
            try:
                done, pending = dd.wait(pending, timeout=0.25, return_when="FIRST_COMPLETED")
            except TimeoutError:  # nothing finished yet: pass on the hours and wait again
                done = set()
            _drain(events, hours)
            for future in done:
                task = futures[future]
                try:
                    row, result = future.result()
                except Exception as exc:  # the point's worker died too often, or was lost
                    row, result = _row_head(task.point), None
                    row[ERROR_COLUMN] = _describe(exc)
                    row[ELAPSED_COLUMN] = None
                finish(row, result)
                future.release()
            if done:
                submit_more()
    finally:
        # On Ctrl-C (or any error) stop the points still queued; finished ones are saved.
        client.cancel(list(futures))
        if topic is not None:
            client.unsubscribe_topic(topic)


_SCATTERED: dict[tuple[int, int], tuple[weakref.ref[Any], weakref.ref[Any], Any]] = {}
"""(client, base) by identity -> weak references to both and the base's future on the
workers: a base scattered once stays there for every later sweep of it (the what-if
app runs each edit as a sweep of the same base; a scatter of ai2-like took 0.5-0.8 s
on 2 cores, on the path to the answer)."""
_SCATTERED_LOCK = threading.Lock()


def _scattered(client: Any, base: SweepBase) -> Any:
    """The future of ``base`` on ``client``'s workers, scattered once while both live
    (and the data is still there); entries of closed clients or dead bases are dropped."""
    key = (id(client), id(base))
    with _SCATTERED_LOCK:
        for k, (base_ref, client_ref, future) in list(_SCATTERED.items()):
            held = client_ref()
            if base_ref() is None or held is None or held.status != "running" or future.status != "finished":
                del _SCATTERED[k]
        hit = _SCATTERED.get(key)
        if hit is not None and hit[0]() is base and hit[1]() is client:
            return hit[2]
        future = client.scatter(base, broadcast=True, hash=False)
        _SCATTERED[key] = (weakref.ref(base), weakref.ref(client), future)
        return future


_NO_BASE = SweepBase(data={}, file="", fingerprint="")
"""Stands for the base in a task sent without it (:func:`_run_with_base` puts it back)."""


def _run_with_base(base: SweepBase, task: PointTask) -> tuple[dict[str, Any], Any]:
    """:func:`run_point_kept` of ``task`` with its base, shipped to the worker apart."""
    return run_point_kept(dataclasses.replace(task, base=base))


def _drain(events: queue.Queue[Any], hours: HoursCallback | None) -> None:
    while hours is not None:
        try:
            event = events.get_nowait()
        except queue.Empty:
            return
        message = event[1] if isinstance(event, tuple) and len(event) == 2 else event
        if isinstance(message, dict) and "point" in message:
            hours(str(message["point"]), float(message["done"]), float(message["total"]))
