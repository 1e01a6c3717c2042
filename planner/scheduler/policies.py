"""The policy registry: the scheduling policies, behind one :class:`Policy` protocol.

``legacy`` (the old priority system), ``fairshare`` (the institute's greedy fair-share
sort) and ``mip`` (our epoch planner). :func:`make_policy` is the explicit registry.
"""

from __future__ import annotations

from typing import Any

from planner.scheduler.core import Policy

POLICY_NAMES = ("legacy", "fairshare", "mip")


def make_policy(name: str, **options: Any) -> Policy:
    """A fresh policy object by name, with its options (unknown options are an error)."""
    if name == "legacy":
        from planner.scheduler.legacy import LegacyPolicy

        return LegacyPolicy(**options)
    if name == "fairshare":
        from planner.scheduler.fairshare import FairSharePolicy

        return FairSharePolicy(**options)
    if name == "mip":
        from planner.scheduler.mip import MipPolicy

        return MipPolicy(**options)
    raise ValueError(f"unknown policy {name!r} (choose from {', '.join(POLICY_NAMES)})")


OPTIONS = {
    "legacy": ("seed", "protected_fraction"),
    "fairshare": (),
    "mip": ("backend", "time_limit", "rel_gap", "replan_slices", "fast_lane", "holds",
            "hold_fraction", "hold_min_gpus", "funded_lane", "early_starts",
            "lazy_stops", "fast_lane_keeps", "lanes"),
}
"""The options each policy takes."""


def policy_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """The subset of ``options`` that policy ``name`` takes."""
    return {k: v for k, v in options.items() if k in OPTIONS.get(name, ())}


__all__ = ["OPTIONS", "POLICY_NAMES", "Policy", "make_policy", "policy_options"]
