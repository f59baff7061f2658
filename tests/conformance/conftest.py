"""Fixtures of the differential conformance suite: one Java reference JVM per pytest session."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The suite's helper modules (reference, families, traces) live beside this file.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

# Families of later issues register themselves with families.register() on import.
import fam_foreign_key  # noqa: E402, F401
import fam_more  # noqa: E402, F401
import fam_parity  # noqa: E402, F401
import fam_stream_joins  # noqa: E402, F401
import fam_table_joins  # noqa: E402, F401
from reference import JavaReference  # noqa: E402


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).resolve().parent == Path(_HERE):
            item.add_marker(pytest.mark.conformance)


@pytest.fixture(scope="session")
def java_reference() -> Iterator[JavaReference]:
    """The Kafka Streams TopologyTestDriver harness, started once for the whole session."""
    ref = JavaReference()
    ref.start()
    try:
        yield ref
    finally:
        ref.close()
