"""Joins: which module builds a join depends on what is joined with what.

``KStream.join/left_join/outer_join`` and ``KTable.join/left_join/outer_join`` go through
``InternalBuilder.stream_join`` / ``table_join`` (streaming.dsl.builder), which pick the module
by the type of the other side; each join kind lives in its own module:

- ``stream_stream``: KStream-KStream, windowed (``JoinWindows``), with the outer-join store;
- ``stream_table``: KStream-KTable, plain or versioned;
- ``global_table``: KStream-GlobalKTable, with a key selector;
- ``table_table``: KTable-KTable on the primary key;
- ``foreign_key``: KTable-KTable on a foreign key extracted from the left value.

``kinds`` holds what they share: the join kinds and the joiner adapter.
"""
