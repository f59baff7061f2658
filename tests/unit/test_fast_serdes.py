"""The runtime's one-argument serdes give what the built-in serdes give, or defer to them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming import serdes
from streaming.serdes import SerializationError, fast

#: what the serdes' own methods raise for data they refuse (SinkNode reports each)
_REFUSED = (SerializationError, TypeError, AttributeError, ValueError)

_DATA = st.one_of(
    st.none(),
    st.text(),
    st.text().map(lambda s: s + "\ud800"),  # lone surrogate: UTF-8 refuses it
    st.integers(),
    st.floats(allow_nan=False),
    st.binary(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


class _Text(str):
    """A ``str`` subclass: the String serde takes it as text."""


def _outcome(call: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", call(*args)
    except _REFUSED:
        return "refused", None


@pytest.mark.parametrize("serde", [serdes.String(), serdes.Json()], ids=repr)
@given(data=_DATA)
def test_a_fast_serializer_writes_what_the_serde_writes_or_refuses_too(serde, data) -> None:
    fast_serialize = fast.serializer(serde)
    assert fast_serialize is not None
    if data is None:
        return  # every built-in serde writes None as None; callers never pass it
    assert _outcome(fast_serialize, data) == _outcome(serde.serialize, "t", data)


def test_a_str_subclass_key_is_written_as_its_text() -> None:
    fast_serialize = fast.serializer(serdes.String())
    assert fast_serialize is not None
    assert fast_serialize(_Text("é")) == serdes.String().serialize("t", _Text("é")) == "é".encode()


def test_subclasses_of_the_built_in_serdes_get_no_fast_serializer() -> None:
    class Upper(serdes.String):
        def serialize(self, topic, data):
            return None if data is None else data.upper().encode()

    assert fast.serializer(Upper()) is None
