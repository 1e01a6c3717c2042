"""What a live run remembers across restarts besides the ledger (``LEDGER.run.json``)."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from models.errors import GpuplanError
from models.limits import MAX_DAYS, MAX_SECONDS

ORIGIN_SLACK_S = 300.0
"""How far after now a kept origin may lie (clocks of two hosts sharing a ledger)."""


class RunStateError(GpuplanError, ValueError):
    """A run-state file that is not one (a directory, bad JSON, a non-finite origin);
    the message names the file. A ``ValueError`` too, for callers that caught that."""


@dataclass
class RunState:
    """What a live run must remember across restarts besides the ledger.

    ``origin`` is the wall-clock time of scenario time 0; ``submitted`` the scenario jobs
    already handed to the cluster (so a job that has finished, and that the cluster has
    forgotten, is not submitted again); ``free`` the funded jobs running uncharged (the
    plan ran them as free work), so that a restarted run does not start charging them.
    Kept as JSON next to the ledger (``LEDGER.run.json``), replaced atomically on every
    change. Files written before ``free`` existed read as no free work.
    """

    origin: float
    submitted: set[str] = field(default_factory=set)
    path: Path | None = None
    free: set[str] = field(default_factory=set)

    @classmethod
    def load(cls, path: Path | None, now: float) -> RunState:
        """The state kept at ``path``, or a new one starting ``now`` (saved there).

        Raises
        ------
        RunStateError
            When the file exists but is not a run state, or cannot be read or written
            (the message names it).
        """
        if path is not None:
            found = cls.read(path)
            if found is not None:
                # Scenario time counts from the origin: one after now, or beyond the
                # longest run gpuplan accepts, would put every decision at a time that
                # never comes or long passed.
                if found.origin > now + ORIGIN_SLACK_S:
                    raise RunStateError(
                        f"{path}: origin: the run's start ({found.origin:.0f}) is "
                        f"{found.origin - now:.0f} s after now; delete the file to start a new run"
                    )
                if now - found.origin > MAX_SECONDS:
                    raise RunStateError(
                        f"{path}: origin: the run's start ({found.origin:.0f}) is more than "
                        f"{MAX_DAYS:g} days ago; delete the file to start a new run"
                    )
                return found
        state = cls(now, set(), path)
        try:
            state.save()
        except OSError as exc:
            raise RunStateError(f"{path}: cannot write the run state: {exc.strerror}") from None
        return state

    @classmethod
    def read(cls, path: Path) -> RunState | None:
        """The state kept at ``path``, or ``None`` when there is no file; writes nothing.

        Raises
        ------
        RunStateError
            When something is at ``path`` that is not a gpuplan run state.
        """
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise RunStateError(f"{path}: is a directory, not a gpuplan run state file") from None
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise RunStateError(f"{path}: cannot read the run state: {reason}") from None
        try:
            data = json.loads(text)
            if not isinstance(data, dict):
                raise ValueError("expected a JSON object with origin and submitted")
            origin = data["origin"]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise RunStateError(f"{path}: not a gpuplan run state file ({exc})") from None
        if isinstance(origin, bool) or not isinstance(origin, int | float) or not math.isfinite(origin):
            raise RunStateError(
                f"{path}: origin: expected the run's start as a finite number of seconds, "
                f"got {origin!r}"
            )
        submitted, free = (_job_ids(path, data, name) for name in ("submitted", "free"))
        return cls(float(origin), submitted, path, free)

    def save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"origin": self.origin, "submitted": sorted(self.submitted),
                                   "free": sorted(self.free)}))
        os.replace(tmp, self.path)  # atomic: a crash never leaves half a file


def _job_ids(path: Path, data: dict[str, object], name: str) -> set[str]:
    """The job ids kept under ``name`` (none when the file has no such field)."""
    ids = data.get(name, [])
    if not isinstance(ids, list) or not all(isinstance(j, str) for j in ids):
        raise RunStateError(f"{path}: {name}: expected a list of job ids")
    return set(ids)
