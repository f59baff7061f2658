"""Python's cyclic garbage collector, set up once per process for stream threads.

A stream thread keeps thousands of freshly decoded records queued between a fetch and their
processing. With the interpreter's default (a young-generation pass every 700 net container
allocations), each fetch triggers passes that find those records alive, promote them, and
in time trigger full passes over everything the process holds: its modules, clients and
topology included (about 7 % of a thread's CPU on the 1M-record windowed aggregation).
So before the first stream thread starts, the collector collects once and freezes what
exists (``gc.freeze``: the startup heap is never scanned again), and, unless the
application set its own thresholds, passes over the young generation every
``YOUNG_THRESHOLD`` net allocations instead.
"""

from __future__ import annotations

import gc
import threading

#: CPython's default thresholds; any other value is the application's choice and is kept
INTERPRETER_DEFAULT = (700, 10, 10)
#: net container allocations between two passes over the young generation
YOUNG_THRESHOLD = 10_000

_lock = threading.Lock()
_done = False


def prepare_for_stream_threads() -> None:
    """Collect, freeze the heap and raise the young generation's threshold (unless the
    application set the thresholds); once per process, later calls do nothing."""
    global _done
    with _lock:
        if _done:
            return
        _done = True
        gc.collect()
        gc.freeze()
        if gc.get_threshold() == INTERPRETER_DEFAULT:
            gc.set_threshold(YOUNG_THRESHOLD, *INTERPRETER_DEFAULT[1:])
