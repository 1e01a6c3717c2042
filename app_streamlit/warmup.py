"""Runs started before they are asked for: the current side of a what-if.

Whatever a director edits, a what-if compares it with the current budgets, and those
runs depend only on the scenario, the period, the scheduler and the replicate. So the
what-if page starts them as it is drawn (on the Dask cluster, in the background), and a
**Run what-if** pressed later finds them done or under way instead of queuing them
behind its edited side. On 2 cores that turns a fresh what-if's preview from three
rounds of runs into two (``docs/app.md``, *How long it takes*).

Plain Python (no Streamlit): the page passes in how to run a batch and where results
go; :class:`Warmup` keeps one future per run so that the page can wait for a run that
is under way rather than start it twice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, MutableMapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

OnPoint = Callable[[Any, Any, "str | None"], None]
OnHours = Callable[[Any, float, float], None]
Batch = Callable[[list[Any], OnPoint, OnHours], None]
"""Runs its points (``on_point(point, result, error)`` as each ends, ``on_hours(point,
done_h, total_h)`` as each advances): :func:`app_streamlit.whatif.run_points` bound to
a scenario, a client and options."""


class Warmup:
    """Background runs whose results land in ``cache``, one batch at a time.

    ``pending(key)`` is the future of a run under way (its result, or the error that
    ended it); ``hours(key)`` its simulated hours so far. A batch asked for while
    another runs waits for it; only the latest one asked for does (the director moved
    on from the others: a changed period, another scheduler), and a run still missing
    when it is wanted runs then.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[Hashable, Future[Any]] = {}
        self._hours: dict[Hashable, tuple[float, float]] = {}
        self._busy = False
        self._next: tuple[Any, ...] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="whatif-warmup")

    def start(
        self,
        points: Sequence[Any],
        key_of: Callable[[Any], Hashable],
        cache: MutableMapping[Any, Any],
        batch: Batch,
    ) -> list[Any]:
        """Start the ``points`` not in ``cache`` nor under way; return those started
        (none while another batch runs: these then start when it ends, unless a later
        call replaces them)."""
        with self._lock:
            if self._busy:
                self._next = (points, key_of, cache, batch)
                return []
            todo = [p for p in points if key_of(p) not in cache and self._waitable(key_of(p)) is None]
            if not todo:
                return []
            futures = {key_of(p): Future[Any]() for p in todo}
            self._pending.update(futures)
            self._busy = True
        self._executor.submit(self._run, todo, key_of, cache, batch, futures)
        return todo

    @property
    def busy(self) -> bool:
        """Whether a batch is running."""
        return self._busy

    def drop_waiting(self) -> None:
        """Forget the batch waiting for the running one (the page now runs what it
        wants itself, and the waiting batch would run the same points again)."""
        with self._lock:
            self._next = None

    def waitable(self, key: Hashable) -> Future[Any] | None:
        """The future of the run of ``key`` if it is running or ended with a result,
        else ``None`` (one that failed may be started again)."""
        with self._lock:
            return self._waitable(key)

    def _waitable(self, key: Hashable) -> Future[Any] | None:
        future = self._pending.get(key)
        if future is None or (future.done() and future.exception() is not None):
            return None
        return future

    def pending(self, key: Hashable) -> Future[Any] | None:
        """The future of the run of ``key`` if it is under way (or ended since it was
        last asked for), else ``None``."""
        with self._lock:
            return self._pending.get(key)

    def hours(self, key: Hashable) -> tuple[float, float] | None:
        """Simulated hours done and in all of the run of ``key``, once it has told any."""
        return self._hours.get(key)

    def forget(self, key: Hashable) -> None:
        """Drop an ended run's future (its result is in the cache, or it failed and will
        run again when wanted)."""
        with self._lock:
            future = self._pending.get(key)
            if future is not None and future.done():
                del self._pending[key]
                self._hours.pop(key, None)

    def _run(
        self,
        todo: list[Any],
        key_of: Callable[[Any], Hashable],
        cache: MutableMapping[Any, Any],
        batch: Batch,
        futures: dict[Hashable, Future[Any]],
    ) -> None:
        def on_point(point: Any, result: Any, error: str | None) -> None:
            key = key_of(point)
            if futures[key].done():
                return
            if result is not None:
                cache[key] = result
                futures[key].set_result(result)
            else:
                futures[key].set_exception(RuntimeError(error or "the run failed"))

        def on_hours(point: Any, done: float, total: float) -> None:
            self._hours[key_of(point)] = (done, total)

        try:
            batch(todo, on_point, on_hours)
        except BaseException as exc:  # kept in the futures of the runs it stopped
            for future in futures.values():
                if not future.done():
                    future.set_exception(exc)
        finally:
            for future in futures.values():
                if not future.done():
                    future.set_exception(RuntimeError("the run was not reported"))
            with self._lock:
                self._busy = False
                waiting, self._next = self._next, None
            if waiting is not None:
                self.start(*waiting)
