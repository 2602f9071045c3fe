"""Global search's dynamic level selection: descend the community tree while relevant."""

from types import SimpleNamespace

import numpy as np
import polars as pl

from pipeline.query.global_search import dynamic_selection

# community -> (level, children); a two-level tree under two roots.
TREE = {0: (0, [2, 3]), 1: (0, [4]), 2: (1, [5]), 3: (1, []), 4: (1, []), 5: (2, [])}


def _index():
    comms = sorted(TREE)
    frame = pl.DataFrame(
        {
            "community": comms,
            "level": [TREE[c][0] for c in comms],
            "children": [TREE[c][1] for c in comms],
        },
        schema_overrides={"children": pl.List(pl.Int64)},
    )
    return SimpleNamespace(community_reports=frame.select("community", "level"), communities=frame)


def _chosen(ratings: dict[int, float], threshold: float = 1.0) -> tuple[list[int], list[str]]:
    trace: list[str] = []
    arr = np.array([ratings.get(c, 0.0) for c in sorted(TREE)])
    mask = dynamic_selection(_index(), arr, threshold, trace)
    return [c for c, keep in zip(sorted(TREE), mask, strict=True) if keep], trace


def test_relevant_children_replace_their_parent_and_irrelevant_branches_are_pruned():
    # Root 0 relevant, its child 2 relevant (and 2's child 5 not), child 3 not; root 1 not:
    # root 1's child 4 is never visited even though it would rate high.
    chosen, trace = _chosen({0: 6, 2: 5, 3: 0, 5: 0.5, 1: 0, 4: 9})
    assert chosen == [2]
    assert "rated 5 reports over 3 levels" in trace[0] and "kept 1" in trace[0]


def test_a_relevant_parent_with_no_relevant_child_stays():
    chosen, _ = _chosen({0: 6, 2: 0.5, 3: 0, 1: 2, 4: 3})
    assert chosen == [0, 4]


def test_threshold_applies():
    assert _chosen({0: 6, 2: 5, 1: 2, 4: 3}, threshold=4)[0] == [2]
    assert _chosen({0: 0.2, 1: 0.1})[0] == []
