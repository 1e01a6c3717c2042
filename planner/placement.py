"""Node placement of gangs inside one pool.

Multi-node gangs take whole nodes; a gang that fits one node packs into the fullest
node that still has room (best fit), so whole nodes stay free for large gangs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def nodes_needed(gpus: int, gpus_per_node: int) -> int:
    """Whole nodes a multi-node gang takes (1 for a gang that fits a node)."""
    return 1 if gpus <= gpus_per_node else math.ceil(gpus / gpus_per_node)


def holds_up_drain(window_start: float, start: float, contract: float) -> bool:
    """Whether a run started at ``start`` whose contract protects it for ``contract``
    seconds would still be protected when its node's maintenance window opens at
    ``window_start``: the drain would wait for the contract, so such a start is refused
    (the scheduler between plans and the plan's placement follow this one rule)."""
    return start < window_start < start + contract


def place_gang(
    free: Mapping[str, int],
    size: Mapping[str, int],
    gpus: int,
    prefer: Sequence[str] = (),
    spare: Mapping[str, int] | None = None,
) -> tuple[str, ...] | None:
    """Nodes for a gang of ``gpus`` GPUs, or ``None`` when it has no hole of its shape.

    Parameters
    ----------
    free
        Free GPUs per node (only nodes that may take new work).
    size
        GPUs per node (its full size).
    gpus
        The gang size.
    prefer
        Nodes to use first when they fit (the job's previous nodes), so a job keeps its
        nodes across slices and epochs where it can.
    spare
        Free GPUs per node outside the gang's time (a plan's other slices), or ``None``.
        Among nodes that fit equally, those with least to spare go first: the nodes that
        stay free longer are left to gangs that need them longer.
    """
    if not free:
        return None
    prefer_set = set(prefer)
    single = [n for n in free if gpus <= size[n]]
    if single:
        fits = [n for n in single if free[n] >= gpus]
        if not fits:
            return None
        # Previous node first, then best fit (least room left), then least to spare in
        # other slices (when given), then name for determinism.
        if spare is None:
            best = min(fits, key=lambda n: (n not in prefer_set, free[n] - gpus, n))
        else:
            best = min(fits, key=lambda n: (n not in prefer_set, free[n] - gpus, spare[n], n))
        return (best,)
    # Multi-node: whole empty nodes of one node size.
    by_size: dict[int, list[str]] = {}
    for n, f in free.items():
        if f == size[n]:
            by_size.setdefault(size[n], []).append(n)
    for node_size in sorted(by_size, reverse=True):
        need = nodes_needed(gpus, node_size)
        empty = by_size[node_size]
        if len(empty) >= need:
            if spare is None:
                chosen = sorted(empty, key=lambda n: (n not in prefer_set, n))[:need]
            else:
                chosen = sorted(empty, key=lambda n: (n not in prefer_set, spare[n], n))[:need]
            return tuple(sorted(chosen))
    return None


def per_node_gpus(gpus: int, nodes: tuple[str, ...], node_size: int) -> int:
    """GPUs a gang placed on ``nodes`` takes on each: all of them on a single node, the
    whole node when it spans several."""
    return gpus if len(nodes) == 1 else node_size


def gpus_taken(gpus: int, gpus_per_node: int) -> int:
    """GPUs a gang occupies: all GPUs of its nodes when it spans several."""
    if gpus <= gpus_per_node:
        return gpus
    return nodes_needed(gpus, gpus_per_node) * gpus_per_node
