"""What a live run remembers across restarts besides the ledger (``LEDGER.run.json``)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RunState:
    """What a live run must remember across restarts besides the ledger.

    ``origin`` is the wall-clock time of scenario time 0; ``submitted`` the scenario jobs
    already handed to the cluster (so a job that has finished, and that the cluster has
    forgotten, is not submitted again). Kept as JSON next to the ledger
    (``LEDGER.run.json``), replaced atomically on every change.
    """

    origin: float
    submitted: set[str] = field(default_factory=set)
    path: Path | None = None

    @classmethod
    def load(cls, path: Path | None, now: float) -> RunState:
        """The state kept at ``path``, or a new one starting ``now`` (saved there).

        Raises
        ------
        ValueError
            When the file exists but is not a run state (the message names it).
        """
        if path is not None:
            try:
                data = json.loads(path.read_text())
                return cls(float(data["origin"]), set(map(str, data.get("submitted", []))), path)
            except FileNotFoundError:
                pass
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}: not a gpuplan run state file ({exc})") from None
        state = cls(now, set(), path)
        state.save()
        return state

    def save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"origin": self.origin, "submitted": sorted(self.submitted)}))
        os.replace(tmp, self.path)  # atomic: a crash never leaves half a file
