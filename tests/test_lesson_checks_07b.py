"""Lesson 07b's exercise check accepts the right answer and rejects wrong ones without
stating the answer."""

from __future__ import annotations

from minigraph.lessons import l07b


def _by_hand() -> tuple[float, float]:
    """Exercise 1 worked from the rules: the evicted runs are {b, c} and {e, f}; d's input
    c lies in {b, c}, its reader e in {e, f}."""
    c = l07b.CHAIN_1
    bc, ef = c["b"] + c["c"], c["e"] + c["f"]
    return bc + ef, max(bc, c["c"])


def test_exercise_1_takes_both_estimates_and_hides_them():
    right = _by_hand()
    assert l07b.chain_neighbour_costs(l07b.CHAIN_1, l07b.EVICTED_1, l07b.CANDIDATE_1) == right
    assert right[0] != right[1]
    assert l07b.exercise_1(right)[0] and l07b.exercise_1(list(right))[0]
    for wrong in [(right[0], right[0]), (right[1], right[1]), right[::-1],
                  (right[0] + 1, right[1]), (0, 0)]:
        ok, why = l07b.exercise_1(wrong)
        assert not ok
        assert f"{right[0]:g}" not in why.split() and f"{right[1]:g}" not in why.split()
    for bad in (None, "16, 5", 3, (1, 2, 3)):
        assert not l07b.exercise_1(bad)[0]



def test_the_check_counts_as_section_1_teaches():
    """Section 1's chain (six unit tensors, x1, x2 and x4 evicted): DTR-eq charges x3 both
    of its evicted classes, MegEngine only the one on its input side."""
    chain = {f"x{i}": 1.0 for i in range(6)}
    assert l07b.chain_neighbour_costs(chain, ["x1", "x2", "x4"], "x3") == (3.0, 2.0)
    # MegEngine joins a tensor only with inputs evicted before it: x1 evicted after x2
    # stays out of x2's class, so x3 is charged {x2} alone; DTR-eq joins both ways.
    assert l07b.chain_neighbour_costs(chain, ["x4", "x2", "x1"], "x3") == (3.0, 1.0)
    assert l07b.chain_neighbour_costs(chain, [], "x3") == (0.0, 0.0)
