"""TIMESTAMP text to epoch milliseconds: the texts of a second parsed once are looked up
after, and the lookup gives what ``datetime.fromisoformat`` gives."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.sql.timestamps import format_timestamp, parse_timestamp

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@settings(max_examples=500, deadline=None, database=None)
@given(
    millis=st.integers(-(10**12), 4 * 10**12),
    separator=st.sampled_from(" T"),
    neighbours=st.lists(st.integers(-999, 999), max_size=4),
)
def test_text_of_a_second_seen_before_parses_as_the_first_time(millis, separator, neighbours):
    for ms in (millis, *(millis + n for n in neighbours)):
        moment = EPOCH + timedelta(milliseconds=ms)
        text = moment.strftime(f"%Y-%m-%d{separator}%H:%M:%S.") + f"{ms % 1000:03d}"
        assert parse_timestamp(text) == ms
        assert parse_timestamp(text) == ms  # looked up
        assert format_timestamp(ms) == text.replace("T", " ")


def test_texts_that_only_look_like_a_known_second_are_parsed_in_full():
    assert parse_timestamp("2026-11-30 12:34:56.789") == 1796042096789
    assert parse_timestamp("2026-11-30 12:34:56.7x9") is None
    assert parse_timestamp("2026-11-30 12:34:56.7891") == 1796042096789  # microseconds
    assert parse_timestamp("2026-11-30 12:34:56.789Z") == 1796042096789
    assert parse_timestamp(" 2026-11-30 12:34:56.78") == 1796042096780
    assert parse_timestamp("2026-11-30 12:34:56+01:00") == 1796042096000 - 3_600_000
    assert parse_timestamp("2026-11-30 12:34:56.٧٨٩") is None  # non-ASCII digits
