"""A mention (one typed occurrence of an entity in a sentence) and the evidence snippet kept
as its description: the record every extraction step produces or consumes."""

from __future__ import annotations

from dataclasses import dataclass

EVIDENCE_CHARS = 300


@dataclass
class Mention:
    title: str
    type: str
    conf: float
    sent: int
    pos: int  # char offset inside the sentence
    end: int


def evidence(sentence: str, pos: int = 0) -> str:
    """The sentence, or a ~EVIDENCE_CHARS window of it cut at word boundaries: from its start
    when the mention at `pos` lies in its first EVIDENCE_CHARS * 2/3, else from the mention
    (what the sentence says of it, with no "…" fragment before it to open a description)."""
    if len(sentence) <= EVIDENCE_CHARS:
        return sentence
    lo = 0 if pos < EVIDENCE_CHARS * 2 // 3 else pos
    hi = lo + EVIDENCE_CHARS
    if hi < len(sentence):
        sp = sentence.rfind(" ", lo, hi)
        hi = sp if sp > lo else hi
    return sentence[lo:hi] + ("…" if hi < len(sentence) else "")


def is_occupied(ranges: list[tuple[int, int]], a: int, b: int) -> bool:
    """Whether [a, b) overlaps one of `ranges` (a span already claimed by another mention)."""
    return any(a < e and s < b for s, e in ranges)
