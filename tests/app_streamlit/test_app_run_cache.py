"""Finished what-if runs kept on disk (``app_streamlit.run_cache``)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from app_streamlit import run_cache
from app_streamlit.run_cache import SUFFIX, RunCache

KEY = ("scenario-key", (("vision", 25.0),), "fairshare", 7.0, 0, 1800.0, "digest")


def test_a_result_outlives_the_process_that_made_it(tmp_path: Path) -> None:
    """What one cache wrote, another on the same folder (the next app process) reads."""
    RunCache(tmp_path, version="v1")[KEY] = {"delivered": 1.5}
    later = RunCache(tmp_path, version="v1")
    assert KEY in later
    assert later[KEY] == {"delivered": 1.5}
    assert ("scenario-key", (), "fairshare", 7.0, 0, 1800.0, "digest") not in later


def test_other_code_never_reads_an_older_result(tmp_path: Path) -> None:
    """A result made by other code (another version digest) is not found."""
    RunCache(tmp_path, version="v1")[KEY] = "old"
    newer = RunCache(tmp_path, version="v2")
    assert KEY not in newer
    with pytest.raises(KeyError):
        newer[KEY]


def test_an_unreadable_file_is_dropped_and_the_run_made_again(tmp_path: Path) -> None:
    cache = RunCache(tmp_path, version="v1")
    cache[KEY] = "result"
    path = cache.path(KEY)
    assert path is not None
    path.write_bytes(b"torn")
    fresh = RunCache(tmp_path, version="v1")
    with pytest.raises(KeyError):
        fresh[KEY]
    assert not path.exists()


def test_a_file_holding_another_key_is_not_taken_for_this_one(tmp_path: Path) -> None:
    """The file's own key is checked, so even a digest collision gives no wrong result."""
    cache = RunCache(tmp_path, version="v1")
    path = cache.path(KEY)
    assert path is not None
    path.write_bytes(pickle.dumps((("another",), "wrong")))
    with pytest.raises(KeyError):
        cache[KEY]


def test_writes_leave_no_partial_files(tmp_path: Path) -> None:
    cache = RunCache(tmp_path, version="v1")
    for replicate in range(3):
        cache[(*KEY[:4], replicate, *KEY[5:])] = list(range(1000))
    assert sorted(p.name.endswith(SUFFIX) for p in tmp_path.iterdir()) == [True, True, True]


def test_the_least_recently_used_files_go_first_past_the_limit(tmp_path: Path) -> None:
    cache = RunCache(tmp_path, version="v1", limit_bytes=2500)
    keys = [(*KEY[:4], r, *KEY[5:]) for r in range(3)]
    for i, key in enumerate(keys):
        cache[key] = b"x" * 1000
        path = cache.path(key)
        assert path is not None
        os.utime(path, (1000.0 + i, 1000.0 + i))  # written one after another
    cache[keys[0]]  # read from memory: no file touched
    later = RunCache(tmp_path, version="v1", limit_bytes=2500)
    assert keys[0] not in later  # the oldest file went when the third was written
    assert keys[1] in later and keys[2] in later


def test_off_keeps_results_in_memory_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(run_cache.CACHE_ENV, "off")
    cache = RunCache.from_environment()
    cache[KEY] = "here"
    assert cache[KEY] == "here" and cache.folder is None
    monkeypatch.setenv(run_cache.CACHE_ENV, str(tmp_path / "runs"))
    assert RunCache.from_environment().folder == tmp_path / "runs"


def test_the_default_folder_is_the_users_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(run_cache.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert run_cache.default_folder() == tmp_path / "gpuplan" / "whatif"


def test_an_unwritable_folder_falls_back_to_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = RunCache(blocker / "runs", version="v1")
    cache[KEY] = "kept"
    assert cache.folder is None and cache[KEY] == "kept"


def test_clear_forgets_the_files_too(tmp_path: Path) -> None:
    cache = RunCache(tmp_path, version="v1")
    cache[KEY] = "result"
    cache.clear()
    assert KEY not in RunCache(tmp_path, version="v1")
    assert len(cache) == 0


def test_the_code_version_follows_the_source(tmp_path: Path) -> None:
    """Editing, adding or renaming a source file gives another digest."""
    (tmp_path / "planner").mkdir()
    module = tmp_path / "planner" / "core.py"
    module.write_text("RULE = 1\n")
    first = run_cache.source_digest(tmp_path, ("planner",))
    assert run_cache.source_digest(tmp_path, ("planner",)) == first
    module.write_text("RULE = 2\n")
    edited = run_cache.source_digest(tmp_path, ("planner",))
    (tmp_path / "planner" / "more.py").write_text("")
    added = run_cache.source_digest(tmp_path, ("planner",))
    module.rename(tmp_path / "planner" / "renamed.py")
    renamed = run_cache.source_digest(tmp_path, ("planner",))
    assert len({first, edited, added, renamed}) == 4
    assert len(run_cache.code_version()) == 32
