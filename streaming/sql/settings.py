"""``SET 'key' = 'value'``: Flink's configuration statements, for the statements after
them.

``'table.exec.state.ttl'`` (a Flink duration: ``'1 h'``, ``'30 min'``, ``'86400000'``
ms; ``'0'`` keeps state for good) bounds the state of the regular joins compiled after
it (``regular_join``). The SQL client's own options (``'sql-client.*'``) and
``'execution.runtime-mode' = 'streaming'`` change nothing here and are accepted; any
other key is an error naming it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from streaming.sql.errors import error_at, node_offset
from streaming.sql.rewrite import duration_ms

STATE_TTL = "table.exec.state.ttl"


def _text(node: exp.Expr) -> str:
    """A SET item's key or value as written (quoted or not)."""
    if isinstance(node, exp.Literal):
        return str(node.this)
    return node.sql().replace('"', "")


@dataclass
class Settings:
    """The options SET so far."""

    #: ``'table.exec.state.ttl'`` in ms (None: no TTL)
    state_ttl_ms: int | None = None

    def apply(self, tree: exp.Set, source: str, at: int) -> None:
        """Take the options of one SET statement."""
        for item in tree.expressions:
            assignment = item.this if isinstance(item, exp.SetItem) else item
            if not isinstance(assignment, exp.EQ):
                raise error_at(source, at, "SET needs 'key' = 'value'")
            key, value = _text(assignment.this), _text(assignment.expression)
            where = node_offset(assignment.this, at)
            if key == STATE_TTL:
                try:
                    ttl = duration_ms(value)
                except ValueError as e:
                    raise error_at(
                        source,
                        node_offset(assignment.expression, at),
                        f"SET '{STATE_TTL}' = '{value}': {e}",
                    ) from None
                self.state_ttl_ms = ttl or None
            elif key.startswith("sql-client.") or (
                key == "execution.runtime-mode" and value.lower() == "streaming"
            ):
                continue
            else:
                raise error_at(
                    source,
                    where,
                    f"SET '{key}' is not supported (the option read here is '{STATE_TTL}')",
                )
