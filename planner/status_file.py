"""The live status file, ``LEDGER.status.json``: the run writes it, everyone else reads it.

``gpuplan run`` replaces the file atomically after each decision (a temporary file in the
same directory, then :func:`os.replace`), so a reader sees the previous snapshot or the
next one, never half of one, and reading takes no lock the run could wait on.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from pydantic import ValidationError

from models import LiveStatus
from planner.ledger import beside_ledger


class StatusFileError(ValueError):
    """A status file that is missing or is not a gpuplan live status (names the file)."""


def status_path(ledger: str | Path) -> Path:
    """Where the live status of the run on ``ledger`` is kept: ``LEDGER.status.json``,
    beside the real file when ``ledger`` is a symbolic link (one status per ledger)."""
    return beside_ledger(ledger, ".status.json")


def write_status(path: str | Path, status: LiveStatus) -> None:
    """Replace ``path`` with ``status`` atomically (temporary file, then ``os.replace``)."""
    target = Path(path)
    # One temporary name per process: two writers never interleave in one file.
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as out:
            out.write(status.model_dump_json())
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def read_status(path: str | Path) -> LiveStatus:
    """The status kept at ``path``.

    Raises
    ------
    StatusFileError
        When the file is missing, unreadable, or not a live status; the message names
        the file and, for a bad field, its path.
    """
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StatusFileError(
            f"{source}: no live status (it is written by `gpuplan run --ledger` while it runs)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StatusFileError(f"{source}: cannot read the live status: {exc}") from None
    try:
        return LiveStatus.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise StatusFileError(f"{source}: not a gpuplan live status: {where}: {first['msg']}") from None


class StatusBoard:
    """The latest :class:`LiveStatus` of a run: kept for the metrics endpoint, written to a file.

    The live loop calls :meth:`publish` after each decision; the metrics server reads
    :meth:`latest` from its own thread (one reference swap: no lock, and a scrape never
    waits on the loop).

    Parameters
    ----------
    path
        The status file (:func:`status_path` of the ledger), or ``None`` to keep the
        status in memory only (a run without a ledger).
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._latest: LiveStatus | None = None

    def publish(self, status: LiveStatus) -> None:
        """Make ``status`` the latest and replace the status file with it."""
        self._latest = status
        if self.path is not None:
            write_status(self.path, status)

    def latest(self) -> LiveStatus | None:
        """The last published status, ``None`` before the first."""
        return self._latest
