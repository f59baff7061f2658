"""A lake cut: the part files of a topic that one reader saw, so that whatever lands later
can be told apart from what a batch result was computed from.

Files are immutable and the manifest advances only after its files are written, so the
manifest's generation and next offsets, read once, name exactly the files present then: a
file of an earlier generation, or of this one ending below its partition's next offset.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.lake.manifest import Manifest
from pipelines.lake.paths import parse_part_file


@dataclass(frozen=True)
class LakeCut:
    """The files of one topic landed when the cut was taken (``LakeCut.now``)."""

    generation: int = 0
    next_offsets: Mapping[int, int] = field(default_factory=dict)

    @classmethod
    def now(cls, lake: Path, topic: str) -> LakeCut:
        """What ``topic``'s manifest says has landed at this moment."""
        manifest = Manifest.load(lake, topic)
        return cls(manifest.generation, dict(manifest.next_offsets))

    def holds(self, path: Path | str) -> bool:
        """Whether the part file ``path`` had landed when the cut was taken (files that are
        not part files, such as the empty layout file, hold no rows and always count)."""
        parsed = parse_part_file(Path(path).name)
        if parsed is None:
            return True
        partition, _, last, generation = parsed
        if generation != self.generation:
            return generation < self.generation
        return last < self.next_offsets.get(partition, 0)

    def select(self, paths: Iterable[Path]) -> list[Path]:
        """The files of ``paths`` within the cut."""
        return [p for p in paths if self.holds(p)]

    def to_json(self) -> dict[str, object]:
        return {
            "generation": self.generation,
            "next_offsets": {str(p): o for p, o in sorted(self.next_offsets.items())},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> LakeCut:
        offsets = data.get("next_offsets") or {}
        assert isinstance(offsets, Mapping)
        return cls(
            int(str(data.get("generation", 0))), {int(p): int(o) for p, o in offsets.items()}
        )


def encode_cuts(cuts: Mapping[str, LakeCut]) -> bytes:
    """``topic -> cut`` as stored beside a batch result."""
    return json.dumps({t: c.to_json() for t, c in sorted(cuts.items())}).encode()


def decode_cuts(raw: bytes) -> dict[str, LakeCut]:
    """The inverse of ``encode_cuts``."""
    return {t: LakeCut.from_json(c) for t, c in json.loads(raw).items()}
