"""A JVM class-data-sharing (AppCDS) archive for the local Kafka broker's jars.

A broker start spends most of its CPU loading and verifying ~4,000 classes; a dynamic CDS
archive of them (JDK 13+) cuts that by about 40 %. The first broker started without an
archive records one at exit (``-XX:ArchiveClassesAtExit``) next to the jars; later JVMs map
it (``-XX:SharedArchiveFile``). The archive name hashes the java binary and the jar set,
so a new JDK or ``make setup`` simply records a new one. Creation is guarded by a lock
file, so concurrent test processes never write the same archive.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path

_STALE_LOCK_SECONDS = 600.0


class CdsArchive:
    """The CDS archive of one java binary + jar directory, and its one-time recording."""

    def __init__(self, java: str, jars_dir: Path) -> None:
        digest = hashlib.sha1(os.path.realpath(java).encode())
        for jar in sorted(jars_dir.glob("*.jar")):
            stat = jar.stat()
            digest.update(f"{jar.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
        self.path = jars_dir / f"kafka-cds-{digest.hexdigest()[:12]}.jsa"
        self._lock = self.path.with_suffix(".lock")
        self._recording: Path | None = None

    def options(self) -> list[str]:
        """JVM options to use the archive if it exists (empty otherwise)."""
        return [f"-XX:SharedArchiveFile={self.path}"] if self.path.exists() else []

    def recording_options(self) -> list[str]:
        """JVM options for one JVM to record the archive at exit, if nobody else is."""
        if self.path.exists() or self._recording is not None or not self._take_lock():
            return self.options()
        self._recording = self.path.with_suffix(f".{os.getpid()}.tmp")
        return [f"-XX:ArchiveClassesAtExit={self._recording}"]

    def finish(self) -> None:
        """After the recording JVM exited: publish its archive and release the lock."""
        if self._recording is None:
            return
        try:
            if self._recording.exists() and self._recording.stat().st_size > 0:
                for old in self.path.parent.glob("kafka-cds-*.jsa"):
                    with contextlib.suppress(OSError):
                        old.unlink()
                os.replace(self._recording, self.path)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                self._recording.unlink()
            with contextlib.suppress(OSError):
                self._lock.unlink()
            self._recording = None

    def _take_lock(self) -> bool:
        with contextlib.suppress(OSError):
            if time.time() - self._lock.stat().st_mtime > _STALE_LOCK_SECONDS:
                self._lock.unlink()
        try:
            fd = os.open(self._lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except OSError:  # held by another process, or the jar dir is read-only
            return False
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return True
