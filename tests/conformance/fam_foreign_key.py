"""Conformance families for KTable-KTable foreign-key joins.

Twins of tests/conformance/java/ForeignKeyFamilies.java: same operators, lambdas and names. Each family
registers itself with ``families.register`` (conftest.py imports this module).
"""

from __future__ import annotations
