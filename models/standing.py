"""A project's fair-share standing: what it is owed and what it has had."""

from __future__ import annotations

from models.base import Frozen


class ProjectStanding(Frozen):
    """Fair-share figures for one project at one moment (H100-equivalent units).

    ``owed_gpus`` is the project's water-filled share of capacity given current demand.
    ``ratio`` is delivered allocated time over owed time across the lookback window
    (below 1: the project is behind). ``headroom_gpu_h`` is what the project may still
    charge in the coming epoch.
    """

    project: str
    owed_gpus: float
    ratio: float
    deficit_gpu_h: float
    headroom_gpu_h: float
