"""The CPU account the suite's summary prints per module counts the processes a test
starts, alive or reaped, and nothing outside the tree it is asked about."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.process_cpu import tree_cpu_seconds

#: burns a CPU second, then waits for its stdin to close
BURN = (
    "import sys, time\nend = time.process_time() + 1.0\n"
    "while time.process_time() < end: pass\nsys.stdin.read()\n"
)
IDLE = "import sys\nsys.stdin.read()\n"


def _start(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)


def _until_burnt(child: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while tree_cpu_seconds(root=child.pid) < 0.95:
        assert child.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)


def _own_seconds() -> float:
    times = os.times()
    return times.user + times.system


def test_a_child_counts_while_alive_and_once_reaped() -> None:
    before, own_before = tree_cpu_seconds(), _own_seconds()
    child = _start(BURN)
    _until_burnt(child)
    alive = tree_cpu_seconds() - before - (_own_seconds() - own_before)
    child.communicate(b"")
    reaped = tree_cpu_seconds() - before - (_own_seconds() - own_before)
    # (clock ticks of 10 ms, and this process's own time read apart from the tree's: a margin)
    assert alive >= 0.8
    assert reaped >= 0.8


def test_a_process_outside_the_tree_is_not_counted() -> None:
    busy, idle = _start(BURN), _start(IDLE)
    try:
        _until_burnt(busy)
        assert tree_cpu_seconds(root=idle.pid) < 0.5  # the busy sibling is not below it
    finally:
        busy.communicate(b"")
        idle.communicate(b"")
