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
    """The sentence, or a ~EVIDENCE_CHARS window of it around `pos` cut at word boundaries."""
    if len(sentence) <= EVIDENCE_CHARS:
        return sentence
    lo = max(0, min(pos - EVIDENCE_CHARS // 3, len(sentence) - EVIDENCE_CHARS))
    hi = lo + EVIDENCE_CHARS
    if lo > 0:
        sp = sentence.find(" ", lo)
        lo = sp + 1 if 0 <= sp < lo + 30 else lo
    if hi < len(sentence):
        sp = sentence.rfind(" ", lo, hi)
        hi = sp if sp > lo else hi
    return ("…" if lo > 0 else "") + sentence[lo:hi] + ("…" if hi < len(sentence) else "")


def is_occupied(ranges: list[tuple[int, int]], a: int, b: int) -> bool:
    """Whether [a, b) overlaps one of `ranges` (a span already claimed by another mention)."""
    return any(a < e and s < b for s, e in ranges)
