"""Lesson 09b's exercise checks accept the right answer and reject wrong ones without
stating the answer."""

from __future__ import annotations

from minigraph.lessons import l09b
from minigraph.memory.online import MiB, replay_allocator


def test_exercise_1_gmlake_below_an_expandable_segment():
    # A hole in the middle of the segment, too small for the next request: the expandable
    # segment extends its end, GMLake stitches the hole and asks only for what is missing.
    good = [("alloc", "a", 12 * MiB), ("alloc", "b", 12 * MiB), ("alloc", "x", 12 * MiB),
            ("free", "b"), ("alloc", "c", 13 * MiB)]
    assert replay_allocator(good, "gmlake").peak_reserved < \
        replay_allocator(good, "expandable-2m").peak_reserved
    assert l09b.exercise_1(good)[0]
    # Holes side by side coalesce in the segment: no gain for GMLake (lesson 09b's STITCH).
    coalesce = [("alloc", "a", 12 * MiB), ("alloc", "b", 12 * MiB), ("alloc", "x", 12 * MiB),
                ("free", "a"), ("free", "b"), ("alloc", "c", 20 * MiB)]
    assert replay_allocator(coalesce, "gmlake").peak_reserved == \
        replay_allocator(coalesce, "expandable-2m").peak_reserved
    too_long = good + [("free", "c"), ("free", "a")]
    for wrong in (coalesce, too_long, [("free", "zz")], "trace", None):
        assert not l09b.exercise_1(wrong)[0]


def test_exercise_2_expandable_bytes_for_one_21_mib_tensor():
    truth = replay_allocator(l09b.ONE_21, "expandable").peak_reserved
    assert truth % (20 * MiB) == 0 and truth > 21 * MiB      # whole pages, more than asked
    assert l09b.exercise_2(truth)[0]
    for wrong in (21 * MiB, 22 * MiB, 20 * MiB, truth // MiB, truth + 512, str(truth), True,
                  None):
        ok, why = l09b.exercise_2(wrong)
        assert not ok and str(truth) not in why and f"{truth // MiB} MiB" not in why
    assert "bytes, not MiB" in l09b.exercise_2(truth // MiB)[1]
