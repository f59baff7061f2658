"""The broker's class-data-sharing archive: recorded once under a lock, then shared."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from streaming.testing.jvm_cds import CdsArchive


@pytest.fixture
def jars(tmp_path):
    (tmp_path / "kafka_2.13-4.1.1.jar").write_bytes(b"jar")
    return tmp_path


def java() -> str:
    return shutil.which("java") or "/usr/bin/java"


def test_one_recorder_then_everyone_maps_the_archive(jars):
    first, second = CdsArchive(java(), jars), CdsArchive(java(), jars)
    assert first.options() == []
    recording = first.recording_options()
    assert len(recording) == 1 and recording[0].startswith("-XX:ArchiveClassesAtExit=")
    assert second.recording_options() == []  # the lock is taken: no second recorder

    # The recording JVM exited and left its archive: it is published, the lock released.
    (jars / recording[0].split("=", 1)[1]).write_bytes(b"archive")
    first.finish()
    assert first.path.read_bytes() == b"archive"
    assert not list(jars.glob("*.lock")) and not list(jars.glob("*.tmp"))
    assert second.options() == [f"-XX:SharedArchiveFile={first.path}"]
    assert second.recording_options() == second.options()


def test_a_recorder_that_left_nothing_publishes_nothing(jars):
    archive = CdsArchive(java(), jars)
    assert archive.recording_options()
    archive.finish()  # e.g. the JVM was SIGKILLed before it could dump
    assert not archive.path.exists()
    assert not list(jars.glob("*.lock"))
    assert archive.recording_options()  # someone may try again


def test_a_stale_lock_is_taken_over(jars):
    archive = CdsArchive(java(), jars)
    lock = archive.path.with_suffix(".lock")
    lock.write_text("12345")
    assert archive.recording_options() == []
    old = time.time() - 3600
    os.utime(lock, (old, old))
    assert archive.recording_options()


def test_new_jars_mean_a_new_archive(jars):
    before = CdsArchive(java(), jars).path
    (jars / "kafka-clients-4.1.1.jar").write_bytes(b"other")
    assert CdsArchive(java(), jars).path != before
