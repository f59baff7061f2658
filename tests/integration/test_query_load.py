"""Interactive queries under load do not starve processing.

The scenario of ``bench.query_load``: an application copies a steady probe stream and
counts per key into a 5,000-key store while, in alternate phases, 200 HTTP clients scan and
look up that store. Processing must keep up under the load: every probe record of the
loaded phases comes through, and the load was real and fully answered. The latency figures
are printed; their ratio is the benchmark's to report (``python -m bench.query_load``)."""

from __future__ import annotations

from bench.query_load import CLIENTS, measure


def test_processing_keeps_up_under_query_load(kafka_cluster, tmp_path):
    result = measure(kafka_cluster, tmp_path)
    print("\n" + result.summary())
    # the probe's records all came through, before and under load
    expected = result.expected_samples
    assert len(result.baseline) >= 0.9 * expected and len(result.loaded) >= 0.9 * expected
    # the load was real: whole-store scans (a page for every client at least) and lookups,
    # all answered
    stats = result.stats
    assert stats["pages"] >= CLIENTS and stats["scans"] >= 20 and stats["lookups"] >= 100
    assert stats["errors"] == 0 and set(stats["statuses"]) == {"200"}
