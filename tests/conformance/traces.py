"""Hypothesis strategies for the conformance suite: family parameters and input traces.

A trace is a list of input records ``{"topic": str, "key": str|None, "value": int|None,
"ts": int}``: keys from a small alphabet (sometimes null), values small ints in [-5, 20]
(sometimes null), timestamps in [0, 200) mostly increasing with jitter, with out-of-order
and late records and the occasional jump forward.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

KEYS = ("a", "b", "c")
MIN_VALUE, MAX_VALUE = -5, 20
MAX_TS = 199
MAX_RECORDS = 30

OPS = ("count", "reduce", "aggregate")
EMITS = ("eager", "suppress", "on_window_close")

keys = st.one_of(st.sampled_from(KEYS), st.sampled_from(KEYS), st.sampled_from(KEYS), st.none())
values = st.one_of(st.integers(MIN_VALUE, MAX_VALUE), st.integers(MIN_VALUE, MAX_VALUE), st.none())
# How the next timestamp moves relative to the highest one seen so far.
steps = st.one_of(
    st.integers(0, 6),  # in order, small jitter forward (0 = same timestamp)
    st.integers(0, 6),
    st.integers(-30, -1),  # out of order / late
    st.integers(7, 45),  # a jump forward (closes windows)
)


@st.composite
def traces(
    draw: st.DrawFn,
    topics: tuple[str, ...] = ("input",),
    max_records: int = MAX_RECORDS,
) -> list[dict[str, Any]]:
    n = draw(st.integers(0, max_records))
    ts_max = draw(st.integers(0, 20))
    records = []
    topic = st.sampled_from(topics)
    for _ in range(n):
        step = draw(steps)
        ts = min(MAX_TS, max(0, ts_max + step))
        ts_max = max(ts_max, ts)
        records.append({"topic": draw(topic), "key": draw(keys), "value": draw(values), "ts": ts})
    return records


optional_grace = st.one_of(st.none(), st.integers(0, 15))


@st.composite
def _hopping(draw: st.DrawFn) -> dict[str, Any]:
    size = draw(st.integers(5, 30))
    divisors = [d for d in range(1, size) if size % d == 0]
    advance = draw(st.one_of(st.sampled_from(divisors), st.integers(1, size)))
    return {
        "op": draw(st.sampled_from(OPS)),
        "emit": draw(st.sampled_from(EMITS)),
        "size": size,
        "advance": advance,
        "grace": draw(optional_grace),
    }


PARAMS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "stateless": st.just({}),
    "agg": st.fixed_dictionaries({"op": st.sampled_from(OPS), "rekey": st.booleans()}),
    "tumbling": st.fixed_dictionaries(
        {
            "op": st.sampled_from(OPS),
            "emit": st.sampled_from(EMITS),
            "size": st.integers(5, 30),
            "grace": optional_grace,
        }
    ),
    "hopping": _hopping(),
    "sliding": st.fixed_dictionaries(
        {
            "op": st.sampled_from(OPS),
            "emit": st.sampled_from(EMITS),
            "diff": st.integers(1, 30),
            "grace": optional_grace,
        }
    ),
    "session": st.fixed_dictionaries(
        {
            "op": st.sampled_from(OPS),
            "emit": st.sampled_from(EMITS),
            "gap": st.integers(1, 30),
            "grace": optional_grace,
        }
    ),
    "suppress_time_limit": st.fixed_dictionaries(
        {
            "limit": st.integers(0, 30),
            "buffer": st.sampled_from(
                ("unbounded", "max_records", "max_records_eager", "strict_max_records")
            ),
            "n": st.integers(1, 3),
        }
    ),
    "table_groupby": st.fixed_dictionaries(
        {
            "op": st.sampled_from(OPS),
            "variant": st.sampled_from(("materialized", "filtered", "unmaterialized")),
        }
    ),
    "table_ops": st.fixed_dictionaries(
        {
            "variant": st.sampled_from(
                (
                    "filter",
                    "filter_materialized",
                    "filter_not",
                    "map_values",
                    "map_values_materialized",
                    "to_table",
                    "to_table_materialized",
                )
            ),
            "source_materialized": st.booleans(),
        }
    ),
    "process": st.fixed_dictionaries(
        {"api": st.sampled_from(("process", "process_values")), "interval": st.integers(1, 50)}
    ),
}

INPUT_TOPICS: dict[str, tuple[str, ...]] = {"stateless": ("input", "input", "input2")}


def cases(family: str) -> st.SearchStrategy[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(params, trace) pairs for one family."""
    return st.tuples(PARAMS[family], traces(INPUT_TOPICS.get(family, ("input",))))
