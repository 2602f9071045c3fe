"""The strings of an extractive report: summary, findings with their quoted evidence and
GraphRAG-style references, the title's list of names, and the markdown of `full_content`.

Pure Python over one community's rows as `offline` hands them over (members, relationships and
candidate sentences, best first); no frames. `report_markdown` also renders the LLM reports
(`model_answer`), so both modes write the same `full_content` layout.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pipeline.sentences import split_sentences

_SUMMARY_SENTENCES = 3
# a summary sentence is clipped to this (find_evidence discounts longer candidates)
MAX_SENTENCE_CHARS = 320
_MAX_EVIDENCE_CHARS = 240
_MAX_REFS = 5


def _clip(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word boundary with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "…"


@lru_cache(maxsize=4096)
def _sentences(text: str) -> tuple[str, ...]:
    """A description's sentences, kept for its next use: a member is quoted in its community
    at every level (on MuSiQue 32k splits of 8.3k texts; this cache answers 2/3 of them)."""
    return tuple(split_sentences(text))


def _evidence(texts: list[str], limit: int) -> str:
    """Quoted evidence within `limit` characters: the texts' sentences taken in turns (first of
    each, then second of each...), without repeats; the first one is clipped if too long."""
    split = [_sentences(t) for t in texts if t]
    turns = [
        s for i in range(max(map(len, split), default=0)) for ss in split for s in ss[i : i + 1]
    ]
    out: list[str] = []
    seen: set[str] = set()
    used = 0
    for sentence in turns:
        key = sentence.casefold()
        if key in seen or (out and used + len(sentence) + 1 > limit):
            continue
        seen.add(key)
        out.append(sentence if out else _clip(sentence, limit))
        used += len(out[-1]) + 1
    return " ".join(out)


def _refs(kind: str, ids: list[int]) -> str:
    uniq = sorted(dict.fromkeys(int(i) for i in ids if i is not None))
    shown = ", ".join(str(i) for i in uniq[:_MAX_REFS])
    return f"{kind} ({shown}{', +more' if len(uniq) > _MAX_REFS else ''})"


def _data_refs(entities: list[int], relationships: list[int], sources: list[int]) -> str:
    parts = [
        _refs(kind, ids)
        for kind, ids in (
            ("Entities", entities),
            ("Relationships", relationships),
            ("Sources", sources),
        )
        if ids
    ]
    return f"[Data: {'; '.join(parts)}]" if parts else ""


def join_titles(titles: list[str]) -> str:
    if len(titles) <= 1:
        return "".join(titles)
    return ", ".join(titles[:-1]) + " and " + titles[-1]


def summary_of(row: dict[str, Any]) -> str:
    """2-3 pool sentences covering the most members; falls back to a member listing."""
    pool = [
        (dict(zip(s["ranks"], s["weights"], strict=True)), s["factor"], s["sentence"])
        for s in row["sentences"] or []
    ]
    chosen: list[str] = []
    covered: set[int] = set()
    seen: set[str] = set()

    def gain(i: int) -> float:
        mentioned, factor, _ = pool[i]
        return factor * sum(w for r, w in mentioned.items() if r not in covered)

    while pool and len(chosen) < _SUMMARY_SENTENCES:
        # most newly covered member weight (discounted for overlong sentences); candidates
        # arrive best-first, so max() keeps the earliest among equals
        best = max(range(len(pool)), key=gain)
        mentioned, _, sentence = pool.pop(best)
        ranks = set(mentioned)
        key = " ".join(sentence.casefold().split())
        if key in seen:
            continue
        if not ranks - covered and len(chosen) >= 2:
            break
        seen.add(key)
        covered |= ranks
        chosen.append(_clip(sentence, MAX_SENTENCE_CHARS))
    if chosen:
        return " ".join(chosen)
    members = row["members"] or []
    listing = join_titles(
        [f"{m['title']} ({m['type']})" if m["type"] else m["title"] for m in members]
    )
    return f"A community of {row['size']} entities, most central {listing}."


def findings_of(row: dict[str, Any], max_findings: int) -> list[dict[str, str]]:
    members = row["members"] or []
    rels = row["rels"] or []
    # key members first; keep one slot for the strongest relationship when there is room
    n_members = min(len(members), max_findings - (1 if rels and max_findings > 1 else 0))
    out: list[dict[str, str]] = []
    for m in members[:n_members]:
        head = f"{m['title']} — {m['type']}" if m["type"] else m["title"]
        if m["neighbours"]:
            head += ", linked to " + ", ".join(m["neighbours"])
        text = _evidence([m["description"], m["m_rel_desc"] or ""], _MAX_EVIDENCE_CHARS)
        refs = _data_refs([m["e_hrid"], *(m["n_hrids"] or [])], m["m_rel_hrids"] or [], [])
        out.append({"summary": head, "explanation": f"{text} {refs}".strip()})
    # strongest relationships not already quoted as a member's evidence
    quoted = {m["m_rel_hrids"][0] for m in members[:n_members] if m["m_rel_hrids"]}
    for r in [r for r in rels if r["r_hrid"] not in quoted][: max_findings - len(out)]:
        head = f"{r['s_title']} — {r['t_title']}" + (f" ({r['r_type']})" if r["r_type"] else "")
        desc = _evidence([r["r_desc"]], _MAX_EVIDENCE_CHARS) or (
            f"{r['s_title']} is related to {r['t_title']}."
        )
        refs = _data_refs([r["s_hrid"], r["t_hrid"]], [r["r_hrid"]], [])
        out.append({"summary": head, "explanation": f"{desc} {refs}"})
    return out


def report_markdown(title: str, summary: str, findings: list[dict[str, str]]) -> str:
    parts = [f"# {title}", summary]
    for f in findings:
        parts += [f"## {f['summary']}", f["explanation"]]
    return "\n\n".join(parts) + "\n"
