"""The garbage collector is set up once per process before the first stream thread."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(snippet: str) -> str:
    """Run ``snippet`` in a fresh interpreter (the collector's settings are per process)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(snippet)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return done.stdout.strip()


def test_the_first_stream_thread_freezes_the_heap_and_raises_the_young_threshold() -> None:
    out = _run(
        """
        import gc
        from streaming.runtime.collector_tuning import prepare_for_stream_threads
        assert gc.get_freeze_count() == 0
        prepare_for_stream_threads()
        frozen = gc.get_freeze_count()
        gc.set_threshold(5000, 10, 10)  # the application changes its mind afterwards
        prepare_for_stream_threads()  # a second thread: nothing happens again
        print(frozen > 0, frozen == gc.get_freeze_count(), gc.get_threshold())
        """
    )
    assert out == "True True (5000, 10, 10)", out


def test_the_applications_own_thresholds_are_kept() -> None:
    out = _run(
        """
        import gc
        from streaming.runtime.collector_tuning import prepare_for_stream_threads
        gc.set_threshold(1234, 5, 6)
        prepare_for_stream_threads()
        print(gc.get_threshold())
        """
    )
    assert out == "(1234, 5, 6)"


def test_the_interpreters_default_thresholds_become_the_streaming_ones() -> None:
    out = _run(
        """
        import gc
        from streaming.runtime.collector_tuning import (
            INTERPRETER_DEFAULT, YOUNG_THRESHOLD, prepare_for_stream_threads,
        )
        assert gc.get_threshold() == INTERPRETER_DEFAULT, gc.get_threshold()
        prepare_for_stream_threads()
        print(gc.get_threshold() == (YOUNG_THRESHOLD, *INTERPRETER_DEFAULT[1:]))
        """
    )
    assert out == "True"
