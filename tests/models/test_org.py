import pytest

from models import OrgUnit, effective_shares, project_paths, with_shares


def _org() -> tuple[OrgUnit, ...]:
    return (
        OrgUnit.model_validate({"name": "research", "share": 3, "children": [{"name": "nlp", "share": 2}, {"name": "vision", "share": 1}]}),
        OrgUnit(name="infra", share=1),
    )


def test_projects_are_leaf_paths() -> None:
    """Projects are the leaves, named by their path."""
    assert project_paths(_org()) == ("research/nlp", "research/vision", "infra")


def test_effective_share_multiplies_down_the_tree() -> None:
    """A unit's effective share is its fraction among siblings times its parent's."""
    shares = effective_shares(_org())
    assert shares["research"] == pytest.approx(0.75)
    assert shares["research/nlp"] == pytest.approx(0.5)
    assert shares["infra"] == pytest.approx(0.25)


def test_with_shares_returns_an_edited_copy() -> None:
    """with_shares edits the named units and leaves the original untouched."""
    org = _org()
    edited = with_shares(org, {"research/vision": 2.0})
    assert effective_shares(edited)["research/vision"] == pytest.approx(0.375)
    assert effective_shares(org)["research/vision"] == pytest.approx(0.25)
