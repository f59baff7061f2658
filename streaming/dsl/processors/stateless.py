"""Stateless KStream processors: filter, map, flat_map, peek, branch, passthrough."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming.topology.processor import Processor, Record


class FilterProcessor(Processor):
    """Forward records whose predicate is true (false for ``filter_not``)."""

    def __init__(self, predicate: Callable[[Any, Any], bool], negate: bool) -> None:
        self.predicate = predicate
        self.negate = negate

    def process(self, record: Record) -> None:
        if bool(self.predicate(record.key, record.value)) is not self.negate:
            self.context.forward(record)


class MapProcessor(Processor):
    """``map``: a new (key, value) pair per record."""

    def __init__(self, mapper: Callable[[Any, Any], tuple[Any, Any]]) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        pair = self.mapper(record.key, record.value)
        if pair is None:
            raise ValueError("map() mapper returned None; return a (key, value) tuple")
        key, value = pair
        self.context.forward(Record(key, value, record.timestamp, record.headers))


class MapValuesProcessor(Processor):
    """``map_values``: a new value, same key (the mapper may take the key too)."""

    def __init__(self, mapper: Callable[..., Any], with_key: bool) -> None:
        self.mapper = mapper
        self.with_key = with_key

    def process(self, record: Record) -> None:
        if self.with_key:
            value = self.mapper(record.key, record.value)
        else:
            value = self.mapper(record.value)
        self.context.forward(Record(record.key, value, record.timestamp, record.headers))


class SelectKeyProcessor(Processor):
    """``select_key``: a new key computed from the record, same value."""

    def __init__(self, selector: Callable[[Any, Any], Any]) -> None:
        self.selector = selector

    def process(self, record: Record) -> None:
        key = self.selector(record.key, record.value)
        self.context.forward(Record(key, record.value, record.timestamp, record.headers))


class FlatMapProcessor(Processor):
    """``flat_map``: zero or more (key, value) pairs per record."""

    def __init__(self, mapper: Callable[[Any, Any], Any]) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        forward = self.context.forward
        ts, headers = record.timestamp, record.headers
        for key, value in self.mapper(record.key, record.value):
            forward(Record(key, value, ts, headers))


class FlatMapValuesProcessor(Processor):
    """``flat_map_values``: zero or more values per record, same key."""

    def __init__(self, mapper: Callable[..., Any], with_key: bool) -> None:
        self.mapper = mapper
        self.with_key = with_key

    def process(self, record: Record) -> None:
        values = (
            self.mapper(record.key, record.value) if self.with_key else self.mapper(record.value)
        )
        forward = self.context.forward
        key, ts, headers = record.key, record.timestamp, record.headers
        for value in values:
            forward(Record(key, value, ts, headers))


class PeekProcessor(Processor):
    """``peek`` / ``foreach``: call an action; forward unchanged unless terminal."""

    def __init__(self, action: Callable[[Any, Any], None], forward: bool) -> None:
        self.action = action
        self.forward = forward

    def process(self, record: Record) -> None:
        self.action(record.key, record.value)
        if self.forward:
            self.context.forward(record)


class PrintProcessor(Processor):
    """``print``: one line ``[label]: <mapper(key, value)>`` per record, to standard output
    or appended to a file (opened for the processor's lifetime)."""

    def __init__(self, label: str, mapper: Callable[[Any, Any], str], path: str | None) -> None:
        self.label = label
        self.mapper = mapper
        self.path = path
        self.out: Any = None

    def init(self, context: Any) -> None:
        super().init(context)
        if self.path is not None:
            self.out = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())

    def process(self, record: Record) -> None:
        line = f"[{self.label}]: {self.mapper(record.key, record.value)}"
        if self.out is None:
            print(line, flush=True)
        else:
            self.out.write(line + "\n")
            self.out.flush()

    def close(self) -> None:
        if self.out is not None:
            self.out.close()
            self.out = None


class PassThrough(Processor):
    """Forward everything (used by ``merge`` and ``to_stream`` of a plain stream)."""

    def process(self, record: Record) -> None:
        self.context.forward(record)


class BranchProcessor(Processor):
    """``split()``: send each record to the first branch whose predicate matches."""

    def __init__(self, predicates: list[Callable[[Any, Any], bool]], children: list[str]) -> None:
        self.predicates = predicates
        self.children = children

    def process(self, record: Record) -> None:
        for predicate, child in zip(self.predicates, self.children, strict=False):
            if predicate(record.key, record.value):
                self.context.forward(record, child)
                return
        if len(self.children) > len(self.predicates):  # the default branch
            self.context.forward(record, self.children[-1])


def supplier(factory: Callable[[], Processor], stores: list[Any] | None = None) -> Any:
    """Wrap a factory as a processor supplier, optionally carrying store builders."""

    class _Supplier:
        def __call__(self) -> Processor:
            return factory()

        def stores(self) -> list[Any]:
            return list(stores or [])

    return _Supplier()
