"""columns.py on its own: the fixed-width text column falls back to objects for values that do not fit."""

from __future__ import annotations

import pytest

from memserver.local import columns


@pytest.mark.parametrize("odd", ["x" * 33, "café", "ends in NUL\0"])
def test_a_value_that_does_not_fit_switches_the_column_to_objects(odd: str) -> None:
    """Longer than the width, non-ASCII or ending in NUL: the column keeps every value, as objects from then on,
    and its snapshot payload restores the same values."""
    col = columns.FixedText(32)
    col.grow(4)
    col.set(0, "a" * 32)
    assert col.fixed
    col.set(1, odd)
    col.clear(0)
    assert not col.fixed and [col.get(0), col.get(1)] == [None, odd]
    restored = columns.FixedText.from_payload(32, col.payload(2), 2)
    assert not restored.fixed and [restored.get(0), restored.get(1)] == [None, odd]
    assert restored.occupied(2).tolist() == [False, True]
