"""A standby replica of a source-topic table reads up to the group's committed offsets (its
limits): a standby task that closes takes its partitions' limits with it."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from streaming.runtime.standby import StandbyManager


def _manager():
    manager = object.__new__(StandbyManager)
    manager.lock = threading.RLock()
    closed = []
    manager.tasks = {
        tid: SimpleNamespace(
            source_partitions={("prices", p)}, close=lambda t=tid: closed.append(t)
        )
        for tid, p in (("0_0", 0), ("0_1", 1))
    }
    manager.limits = {("prices", 0): 120, ("prices", 1): 80}
    manager.held = {("prices", 1): 80}
    manager._reassign_needed = False
    return manager, closed


def test_a_standby_task_that_becomes_active_forgets_its_limits():
    manager, closed = _manager()
    with manager.activating("0_1"):
        pass
    assert closed == ["0_1"]
    assert manager.limits == {("prices", 0): 120}
    assert manager.held == {}
    assert manager._reassign_needed


def test_activating_a_task_that_was_no_standby_here_changes_nothing():
    manager, closed = _manager()
    with manager.activating("1_0"):
        pass
    assert closed == [] and len(manager.limits) == 2 and not manager._reassign_needed
