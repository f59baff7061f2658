"""Conformance families for GlobalKTable joins, cogroup and repartition topologies.

Twins of tests/conformance/java/MoreFamilies.java: same operators, lambdas and names. Each family
registers itself with ``families.register`` (conftest.py imports this module).
"""

from __future__ import annotations
