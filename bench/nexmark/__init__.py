"""Nexmark, the streaming benchmark of persons, auctions and bids, for this engine.

- ``model``: the three topics and their JSON schema (Flink's Nexmark field names), shared
  with SQL versions of the queries;
- ``generator``: seeded, deterministic events after Flink's Nexmark generator;
- ``queries``: q0-q8 and q11 written with the DSL;
- ``reference``: the same queries as DuckDB batch SQL, and the comparison of outputs;
- ``run`` / ``runner`` / ``__main__``: ``python -m bench.nexmark`` on a local broker.
"""
