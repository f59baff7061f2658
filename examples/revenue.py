"""Revenue per region in 5-minute windows, run through the TopologyTestDriver.

The README's first example, runnable: ``python -m examples.revenue`` (``make run``).
"""

from __future__ import annotations

from datetime import timedelta

from streaming import StreamsBuilder, TimeWindows, TopologyTestDriver, serdes


def revenue_topology():
    """orders (JSON) -> rekey by region -> 5-minute tumbling sum -> revenue-by-region."""
    builder = StreamsBuilder()
    orders = builder.stream("orders", key_serde=serdes.String(), value_serde=serdes.Json())
    revenue = (
        orders.select_key(lambda k, v: v["region"])
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(timedelta(minutes=5), timedelta(minutes=1)))
        .aggregate(lambda: 0.0, lambda k, v, agg: agg + v["amount"], materialized="revenue-store")
    )
    revenue.to_stream().to("revenue-by-region")
    return builder.build()


def main() -> None:
    topology = revenue_topology()
    print(topology.describe())
    minute = 60_000
    orders = [
        ("o1", {"region": "EU", "amount": 10.0}, 0),
        ("o2", {"region": "US", "amount": 25.5}, 1 * minute),
        ("o3", {"region": "EU", "amount": 4.5}, 3 * minute),
        ("o4", {"region": "EU", "amount": 7.0}, 5 * minute + 30_000),
        ("o5", {"region": "US", "amount": 1.0}, 4 * minute),  # out of order, still in grace
    ]
    with TopologyTestDriver(topology) as driver:
        source = driver.create_input_topic("orders", key_serde=serdes.String())
        out = driver.create_output_topic(
            "revenue-by-region", key_serde=serdes.TimeWindowedSerde(serdes.Json(), 5 * minute)
        )
        for key, value, ts in orders:
            source.pipe_input(key, value, timestamp=ts)
        for record in out.read_records_to_list():
            print(f"{record.key!s:<22} revenue={record.value:>6.2f}  ts={record.timestamp}")


if __name__ == "__main__":
    main()
