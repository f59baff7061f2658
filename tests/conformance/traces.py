"""Hypothesis strategies for the conformance suite: family parameters and input traces.

A trace is a list of input records ``{"topic": str, "key": str|None, "value": int|None,
"ts": int}``: keys from a small alphabet (sometimes null), values small ints in [-5, 20]
(sometimes null), timestamps in [0, 200) mostly increasing with jitter, with out-of-order
and late records and the occasional jump forward. For the time-dependent families a quarter
of the cases run in seconds instead (timestamps and duration params times 1000, "scale" in
the params), to cross RocksDB segment boundaries.
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

# a quarter of the keys null, the rest spread evenly over KEYS: one draw per key (a one_of
# of sampled_froms would cost three times the CPU, hypothesis' draws are most of a trace's)
keys = st.sampled_from((*KEYS, None))
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
stores = st.sampled_from(("rocksdb", "in_memory"))
# Window/session store retention beyond the minimum Kafka accepts (None: Kafka's default).
retention_extras = st.one_of(st.none(), st.integers(0, 60))


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
        "store": draw(stores),
        "retention_extra": draw(retention_extras),
    }


PARAMS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "stateless": st.just({}),
    "agg": st.fixed_dictionaries(
        {"op": st.sampled_from(OPS), "rekey": st.booleans(), "store": stores}
    ),
    "tumbling": st.fixed_dictionaries(
        {
            "op": st.sampled_from(OPS),
            "emit": st.sampled_from(EMITS),
            "size": st.integers(5, 30),
            "grace": optional_grace,
            "store": stores,
            "retention_extra": retention_extras,
        }
    ),
    "hopping": _hopping(),
    "sliding": st.fixed_dictionaries(
        {
            "op": st.sampled_from(OPS),
            "emit": st.sampled_from(EMITS),
            "diff": st.integers(1, 30),
            "grace": optional_grace,
            "store": stores,
            "retention_extra": retention_extras,
        }
    ),
    "session": st.fixed_dictionaries(
        {
            "op": st.sampled_from(OPS),
            "emit": st.sampled_from(EMITS),
            "gap": st.integers(1, 30),
            "grace": optional_grace,
            "store": stores,
            "retention_extra": retention_extras,
        }
    ),
    "suppress_time_limit": st.fixed_dictionaries(
        {
            "limit": st.integers(0, 30),
            "buffer": st.sampled_from(
                ("unbounded", "max_records", "max_records_eager", "strict_max_records")
            ),
            "n": st.integers(1, 3),
            "store": stores,
        }
    ),
    "table_groupby": st.fixed_dictionaries(
        {
            "op": st.sampled_from(OPS),
            "variant": st.sampled_from(("materialized", "filtered", "unmaterialized")),
            "store": stores,
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
            "store": stores,
        }
    ),
    "process": st.fixed_dictionaries(
        {
            "api": st.sampled_from(("process", "process_values")),
            "interval": st.integers(1, 50),
            "store": stores,
        }
    ),
}

INPUT_TOPICS: dict[str, tuple[str, ...]] = {"stateless": ("input", "input", "input2")}


# Params that are durations in ms: scaled with the timestamps (see `cases`).
DURATION_PARAMS = set(
    {"size", "grace", "advance", "diff", "gap", "limit", "interval", "retention_extra"}
)
# Families whose state depends on time: also run in seconds instead of milliseconds, so that
# timestamps span several RocksDB segments (a segment is max(retention / 2, 60 s) long) and
# segment expiry is exercised.
SCALED_FAMILIES = {"tumbling", "hopping", "sliding", "session", "suppress_time_limit", "process"}


@st.composite
def cases(draw: st.DrawFn, family: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(params, trace) pairs for one family."""
    params = dict(draw(PARAMS[family]))
    trace = draw(traces(INPUT_TOPICS.get(family, ("input",))))
    if family in SCALED_FAMILIES and draw(st.integers(0, 3)) == 0:
        scale = 1000
        for name in DURATION_PARAMS & params.keys():
            if params[name] is not None:
                params[name] *= scale
        trace = [{**r, "ts": r["ts"] * scale} for r in trace]
        params["scale"] = scale  # informative only: the families ignore it
    return params, trace
