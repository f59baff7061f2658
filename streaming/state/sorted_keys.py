"""A sorted set of byte keys for the write buffers of segmented stores.

``SortedKeys`` keeps its keys in sorted chunks (like sortedcontainers' SortedList, without the
positional index): adding or removing a key is two C bisections and a list insert or delete
in a chunk of at most ``2 * LOAD`` keys, and ``range`` returns the keys of a closed range as a
list slice. It knows only the operations the buffers need.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator
from itertools import chain

#: a chunk splits in two once it holds more than twice this many keys
LOAD = 512


class SortedKeys:
    """Distinct ``bytes`` keys in sorted order."""

    __slots__ = ("_len", "_lists", "_maxes")

    def __init__(self) -> None:
        #: the chunks, each sorted and non-empty, every key of one below every key of the next
        self._lists: list[list[bytes]] = []
        #: the last (largest) key of each chunk
        self._maxes: list[bytes] = []
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[bytes]:
        return chain.from_iterable(self._lists)

    def add(self, key: bytes) -> None:
        """Add ``key``, which must not be present."""
        maxes = self._maxes
        lists = self._lists
        self._len += 1
        if not maxes:
            lists.append([key])
            maxes.append(key)
            return
        pos = bisect_left(maxes, key)
        if pos == len(maxes):
            pos -= 1
            sub = lists[pos]
            sub.append(key)
            maxes[pos] = key
        else:
            sub = lists[pos]
            insort(sub, key)
        if len(sub) > 2 * LOAD:
            lists.insert(pos + 1, sub[LOAD:])
            del sub[LOAD:]
            maxes.insert(pos, sub[-1])

    def remove(self, key: bytes) -> None:
        """Remove ``key``, which must be present."""
        maxes = self._maxes
        pos = bisect_left(maxes, key)
        sub = self._lists[pos]
        idx = bisect_left(sub, key)
        del sub[idx]
        self._len -= 1
        if not sub:
            del self._lists[pos]
            del maxes[pos]
        elif idx == len(sub):
            maxes[pos] = sub[-1]

    def range(self, lower: bytes | None, upper: bytes | None) -> list[bytes]:
        """The keys with ``lower <= key <= upper`` (None: unbounded), ascending."""
        maxes = self._maxes
        if not maxes:
            return []
        if lower is None:
            pos = i = 0
        else:
            pos = bisect_left(maxes, lower)
            if pos == len(maxes):
                return []
            i = bisect_left(self._lists[pos], lower)
        lists = self._lists
        sub = lists[pos]
        if upper is None:
            out = sub[i:]
            for later in lists[pos + 1 :]:
                out += later
            return out
        if upper <= maxes[pos]:
            return sub[i : bisect_right(sub, upper)]
        out = sub[i:]
        pos += 1
        n = len(maxes)
        while pos < n and maxes[pos] <= upper:
            out += lists[pos]
            pos += 1
        if pos < n:
            sub = lists[pos]
            out += sub[: bisect_right(sub, upper)]
        return out

    def clear(self) -> None:
        self._lists.clear()
        self._maxes.clear()
        self._len = 0
