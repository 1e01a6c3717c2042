"""The policy registry."""

from __future__ import annotations

import inspect

from planner.scheduler import OPTIONS
from planner.scheduler.fairshare import FairSharePolicy
from planner.scheduler.legacy import LegacyPolicy
from planner.scheduler.mip import MipPolicy


def test_the_registry_names_every_option_each_policy_takes() -> None:
    """A sweep or a run may set only the options in ``OPTIONS``: one a policy takes but
    the registry leaves out cannot be set from a sweep."""
    for name, cls in (("legacy", LegacyPolicy), ("fairshare", FairSharePolicy), ("mip", MipPolicy)):
        takes = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
        assert sorted(OPTIONS[name]) == sorted(takes), name
