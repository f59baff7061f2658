"""Opening a RocksDB store waits while another handle of this process still holds it."""

from __future__ import annotations

import threading
import time

from streaming.state.rocksdb_util import close_db, open_db


def test_open_waits_for_the_previous_handle_to_close(tmp_path):
    first = open_db(tmp_path / "db")
    first[b"k"] = b"v"
    releaser = threading.Timer(0.3, close_db, args=(first,))
    t0 = time.monotonic()
    releaser.start()
    second = open_db(tmp_path / "db")  # blocked by first's lock until the timer closes it
    try:
        assert time.monotonic() - t0 >= 0.25
        assert second[b"k"] == b"v"
    finally:
        releaser.join()
        close_db(second)
