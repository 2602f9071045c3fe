"""SAME_TOPIC neighbour search: the exact all-pairs pass against the inverted lists, by size.

    python benchmarks/same_topic.py [--sizes 20000 50000 100000] [--probes 8 16 32]
        [--index DIR]

Section vectors are drawn around real ones: the text-unit vectors of an index (`--index`,
e.g. a MuSiQue index from benchmarks/throughput.py) as topics, each section a topic plus
Gaussian noise (cosine ~0.75 to it), spread over documents of ~10 sections; without an
index, random topics. Exact time is measured on a sample of rows and scaled to all (it is
rows x n work); recall is the share of a sample of rows' exact pairs (top-k, cross-document,
above min_similarity) that the inverted lists also return, on the same settings the index
uses (pipeline.config SameTopicSettings).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pipeline.config import SameTopicSettings
from pipeline.vectors.same_topic import top_pairs

SAMPLE = 500  # rows whose exact neighbours are computed


def topics_from(index: str | None, dim: int = 384) -> np.ndarray:
    if index:
        from pipeline.storage import store

        table = store.lance_db(index).open_table("text_units").to_arrow()
        return np.stack(table["vector"].to_numpy(zero_copy_only=False)).astype(np.float32)
    return np.random.default_rng(7).normal(size=(2000, dim)).astype(np.float32)


def sections(topics: np.ndarray, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    unit = topics / np.linalg.norm(topics, axis=1, keepdims=True)
    base = unit[rng.integers(0, len(unit), size=n)]
    noise = rng.normal(scale=0.9 / np.sqrt(unit.shape[1]), size=base.shape)
    vecs = (base + noise).astype(np.float32)
    return vecs, rng.integers(0, max(1, n // 10), size=n)


def exact_rows(vecs, groups, rows, k, min_sim) -> set[tuple[int, int]]:
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    s = unit[rows] @ unit.T
    s[groups[rows][:, None] == groups[None, :]] = -np.inf
    top = np.argpartition(-s, k - 1, axis=1)[:, :k]
    pairs = set()
    for i, (r, cols) in enumerate(zip(rows.tolist(), top.tolist(), strict=True)):
        pairs.update((min(r, c), max(r, c)) for c in cols if s[i, c] >= min_sim)
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 50_000, 100_000])
    parser.add_argument("--probes", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--index", default=None, help="an index folder: its text-unit vectors")
    args = parser.parse_args()
    st = SameTopicSettings()
    k, min_sim = st.max_connections, st.min_similarity
    topics = topics_from(args.index)
    print(
        f"topics: {len(topics)} ({'index' if args.index else 'random'}), k={k}, "
        f"min_similarity={min_sim}, default probes={st.probes}"
    )
    print(f"| {'sections':>8} | {'search':<18} | {'s':>8} | {'pairs':>8} | {'recall':>7} |")
    print(f"|{'-' * 10}|{'-' * 20}|{'-' * 10}|{'-' * 10}|{'-' * 9}|")
    for n in args.sizes:
        vecs, groups = sections(topics, n)
        rows = np.sort(np.random.default_rng(1).choice(n, size=min(SAMPLE, n), replace=False))
        t0 = time.perf_counter()
        want = exact_rows(vecs, groups, rows, k, min_sim)
        exact_s = (time.perf_counter() - t0) * n / len(rows)
        print(f"| {n:>8} | {'exact (scaled)':<18} | {exact_s:>8.1f} | {'':>8} | {1:>7.3f} |")
        for probes in args.probes:
            t0 = time.perf_counter()
            a, b, _ = top_pairs(vecs, groups, k, min_sim, True, exact_max=0, probes=probes)
            secs = time.perf_counter() - t0
            got = set(zip(a.tolist(), b.tolist(), strict=True))
            recall = len(want & got) / max(len(want), 1)
            label = f"{int(np.sqrt(n))} lists, {probes} probed"
            print(f"| {n:>8} | {label:<18} | {secs:>8.1f} | {len(got):>8} | {recall:>7.3f} |")


if __name__ == "__main__":
    main()
