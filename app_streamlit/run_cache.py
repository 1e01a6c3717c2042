"""Finished what-if runs, kept on disk so that they outlive the app process.

A run's result depends only on the scenario, the budgets, the stage, the period and the
replicate, and on the code that simulated it. The page keeps results in memory by such
a key; :class:`RunCache` also writes each one to a file named by a digest of the key and
of :func:`code_version`, so that a restarted app (or a second one on the same machine)
answers a what-if it has seen before at once, and finds the current side of a new one
already done. A change to the simulator, the planner or a solver's version gives new
names: old files are never read for new code.

Each file is written to a temporary name, flushed and renamed, so a crash leaves the
whole result or nothing. A file that cannot be read is deleted and the run made again.
The folder is kept under a size limit, least recently used files first out.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import logging
import os
import pickle
import platform
import tempfile
from collections.abc import Iterator, MutableMapping
from functools import lru_cache
from pathlib import Path
from typing import Any

log = logging.getLogger("app_streamlit.run_cache")

CACHE_ENV = "GPUPLAN_APP_CACHE"
"""Where finished runs are kept: a folder, or ``off`` for memory only (default: the
user's cache folder, ``$XDG_CACHE_HOME/gpuplan/whatif`` or ``~/.cache/gpuplan/whatif``)."""
CACHE_LIMIT_ENV = "GPUPLAN_APP_CACHE_MB"
"""The folder's size limit in MB (default :data:`DEFAULT_LIMIT_MB`)."""
DEFAULT_LIMIT_MB = 1024
SUFFIX = ".run.pkl"
OFF = ("off", "0", "no", "false", "none")

# The packages whose code decides a run's result, and the libraries whose versions may.
_PACKAGES = ("planner", "models", "scenarios", "app_streamlit")
_LIBRARIES = ("ortools", "highspy", "pulp", "numpy", "pandas", "pydantic")


@lru_cache(maxsize=1)
def code_version() -> str:
    """A digest of gpuplan's source (the packages that simulate and reduce a run), the
    solver and data libraries' versions and Python's: what else a result depends on."""
    digest = hashlib.sha256(source_digest(Path(__file__).resolve().parent.parent, _PACKAGES).encode())
    for name in _LIBRARIES:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "-"
        digest.update(f"{name}={version}".encode())
    digest.update(platform.python_version().encode())
    return digest.hexdigest()[:32]


def source_digest(root: Path, packages: tuple[str, ...]) -> str:
    """A digest of the names and contents of the ``.py`` files under ``root/package``."""
    digest = hashlib.sha256()
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def default_folder() -> Path | None:
    """The folder :data:`CACHE_ENV` names, the user's cache folder, or ``None`` (off)."""
    given = os.environ.get(CACHE_ENV)
    if given is not None:
        return None if given.strip().lower() in OFF or not given.strip() else Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpuplan" / "whatif"


def default_limit_bytes() -> int:
    try:
        mb = float(os.environ.get(CACHE_LIMIT_ENV, DEFAULT_LIMIT_MB))
    except ValueError:
        mb = DEFAULT_LIMIT_MB
    return int(max(mb, 0.0) * 2**20)


class RunCache(MutableMapping[Any, Any]):
    """Results by key, in memory and, when ``folder`` is given, in one file per key.

    Keys must have a stable ``repr`` (tuples of strings and numbers): the file name is a
    digest of it and of ``version``. Iteration, ``len`` and ``items`` cover the results
    this process holds (read or made here); ``in`` and ``[]`` also find the files.
    """

    def __init__(
        self, folder: Path | None, *, version: str | None = None, limit_bytes: int | None = None
    ) -> None:
        self.folder = folder
        self.version = code_version() if version is None else version
        self.limit_bytes = default_limit_bytes() if limit_bytes is None else limit_bytes
        self._memory: dict[Any, Any] = {}
        if folder is not None:
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # a cache that cannot be written is no cache, not an error
                log.warning("what-if results stay in memory: cannot create %s: %s", folder, exc)
                self.folder = None

    @classmethod
    def from_environment(cls) -> RunCache:
        return cls(default_folder())

    def path(self, key: Any) -> Path | None:
        if self.folder is None:
            return None
        name = hashlib.sha256(repr((self.version, key)).encode()).hexdigest()[:40]
        return self.folder / f"{name}{SUFFIX}"

    def __contains__(self, key: object) -> bool:
        if key in self._memory:
            return True
        path = self.path(key)
        return path is not None and path.exists()

    def __getitem__(self, key: Any) -> Any:
        try:
            return self._memory[key]
        except KeyError:
            pass
        path = self.path(key)
        if path is None or not path.exists():
            raise KeyError(key)
        try:
            with path.open("rb") as handle:
                stored_key, result = pickle.load(handle)
        except Exception as exc:  # torn, foreign or from another Python: run it again
            log.warning("ignoring unreadable what-if result %s: %s", path, exc)
            path.unlink(missing_ok=True)
            raise KeyError(key) from None
        if stored_key != key:
            raise KeyError(key)  # a digest collision: never the wrong result
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: evicted last
        self._memory[key] = result
        return result

    def __setitem__(self, key: Any, result: Any) -> None:
        self._memory[key] = result
        path = self.path(key)
        if path is None:
            return
        try:
            self._write(path, key, result)
        except OSError as exc:  # a full disk loses the copy, not the answer
            log.warning("what-if result kept in memory only: %s", exc)
            return
        self._evict(keep=path)

    def __delitem__(self, key: Any) -> None:
        found = self._memory.pop(key, None) is not None
        path = self.path(key)
        if path is not None and path.exists():
            path.unlink(missing_ok=True)
            found = True
        if not found:
            raise KeyError(key)

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._memory))

    def __len__(self) -> int:
        return len(self._memory)

    def clear(self) -> None:
        """Forget every result: this process's, and the files in the folder."""
        self._memory.clear()
        for path in self._files():
            path.unlink(missing_ok=True)

    def _files(self) -> list[Path]:
        if self.folder is None:
            return []
        return [p for p in self.folder.glob(f"*{SUFFIX}") if p.is_file()]

    def _write(self, path: Path, key: Any, result: Any) -> None:
        assert self.folder is not None
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=SUFFIX + ".part")
        try:
            with os.fdopen(fd, "wb") as handle:
                pickle.dump((key, result), handle, protocol=pickle.HIGHEST_PROTOCOL)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _evict(self, keep: Path) -> None:
        """Delete the least recently used files until the folder fits its limit (never
        the one just written)."""
        files = []
        for path in self._files():
            try:
                stat = path.stat()
            except OSError:
                continue
            files.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= self.limit_bytes:
                break
            if path != keep:
                path.unlink(missing_ok=True)
                total -= size
