import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("15m", 900), ("2h", 7200), ("7d", 604800), ("3600", 3600), (45, 45), ("1h30m", 5400)],
)
def test_parse_duration_units(text: object, seconds: float) -> None:
    """Durations read 90s, 15m, 2h, 7d, compound forms and plain seconds."""
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["abc", "5x", "", None, True, "1h30", "\u0663h", "1\u0663m", "1_000"])
def test_parse_duration_rejects_garbage(bad: object) -> None:
    """Anything that is not a duration is a ValueError naming the accepted forms."""
    with pytest.raises(ValueError, match="expected a duration"):
        parse_duration(bad)


@settings(derandomize=True, max_examples=200)
@given(st.integers(min_value=0, max_value=10**8))
def test_format_parse_round_trip(seconds: int) -> None:
    """format_duration writes text that parse_duration reads back exactly."""
    assert parse_duration(format_duration(seconds)) == seconds
