"""Conformance families for KStream-KStream joins.

Twins of tests/conformance/java/StreamJoinFamilies.java: same operators, lambdas and names. Each family
registers itself with ``families.register`` (conftest.py imports this module).
"""

from __future__ import annotations
