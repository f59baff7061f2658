"""Flink's computed and METADATA columns of ``CREATE TABLE``, as declared (no runtime).

- ``name AS expression`` (a computed column): evaluated per row after the value is read,
  over the table's physical and METADATA columns (as Flink resolves it: not over another
  computed column); not part of the topic's values, so a sink never writes it.
- ``name type METADATA [FROM 'key'] [VIRTUAL]``: a field of the Kafka record rather than of
  its value (the column name is the key without FROM). The kafka connector's keys here:
  ``timestamp`` (TIMESTAMP_LTZ(3), the record's timestamp; written to a sink unless
  VIRTUAL), and the read-only ``partition``, ``offset`` and ``topic`` (Flink requires them
  VIRTUAL). ``headers`` (a MAP) is refused by name.

sqlglot does not parse the METADATA clause: ``take_metadata`` blanks it out of a CREATE
TABLE's text before sqlglot parses it (as ``rewrite`` does for WATERMARK), keeping the
column and its type, and returns what it said. The runtime lives in ``source_columns``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from streaming.sql.errors import error_at, node_offset


@dataclass(frozen=True)
class MetadataColumn:
    """``name type METADATA [FROM 'key'] [VIRTUAL]`` in a CREATE TABLE's column list."""

    name: str
    key: str
    virtual: bool
    #: where its METADATA keyword is, for errors
    offset: int


#: the readable metadata of the kafka connector: key -> the value kind it has
READABLE = {"timestamp": "TIMESTAMP", "partition": "BIGINT", "offset": "BIGINT", "topic": "STRING"}
#: the kafka connector's other metadata keys, refused by name with the reason
NOT_YET = {
    "headers": "the record's headers are a MAP, which the SQL layer has no type for",
    "timestamp-type": "the engine does not keep a record's timestamp type",
    "leader-epoch": "the engine does not keep a record's leader epoch",
}
#: the metadata a sink writes (the record's timestamp); the others are read-only
WRITABLE = ("timestamp",)
#: Flink's type of each key, for errors
FLINK_TYPES = {
    "timestamp": "TIMESTAMP_LTZ(3)",
    "partition": "INT",
    "offset": "BIGINT",
    "topic": "STRING",
}


def take_metadata(text: str, tokens: list[Token], chars: list[str]) -> tuple[MetadataColumn, ...]:
    """Blank each ``METADATA [FROM 'key'] [VIRTUAL]`` of a CREATE TABLE's column list out
    of ``chars`` (the statement's text), returning the columns they declared."""
    if len(tokens) < 3 or tokens[0].token_type != TokenType.CREATE:
        return ()
    opening = next((i for i, t in enumerate(tokens) if t.token_type == TokenType.L_PAREN), None)
    if opening is None or not any(t.token_type == TokenType.TABLE for t in tokens[:opening]):
        return ()
    if any(t.token_type in (TokenType.ALIAS, TokenType.SELECT) for t in tokens[:opening]):
        return ()  # CREATE TABLE ... AS SELECT without a column list
    found = []
    for element in _elements(tokens, opening):
        at = next(
            (
                k
                for k, t in enumerate(element)
                if k >= 2 and t.token_type == TokenType.VAR and t.text.upper() == "METADATA"
            ),
            None,
        )
        if at is None:
            continue
        keyword, rest = element[at], element[at + 1 :]
        key = element[0].text
        if len(rest) >= 2 and rest[0].token_type == TokenType.FROM:
            if rest[1].token_type != TokenType.STRING:
                raise error_at(text, rest[1].start, "METADATA FROM takes a key in quotes: 'key'")
            key, rest = rest[1].text, rest[2:]
        virtual = bool(rest) and rest[0].text.upper() == "VIRTUAL"
        rest = rest[1:] if virtual else rest
        if rest:
            raise error_at(
                text,
                rest[0].start,
                f"unexpected {rest[0].text} after METADATA: the clause is "
                "name type METADATA [FROM 'key'] [VIRTUAL]",
            )
        end = (rest or element)[-1].end
        for i in range(keyword.start, end + 1):
            if chars[i] != "\n":
                chars[i] = " "
        found.append(MetadataColumn(element[0].text, key, virtual, keyword.start))
    return tuple(found)


def _elements(tokens: list[Token], opening: int) -> list[list[Token]]:
    """The top-level comma-separated elements of the list opened at ``tokens[opening]``."""
    elements: list[list[Token]] = [[]]
    depth = 0
    for token in tokens[opening + 1 :]:
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            if depth == 0:
                break
            depth -= 1
        elif token.token_type == TokenType.COMMA and depth == 0:
            elements.append([])
            continue
        elements[-1].append(token)
    return [e for e in elements if e]


def computed_expression(column: exp.ColumnDef) -> exp.Expr | None:
    """The expression of a computed column ``name AS expression`` (None: a declared one)."""
    for constraint in column.constraints:
        if isinstance(constraint.kind, exp.ComputedColumnConstraint):
            return constraint.kind.this
    return None


def check_metadata(column: MetadataColumn, kind: str, source: str) -> None:
    """A METADATA column's key is one the kafka connector reads, of a compatible type, and
    VIRTUAL if the connector cannot write it."""
    key = column.key
    if key in NOT_YET:
        raise error_at(
            source,
            column.offset,
            f"METADATA FROM {key!r} ({column.name}) is not supported yet: {NOT_YET[key]}",
        )
    if key not in READABLE:
        raise error_at(
            source,
            column.offset,
            f"invalid metadata key {key!r} in column {column.name!r}: the kafka connector "
            f"supports the following metadata keys for reading: {', '.join(READABLE)}",
        )
    if kind != READABLE[key] and not (kind in ("BIGINT", "DOUBLE") and READABLE[key] == "BIGINT"):
        raise error_at(
            source,
            column.offset,
            f"METADATA FROM {key!r} is {FLINK_TYPES[key]}: column {column.name} is {kind}",
        )
    if key not in WRITABLE and not column.virtual:
        raise error_at(
            source,
            column.offset,
            f"METADATA FROM {key!r} ({column.name}) is read-only: declare it VIRTUAL "
            f"({column.name} {FLINK_TYPES[key]} METADATA FROM {key!r} VIRTUAL), as Flink "
            "requires, so that a sink does not try to write it",
        )


def check_placement(
    schema: exp.Schema,
    computed: dict[str, exp.Expr],
    metadata: dict[str, MetadataColumn],
    primary_key: tuple[str, ...],
    key_fields: tuple[str, ...],
    connector: str,
    source: str,
) -> None:
    """Computed and METADATA columns are not in the values: no key column is one (Flink
    declares a PRIMARY KEY on physical columns), and they are read on an append stream
    over a Kafka topic (connector ``kafka`` without a PRIMARY KEY)."""
    for name in (*computed, *metadata):
        what = "computed" if name in computed else "METADATA"
        offset = metadata[name].offset if name in metadata else node_offset(schema)
        for column in schema.expressions:
            if name in computed and isinstance(column, exp.ColumnDef) and column.name == name:
                offset = node_offset(column)
        if name in primary_key or name in key_fields:
            raise error_at(
                source,
                offset,
                f"{name} is a {what} column: a key (PRIMARY KEY, 'key.fields') is made of "
                "physical columns",
            )
        if primary_key or connector != "kafka":
            table = "an upsert table" if primary_key or connector == "upsert-kafka" else ""
            raise error_at(
                source,
                offset,
                f"{what} column {name} on {table or repr(connector) + ' table'} is not supported "
                "yet: declare it on an append stream (no PRIMARY KEY, 'connector' = 'kafka')",
            )
