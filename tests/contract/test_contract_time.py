"""Time bounds: `since` and `until` bound created_at inclusively, in UTC; import_ places memories in time."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from memserver.errors import InvalidInputError
from tests.contract.harness import MODES, Backend

# Five moments around 1 March 2025 (UTC), stored in an order that is not time order.
MOMENTS = {
    "a": "2025-02-28T23:59:59.999999Z",
    "b": "2025-03-01T00:00:00Z",
    "c": "2025-03-01T12:00:00Z",
    "d": "2025-03-01T23:59:59.999999Z",
    "e": "2025-03-02T00:00:00Z",
}
QUERY = "moment"


@pytest.fixture
def moments(store: Backend) -> Backend:
    store.import_([{"content": f"{QUERY} {name}", "created_at": MOMENTS[name]} for name in ("c", "e", "a", "d", "b")])
    return store


def _window(store: Backend, mode: str, **bounds: object) -> str:
    """The names of the moments a search with these bounds returns, sorted."""
    hits = store.search(QUERY, limit=10, mode=mode, **bounds)
    return "".join(sorted(h.memory.content.split()[-1] for h in hits))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("bounds", "expected"),
    [
        ({}, "abcde"),
        ({"since": "2025-03-01T00:00:00Z"}, "bcde"),
        ({"since": "2025-03-01T00:00:00.000001Z"}, "cde"),
        ({"until": "2025-03-01T12:00:00Z"}, "abc"),
        ({"until": "2025-03-01T11:59:59.999999Z"}, "ab"),
        ({"since": "2025-03-01T12:00:00Z", "until": "2025-03-01T12:00:00Z"}, "c"),
    ],
    ids=["none", "since-inclusive", "since-1us-later", "until-inclusive", "until-1us-earlier", "one-instant"],
)
def test_bounds_are_inclusive(moments: Backend, mode: str, bounds: dict[str, str], expected: str) -> None:
    """A memory created exactly at `since` or at `until` is inside the window, one microsecond beyond is not."""
    assert _window(moments, mode, **bounds) == expected


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("bounds", "expected"),
    [
        ({"until": "2025-03-01"}, "abcd"),
        ({"since": "2025-03-01"}, "bcde"),
        ({"since": "2025-03-01", "until": "2025-03-01"}, "bcd"),
        ({"until": "2025-02-28"}, "a"),
    ],
    ids=["until-day", "since-day", "one-day", "until-day-before"],
)
def test_a_date_only_bound_covers_the_whole_utc_day(
    moments: Backend, mode: str, bounds: dict[str, str], expected: str
) -> None:
    """A date-only `since` starts at that day's midnight UTC; a date-only `until` includes that whole day."""
    assert _window(moments, mode, **bounds) == expected


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("bounds", "expected"),
    [
        ({"since": "2025-03-01T12:00:00"}, "cde"),
        ({"until": "2025-03-01T12:00:00"}, "abc"),
        ({"since": "2025-03-01 12:00:00"}, "cde"),
        ({"since": "2025-03-01T12:00:00z"}, "cde"),
    ],
    ids=["since-naive", "until-naive", "space-separator", "lower-z"],
)
def test_a_time_without_offset_is_utc(moments: Backend, mode: str, bounds: dict[str, str], expected: str) -> None:
    """A naive time is taken as UTC ("Z", "z" and a space for "T" are accepted too)."""
    assert _window(moments, mode, **bounds) == expected


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("bounds", "expected"),
    [
        ({"since": "2025-03-01T14:00:00+02:00"}, "cde"),
        ({"until": "2025-03-01T07:00:00-05:00"}, "abc"),
        ({"since": "2025-03-01T01:00:00+01:00", "until": "2025-03-01T18:59:59.999999-05:00"}, "bcd"),
    ],
    ids=["since-east", "until-west", "both"],
)
def test_a_time_with_an_offset_is_converted_to_utc(
    moments: Backend, mode: str, bounds: dict[str, str], expected: str
) -> None:
    """A bound with a UTC offset means that instant: 14:00+02:00 is 12:00 UTC."""
    assert _window(moments, mode, **bounds) == expected


def test_date_and_datetime_objects_are_accepted(moments: Backend) -> None:
    """Python callers may pass a date (a whole day, as a date-only string) or a datetime (naive = UTC)."""
    assert _window(moments, "semantic", until=date(2025, 3, 1)) == "abcd"
    assert _window(moments, "semantic", since=datetime(2025, 3, 1, 12)) == "cde"
    east = timezone(timedelta(hours=2))
    assert _window(moments, "semantic", until=datetime(2025, 3, 1, 14, tzinfo=east)) == "abc"


@pytest.mark.parametrize(
    ("since", "until"),
    [
        ("2025-03-02", "2025-03-01"),
        ("2025-03-01T12:00:00.000001Z", "2025-03-01T12:00:00Z"),
        ("2025-03-02T00:00:00Z", "2025-03-01"),  # the day ends before its next midnight
        ("2025-03-01T13:00:00+02:00", "2025-03-01T10:00:00Z"),  # 11:00 UTC after 10:00 UTC
    ],
)
def test_since_after_until_is_refused_naming_both(moments: Backend, since: str, until: str) -> None:
    """A window that ends before it starts is an input error that quotes both bounds."""
    with pytest.raises(InvalidInputError) as exc:
        moments.search(QUERY, since=since, until=until)
    assert str(exc.value) == f"since ({since}) must not be later than until ({until})"


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("2025-03-01T12:00:00Z", "2025-03-01T12:00:00.000000+00:00"),
        ("2025-03-01T12:00:00.5+00:00", "2025-03-01T12:00:00.500000+00:00"),
        ("2025-03-01T12:00:00", "2025-03-01T12:00:00.000000+00:00"),
        ("2025-03-01T01:30:00+02:00", "2025-02-28T23:30:00.000000+00:00"),
        ("2025-03-01", "2025-03-01T00:00:00.000000+00:00"),
        ("2025-03-01T12:00:00.123456-07:00", "2025-03-01T19:00:00.123456+00:00"),
    ],
)
def test_import_stores_created_at_in_utc_with_microseconds(store: Backend, given: str, stored: str) -> None:
    """An imported created_at is converted to the one stored format: UTC, microseconds, "+00:00"."""
    assert store.import_([{"content": "placed in time", "created_at": given}]) == 1
    assert [m.created_at for m in store.list_recent()] == [stored]
    assert [r["created_at"] for r in store.export()] == [stored]


def test_import_without_created_at_is_stamped_now(store: Backend) -> None:
    """A record without created_at (or with None) gets the time of the import."""
    before = datetime.now(timezone.utc)
    store.import_([{"content": "no time given"}, {"content": "time is None", "created_at": None}])
    after = datetime.now(timezone.utc)
    assert all(before <= datetime.fromisoformat(r["created_at"]) <= after for r in store.export())
