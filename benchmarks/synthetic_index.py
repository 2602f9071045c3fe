"""A synthetic docgraph index of any size, for latency benchmarks at scale.

    python benchmarks/synthetic_index.py OUT [--entities 100000] [--relationships 300000]
        [--units 50000] [--sections 100000]

Every table has the real schema (pipeline/schemas.py) and the Lance tables real vectors
(random unit vectors: latency does not depend on what they mean). The structure is a
notebook-like forest (NOTE sections with uris, sibling order, REIFIES and REFERS_TO edges),
so focus context meets every relation; entity titles are made-up names so that queries
naming them exercise name matching. Built vectorised (numpy / polars), in about a minute.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline import schemas  # noqa: E402
from pipeline.lexical.bm25 import index_dir, unit_index  # noqa: E402
from pipeline.storage import store  # noqa: E402

DIM = 384
SYLLABLES = "ka lo mi ra ten vor ul zin pe sa dor hel quin bar tis mon rel fa gu nex".split()  # noqa: SIM905
WORDS = (  # noqa: SIM905
    "the of and a to in is was for on that by with as at from his her which an were be "
    "are this it had not or first one new but also after their its two been who they "
    "river city war king church school film team album station county party village "
    "company island university museum bridge railway battle novel season festival"
).split()


def _names(n: int, rng: np.random.Generator) -> list[str]:
    """n distinct made-up names like 'Korvan Telis 12' (title case, two words + number)."""
    syl = np.array(SYLLABLES)
    a = syl[rng.integers(0, len(syl), (n, 3))]
    b = syl[rng.integers(0, len(syl), (n, 2))]
    first = pl.Series(a[:, 0]) + pl.Series(a[:, 1]) + pl.Series(a[:, 2])
    second = pl.Series(b[:, 0]) + pl.Series(b[:, 1])
    frame = pl.DataFrame({"f": first, "s": second, "i": np.arange(n)})
    return frame.select(
        pl.col("f").str.to_titlecase() + " " + pl.col("s").str.to_titlecase() + " " +
        pl.col("i").cast(pl.String)
    ).to_series().to_list()  # fmt: skip


def _texts(n: int, words: int, rng: np.random.Generator, names: list[str]) -> list[str]:
    """n texts of `words` filler words, each naming two entities."""
    vocab = np.array(WORDS)
    grid = vocab[rng.integers(0, len(vocab), (n, words))]
    body = pl.DataFrame({"w": grid.tolist()}).select(pl.col("w").list.join(" ")).to_series()
    pick = rng.integers(0, len(names), (n, 2))
    nm = np.array(names, dtype=object)
    return (pl.Series(nm[pick[:, 0]].tolist()) + " " + body + " " +
            pl.Series(nm[pick[:, 1]].tolist()) + ".").to_list()  # fmt: skip


def _vectors(n: int, rng: np.random.Generator) -> np.ndarray:
    v = rng.standard_normal((n, DIM), dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def _ids(prefix: str, n: int) -> list[str]:
    return pl.select(pl.lit(prefix) + pl.int_range(n).cast(pl.String)).to_series().to_list()


def _lance(out: Path, name: str, frame: pl.DataFrame, vec: np.ndarray) -> None:
    schema = schemas.vector_schema(DIM, schemas.VECTOR_TABLES[name])
    cols = {f.name: frame[f.name].to_arrow() for f in schema if f.name != "vector"}
    flat = pa.array(vec.reshape(-1), type=pa.float32())
    cols["vector"] = pa.FixedSizeListArray.from_arrays(flat, DIM)
    table = pa.table({f.name: cols[f.name] for f in schema}).cast(schema)
    store.write_lance(out, name, table, fts=False)


def build(
    out: Path,
    n_entities: int = 100_000,
    n_relationships: int = 300_000,
    n_units: int = 50_000,
    n_sections: int = 100_000,
    seed: int = 0,
) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    n_docs = max(1, n_sections // 50)

    # ---- structure: each document a notebook of 50 notes (root + children + grandchildren)
    sec_ids = _ids("s", n_sections)
    doc_of = np.arange(n_sections) // 50
    local = np.arange(n_sections) % 50
    # local 0 = root; 1..7 its children; the rest children of 1..7 in turn.
    parent_local = np.where(local == 0, -1, np.where(local <= 7, 0, 1 + (local - 8) % 7))
    parent = np.where(parent_local < 0, -1, doc_of * 50 + parent_local)
    seq = np.where(local <= 7, local, (local - 8) // 7)
    titles = _names(n_sections, rng)
    sid = np.array(sec_ids, dtype=object)
    sections = pl.DataFrame(
        {
            "id": sec_ids,
            "human_readable_id": np.arange(n_sections),
            "document_id": [f"d{d}" for d in doc_of],
            "parent_id": [sid[p] if p >= 0 else None for p in parent],
            "component_type": np.where(local == 0, "DOCUMENT", "NOTE").tolist(),
            "title": titles,
            "level": np.where(local == 0, 0, np.where(local <= 7, 1, 2)).tolist(),
            "seq": seq.tolist(),
            "uri": [f"note://n{i}" for i in range(n_sections)],
            "page_start": 1,
            "page_end": 1,
            "metadata": "{}",
        }
    )
    by_id = dict(zip(sec_ids, titles, strict=True))
    sections = sections.with_columns(
        path=pl.Series(
            [[by_id[sec_ids[p]], t] if p >= 0 else [t] for p, t in zip(parent, titles, strict=True)]
        )
    )
    details = _texts(n_sections, 30, rng, titles)
    nodes = pl.DataFrame(
        {
            "id": _ids("c", n_sections),
            "human_readable_id": np.arange(n_sections),
            "document_id": sections["document_id"],
            "section_id": sec_ids,
            "node_type": "PARAGRAPH",
            "text": details,
            "description": "",
            "seq_major": 0,
            "seq_minor": 0,
            "positions": [
                [{"page": 1, "page_label": "1", "x0": 0.0, "y0": 0.0, "x1": 1.0, "y1": 1.0}]
            ]
            * n_sections,  # fmt: skip
            "metadata": "{}",
        }
    )
    n_reif, n_ref = n_sections // 20, n_sections // 10
    src = rng.integers(0, n_sections, n_reif + n_ref)
    dst = rng.integers(0, n_sections, n_reif + n_ref)
    edges = pl.DataFrame(
        {
            "source_id": [sid[s] for s in src[:n_reif]] + [f"c{s}" for s in src[n_reif:]],
            "target_id": sid[dst].tolist(),
            "type": ["REIFIES"] * n_reif + ["REFERS_TO"] * n_ref,
            "weight": 1.0,
            "marker_text": "",
            "metadata": "{}",
        }
    ).filter(pl.col("source_id").str.slice(1) != pl.col("target_id").str.slice(1))
    n_topic = n_sections // 5
    same = pl.DataFrame(
        {
            "source_id": sid[rng.integers(0, n_sections, n_topic)].tolist(),
            "target_id": sid[rng.integers(0, n_sections, n_topic)].tolist(),
            "type": "SAME_TOPIC",
            "weight": rng.uniform(0.6, 1.0, n_topic),
            "marker_text": "",
            "metadata": "{}",
        }
    ).filter(pl.col("source_id") != pl.col("target_id"))

    # ---- semantic layer
    ent_titles = [t.upper() for t in _names(n_entities, rng)]
    unit_ids = _ids("u", n_units)
    unit_sec = rng.integers(0, n_sections, n_units)
    unit_text = _texts(n_units, 90, rng, ent_titles)
    # entity -> 1..6 units (more for a few), relationships mostly between nearby entities
    per = np.minimum(1 + rng.zipf(2.0, n_entities), 40)
    ent_rep = np.repeat(np.arange(n_entities), per)
    pairs = pl.DataFrame({"e": ent_rep, "u": rng.integers(0, n_units, ent_rep.size)}).unique()
    eid = np.array(_ids("e", n_entities), dtype=object)
    uid = np.array(unit_ids, dtype=object)
    pairs = pairs.with_columns(eid=pl.Series(eid[pairs["e"].to_numpy()].tolist()),
                               uid=pl.Series(uid[pairs["u"].to_numpy()].tolist()))  # fmt: skip
    ent_units = pairs.group_by("e").agg(pl.col("uid").sort()).sort("e")
    unit_ents = pairs.group_by("u").agg(pl.col("eid").sort())
    rs = rng.integers(0, n_entities, n_relationships)
    rt = np.where(
        rng.random(n_relationships) < 0.7,
        (rs + rng.integers(1, 50, n_relationships)) % n_entities,
        rng.integers(0, n_entities, n_relationships),
    )
    rel_ids = _ids("r", n_relationships)
    deg = np.bincount(np.concatenate([rs, rt]), minlength=n_entities)
    ent_unit_lists = ent_units["uid"].to_list()
    et = np.array(ent_titles, dtype=object)
    entities = pl.DataFrame(
        {
            "id": eid.tolist(),
            "human_readable_id": np.arange(n_entities),
            "title": ent_titles,
            "type": np.array(["PERSON", "ORGANIZATION", "LOCATION", "EVENT"])[
                np.arange(n_entities) % 4
            ].tolist(),
            "description": [f"{t} is mentioned in the corpus." for t in ent_titles],
            "aliases": [[]] * n_entities,
            "text_unit_ids": ent_unit_lists,
            "frequency": [len(u) for u in ent_unit_lists],
            "degree": deg,
        },
        schema_overrides={"aliases": pl.List(pl.String)},
    )
    relationships = pl.DataFrame(
        {
            "id": rel_ids,
            "human_readable_id": np.arange(n_relationships),
            "source": et[rs].tolist(),
            "target": et[rt].tolist(),
            "source_id": eid[rs].tolist(),
            "target_id": eid[rt].tolist(),
            "type": "RELATED_TO",
            "description": [f"{a} is related to {b}." for a, b in zip(et[rs], et[rt], strict=True)],
            "weight": rng.uniform(1, 10, n_relationships),
            "combined_degree": deg[rs] + deg[rt],
            "text_unit_ids": [[u] for u in uid[rng.integers(0, n_units, n_relationships)]],
        }
    )
    text_units = (
        pl.DataFrame(
            {
                "id": unit_ids,
                "human_readable_id": np.arange(n_units),
                "text": unit_text,
                "n_tokens": 120,
                "document_id": sections["document_id"].to_numpy()[unit_sec].tolist(),
                "section_id": sid[unit_sec].tolist(),
                "content_node_ids": [[f"c{s}"] for s in unit_sec],
                "pages": [[1]] * n_units,
                "seq": np.arange(n_units),
                "relationship_ids": [[]] * n_units,
                "u": np.arange(n_units),
            },
            schema_overrides={"relationship_ids": pl.List(pl.String)},
        )
        .join(unit_ents, on="u", how="left")
        .rename({"eid": "entity_ids"})
        .with_columns(pl.col("entity_ids").fill_null([]))
    )
    documents = pl.DataFrame(
        {
            "id": [f"d{d}" for d in range(n_docs)],
            "human_readable_id": np.arange(n_docs),
            "title": [titles[d * 50] for d in range(n_docs)],
            "source_path": [f"notebooks/{d}.json" for d in range(n_docs)],
            "mime_type": "application/json",
            "sha256": "",
            "byte_size": 0,
            "n_pages": 1,
            "language": "en",
            "metadata": "{}",
            "text": "",
            "creation_date": "",
            "warnings": [[]] * n_docs,
        },
        schema_overrides={"warnings": pl.List(pl.String)},
    )
    # ---- communities: blocks of 1000 / 100 / 10 consecutive entities (levels 0 / 1 / 2)
    sizes = (1000, 100, 10)
    counts = [-(-n_entities // size) for size in sizes]
    first = [sum(counts[:lvl]) for lvl in range(len(sizes))]
    rows = []
    for lvl, size in enumerate(sizes):
        for j in range(counts[lvl]):
            lo, hi = j * size, min((j + 1) * size, n_entities)
            kids = []
            if lvl + 1 < len(sizes):
                sub = sizes[lvl + 1]
                kids = list(range(first[lvl + 1] + lo // sub, first[lvl + 1] + -(-hi // sub)))
            parent_c = -1 if lvl == 0 else first[lvl - 1] + lo // sizes[lvl - 1]
            rows.append((first[lvl] + j, lvl, parent_c, kids, lo, hi))
    comms = pl.DataFrame(
        rows, schema=["community", "level", "parent", "children", "lo", "hi"], orient="row"
    ).with_columns(
        pl.col("children").cast(pl.List(pl.Int64)),
        entity_ids=pl.int_ranges("lo", "hi").list.eval(pl.lit("e") + pl.element().cast(pl.String)),
        relationship_ids=pl.lit([], dtype=pl.List(pl.String)),
        text_unit_ids=pl.lit([], dtype=pl.List(pl.String)),
        title=pl.lit("Community ") + pl.col("community").cast(pl.String),
        id=pl.lit("k") + pl.col("community").cast(pl.String),
        human_readable_id=pl.col("community"),
        size=pl.col("hi") - pl.col("lo"),
        period=pl.lit(""),
    )
    reports = comms.with_columns(
        summary=pl.lit("A community of related entities: ") + pl.col("title"),
        rating=5.0,
        rating_explanation=pl.lit("synthetic"),
        findings=pl.lit(
            [{"summary": "a finding", "explanation": "an explanation"}],
            dtype=pl.List(pl.Struct({"summary": pl.String, "explanation": pl.String})),
        ),
        full_content=pl.lit("# ") + pl.col("title") + "\n\nA community of related entities.",
        full_content_json=pl.lit("{}"),
    )
    tables = {
        "documents": documents,
        "sections": sections,
        "content_nodes": nodes,
        "structure_edges": edges,
        "same_topic_edges": same,
        "text_units": text_units,
        "entities": entities,
        "relationships": relationships,
        "communities": comms,
        "community_reports": reports,
    }
    for name, frame in tables.items():
        store.write_table(out, name, pl.from_arrow(schemas.conform(frame, name)))
    _lance(out, "text_units", text_units, _vectors(n_units, rng))
    _lance(out, "entities", entities.with_columns(text=pl.col("title")), _vectors(n_entities, rng))
    _lance(
        out,
        "relationships",
        relationships.with_columns(text=pl.col("description")),
        _vectors(n_relationships, rng),
    )
    _lance(out, "community_reports", reports.with_columns(text=pl.col("summary")),
           _vectors(reports.height, rng))  # fmt: skip
    _lance(out, "content_nodes", nodes, _vectors(n_sections, rng))
    # the BM25 index every mode's unit relevance reads, as the lexical_index asset builds it
    unit_index(text_units, documents).save(index_dir(out, "text_units"))
    counts = {name: frame.height for name, frame in tables.items()}
    (out / "synthetic.json").write_text(json.dumps(counts))
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--entities", type=int, default=100_000)
    ap.add_argument("--relationships", type=int, default=300_000)
    ap.add_argument("--units", type=int, default=50_000)
    ap.add_argument("--sections", type=int, default=100_000)
    args = ap.parse_args()
    t = time.perf_counter()
    counts = build(args.out, args.entities, args.relationships, args.units, args.sections)
    print(json.dumps(counts), f"{time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
