"""Conformance families for KStream-KTable (plain and versioned) and KTable-KTable joins.

Twins of tests/conformance/java/TableJoinFamilies.java: same operators, lambdas and names. Each family
registers itself with ``families.register`` (conftest.py imports this module).
"""

from __future__ import annotations
