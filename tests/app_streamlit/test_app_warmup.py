"""Background runs of the what-if's current side (``app_streamlit.warmup``)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from app_streamlit.warmup import Warmup


def _key(point: Any) -> Any:
    return ("key", point)


class _Batch:
    """A batch that reports each point's result (its name twice), after ``gate`` opens;
    the points named in ``fail`` fail."""

    def __init__(self, fail: tuple[str, ...] = ()) -> None:
        self.gate = threading.Event()
        self.calls: list[list[Any]] = []
        self.fail = fail

    def __call__(self, todo: list[Any], on_point: Any, on_hours: Any) -> None:
        self.calls.append(list(todo))
        self.gate.wait(30)
        for point in todo:
            on_hours(point, 12.0, 24.0)
            if point in self.fail:
                on_point(point, None, "simulator error")
            else:
                on_point(point, point * 2, None)


def test_started_runs_land_in_the_cache_and_their_futures() -> None:
    """The batch runs in the background; each result goes to the cache and to the run's
    future, and its simulated hours are kept."""
    warm, batch, cache = Warmup(), _Batch(), {}
    assert warm.start(["a", "b"], _key, cache, batch) == ["a", "b"]
    future = warm.pending(_key("a"))
    assert future is not None and not future.done()
    batch.gate.set()
    assert future.result(timeout=30) == "aa"
    assert warm.pending(_key("b")).result(timeout=30) == "bb"  # type: ignore[union-attr]
    assert cache == {_key("a"): "aa", _key("b"): "bb"}
    assert warm.hours(_key("a")) == (12.0, 24.0)


def test_runs_cached_or_under_way_are_not_started_again() -> None:
    """A point already in the cache is skipped; once a batch has ended, the same points
    are not run again."""
    warm, batch, cache = Warmup(), _Batch(), {_key("a"): "cached"}
    assert warm.start(["a", "b"], _key, cache, batch) == ["b"]
    batch.gate.set()
    warm.pending(_key("b")).result(timeout=30)  # type: ignore[union-attr]
    _wait_idle(warm)
    assert warm.start(["a", "b"], _key, cache, batch) == []
    assert batch.calls == [["b"]]


def test_the_latest_batch_asked_for_meanwhile_runs_next() -> None:
    """Batches asked for while one runs wait; only the latest starts when it ends, and
    without the points the first one ran."""
    warm, batch, cache = Warmup(), _Batch(), {}
    assert warm.start(["a"], _key, cache, batch) == ["a"]
    assert warm.start(["b"], _key, cache, batch) == []  # busy: waits
    assert warm.start(["a", "c"], _key, cache, batch) == []  # replaces the one above
    batch.gate.set()
    for _ in range(300):
        if len(batch.calls) == 2 and not warm.busy:
            break
        threading.Event().wait(0.1)
    assert batch.calls == [["a"], ["c"]]
    assert cache == {_key("a"): "aa", _key("c"): "cc"}


def test_a_failed_run_keeps_its_error_and_may_start_again() -> None:
    """A run that failed holds the error in its future; the next start runs it again."""
    warm, batch, cache = Warmup(), _Batch(fail=("b",)), {}
    batch.gate.set()
    warm.start(["a", "b"], _key, cache, batch)
    with pytest.raises(RuntimeError, match="simulator error"):
        warm.pending(_key("b")).result(timeout=30)  # type: ignore[union-attr]
    _wait_idle(warm)
    assert _key("b") not in cache
    assert warm.waitable(_key("b")) is None  # not worth waiting for: it failed
    assert warm.waitable(_key("a")) is warm.pending(_key("a"))
    assert warm.start(["a", "b"], _key, cache, batch) == ["b"]


def test_a_batch_that_raises_fails_every_run_it_did_not_report() -> None:
    """An error of the whole batch (no cluster) ends each of its runs' futures with it."""
    warm = Warmup()

    def broken(todo: list[Any], on_point: Any, on_hours: Any) -> None:
        raise OSError("no Dask cluster to run on")

    warm.start(["a"], _key, {}, broken)
    with pytest.raises(OSError, match="no Dask cluster"):
        warm.pending(_key("a")).result(timeout=30)  # type: ignore[union-attr]


def test_forget_drops_only_an_ended_run() -> None:
    """``forget`` leaves a run under way alone and drops one that has ended."""
    warm, batch, cache = Warmup(), _Batch(), {}
    warm.start(["a"], _key, cache, batch)
    warm.forget(_key("a"))
    assert warm.pending(_key("a")) is not None
    batch.gate.set()
    warm.pending(_key("a")).result(timeout=30)  # type: ignore[union-attr]
    warm.forget(_key("a"))
    assert warm.pending(_key("a")) is None


def _wait_idle(warm: Warmup) -> None:
    """Until the batch thread has let go (a start of nothing new then returns at once)."""
    for _ in range(300):
        if not warm.busy:
            return
        threading.Event().wait(0.1)
    raise AssertionError("the warm-up batch never ended")


def test_a_dropped_waiting_batch_never_runs() -> None:
    """``drop_waiting`` forgets the batch asked for while another ran: only the first
    one runs."""
    warm, batch, cache = Warmup(), _Batch(), {}
    warm.start(["a"], _key, cache, batch)
    warm.start(["b"], _key, cache, batch)
    warm.drop_waiting()
    batch.gate.set()
    warm.pending(_key("a")).result(timeout=30)  # type: ignore[union-attr]
    _wait_idle(warm)
    assert batch.calls == [["a"]]
    assert warm.pending(_key("b")) is None
