"""The chaos verifier itself: on hand-made records (no broker) it must flag duplicates,
losses, wrong aggregates, counts that repeat or go back, offsets that go back, and time
the output gaps; and a clean run must pass. A verifier that cannot fail proves nothing."""

from __future__ import annotations

import time

import pytest
from chaos_harness import (
    CheckpointWatcher,
    Fault,
    Figures,
    Rec,
    check_aggregate,
    input_truth,
    offset_regressions,
    output_timing,
    pick_keys,
    verify_simple,
)
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME

from streaming.runtime.partitioner import default_partition

TOPICS = {"input": "in", "copy": "copy", "counts": "counts", "sums": "sums"}
KEYS = ["k0", "k1", "k2"]


def _input(n: int) -> list[Rec]:
    return [
        Rec("in", 0, i, KEYS[i % 3], str(i).encode(), 1_000 + i, TIMESTAMP_CREATE_TIME)
        for i in range(n)
    ]


def _long(v: int) -> bytes:
    return v.to_bytes(8, "big", signed=True)


def _outputs(inp: list[Rec], *, t0: float = 100.0, step: float = 0.1) -> list[Rec]:
    """What a correct application writes: the copy, and per key the running count/sum."""
    out: list[Rec] = []
    count: dict[str, int] = {}
    total: dict[str, int] = {}
    for n, r in enumerate(inp):
        ts = int((t0 + n * step) * 1000)
        key = r.key or ""
        count[key] = count.get(key, 0) + 1
        total[key] = total.get(key, 0) + int(r.value or b"0")
        out.append(Rec("copy", 0, n, key, r.value, ts, TIMESTAMP_LOG_APPEND_TIME))
        out.append(Rec("counts", 0, n, key, _long(count[key]), ts, TIMESTAMP_LOG_APPEND_TIME))
        out.append(Rec("sums", 0, n, key, _long(total[key]), ts, TIMESTAMP_LOG_APPEND_TIME))
    return out


def _verify(inp: list[Rec], out: list[Rec]) -> Figures:
    fig = Figures("verifier", "unit")
    truth = input_truth(inp, fig)
    verify_simple(fig, truth, out, TOPICS)
    return fig


def test_a_correct_run_passes():
    inp = _input(30)
    fig = _verify(inp, _outputs(inp))
    assert (fig.records_in, fig.duplicates, fig.missing, fig.unexpected) == (30, 0, 0, 0)
    assert fig.violations == [] and not fig.failed
    assert fig.aggregates["count per key"] == "3/3 keys exact"


def test_duplicates_losses_and_strangers_are_counted():
    inp = _input(30)
    out = _outputs(inp)
    copy = [r for r in out if r.topic == "copy"]
    out += [copy[4], copy[4], copy[7]]  # 5 and 8 once too many (twice, once)
    out = [r for r in out if not (r.topic == "copy" and r.value in (b"10", b"11"))]
    out.append(Rec("copy", 0, 99, "k0", b"999", 0, TIMESTAMP_LOG_APPEND_TIME))
    fig = _verify(inp, out)
    assert (fig.duplicates, fig.missing, fig.unexpected) == (3, 2, 1)
    assert any("more than once" in v for v in fig.violations)
    assert any("missing" in v and "[10, 11]" in v for v in fig.violations)
    assert fig.failed


def test_wrong_and_repeated_aggregates_are_flagged():
    inp = _input(30)
    out = _outputs(inp)
    # a lost update: k1's last count is one short; a reprocessed record: k2's count repeats
    last_k1 = max((r for r in out if r.topic == "counts" and r.key == "k1"), key=lambda r: r.offset)
    out[out.index(last_k1)] = Rec(
        "counts", 0, last_k1.offset, "k1", _long(9), last_k1.ts, last_k1.ts_type
    )
    out.append(Rec("counts", 0, 1_000, "k2", _long(10), 0, TIMESTAMP_LOG_APPEND_TIME))
    fig = _verify(inp, out)
    wrong = next(v for v in fig.violations if v.startswith("count per key") and "wrong" in v)
    assert "'k1': (9, 10)" in wrong
    assert any("repeat or go back" in v and "k" in v for v in fig.violations)
    assert fig.aggregates["count per key"] == "2/3 keys exact"


def test_every_value_mode_finds_counts_never_emitted():
    out = [
        Rec("s", 0, i, "k0", _long(v), 0, TIMESTAMP_LOG_APPEND_TIME)
        for i, v in enumerate([1, 2, 4, 5, 1, 2])  # 3 lost, then a reset to 1 (lost state)
    ]
    fig = Figures("verifier", "unit")
    check_aggregate(fig, "sink", out, "s", {"k0": 5}, every_value=True)
    assert fig.duplicates == 2  # 1 and 2 emitted twice
    assert fig.missing == 1  # 3 never
    assert any("never emitted" in v and "[3]" in v for v in fig.violations)
    assert any("go back" in v and "5, 1, 2]" in v for v in fig.violations)


def test_output_gap_and_recovery_time():
    inp = _input(10)
    out = _outputs(inp, t0=100.0, step=0.5)  # outputs at 100.0 .. 104.5
    late = Rec("copy", 0, 50, "k0", b"x", int(112.25 * 1000), TIMESTAMP_LOG_APPEND_TIME)
    fig = Figures("verifier", "unit")
    back = Fault("outage", (1,), began=105.0, ready=110.0)
    never = Fault("later outage", (1,), began=113.0, ready=120.0)
    output_timing(fig, [*out, late], "copy", [back, never], input_end=115.0)
    assert fig.longest_gap_s == pytest.approx(112.25 - 104.5)
    assert fig.recoveries == [("outage", pytest.approx(2.25)), ("later outage", None)]
    # an output that stops while the input goes on: the gap runs to the input's end
    fig = Figures("verifier", "unit")
    output_timing(fig, out, "copy", [], input_end=130.0)
    assert fig.longest_gap_s == pytest.approx(130.0 - 104.5)


def test_checkpoint_and_restore_offsets_must_not_go_back(tmp_path):
    root = tmp_path / "p1"
    task = root / "app" / "0_1"
    task.mkdir(parents=True)
    watcher = CheckpointWatcher({"p1": root})

    def checkpoint(offset: int) -> None:
        (task / ".checkpoint").write_text(f"0\n1\napp-store-changelog 1 {offset}\n")
        watcher.poll()
        time.sleep(0.01)

    checkpoint(10)
    checkpoint(25)
    assert offset_regressions(watcher, []) == []
    checkpoint(7)
    regressions = offset_regressions(watcher, [])
    assert len(regressions) == 1 and "checkpoint 25" in regressions[0]
    assert "checkpoint 7" in regressions[0]
    # a corrupt or foreign checkpoint file is not an observation
    (task / ".checkpoint").write_text("1\n1\nx 1 3\n")
    watcher.poll()
    assert [s[-1] for s in watcher.seen] == [10, 25, 7]


def test_pick_keys_covers_every_partition():
    keys = pick_keys(6, per_partition=2)
    partitions = [default_partition(k.encode(), 6) for k in keys]
    assert sorted(set(partitions)) == list(range(6))
    assert all(partitions.count(p) == 2 for p in range(6))


def test_an_input_record_written_twice_is_expected_twice():
    inp = _input(12)
    inp.append(Rec("in", 0, 12, inp[5].key, inp[5].value, inp[5].ts, TIMESTAMP_CREATE_TIME))
    fig = _verify(inp, _outputs(inp))
    assert fig.records_in == 13 and not fig.failed, fig.render()
    assert any("holds 1 values twice" in n and "[5]" in n for n in fig.notes)
    # the same outputs without the second copy: one record missing, counts one short
    fig = _verify(inp, _outputs(inp[:12]))
    assert fig.missing == 1 and fig.failed
