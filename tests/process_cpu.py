"""CPU seconds used by this process and every process below it, read from ``/proc``.

A test's wall time on a busy machine says little about what it costs the others; its CPU
time does. Processes that ended are counted once their parent reaped them (``cutime``);
those reparented to init before they ended are lost, so the figure is a floor."""

from __future__ import annotations

import os
from collections import defaultdict

_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, utime + stime + cutime + cstime in seconds) of ``pid``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()
    ppid = int(fields[1])
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
    return ppid, ticks / _TICKS


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds of ``root`` (this process) and its live descendants, reaped children
    included."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = defaultdict(list)
    seconds: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            children[stat[0]].append(int(entry))
            seconds[int(entry)] = stat[1]
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += seconds.get(pid, 0.0)
        stack.extend(children.get(pid, ()))
    return total
