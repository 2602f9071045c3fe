"""Packing text units into LLM extraction calls, each pack sized by the answers the run gets.

Why packs: the extraction prompt (the NEREL type lists, a compact schema and one tiny example,
620 tokens) is paid per call, so short text units of one document share a call. Packs never
cross documents, so adding a document leaves every other document's calls unchanged.

Why sized from evidence: the answer, not the prompt, bounds a pack (it must fit in
llm.max_tokens), and how many answer tokens a text token gets depends on the model and the
text: a real extractor writes 2.4 on dense encyclopedic text (MuSiQue), the model-like fake
0.5 on a novel, the verbose fake 2.6 on the novel and 11 on MuSiQue. So `AnswerRatio` starts
from `extraction.llm_answer_ratio` and learns the run's own ratio from its answers, and packs
are formed in waves (`wave_sizes`), each sized by what the answers so far measure. Dense text
whose answer is cut anyway is split and asked again (`pipeline.llm.batches.ask_in_halves`);
the cut counts as an answer of max_tokens, so the ratio rises and later packs shrink.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["HEADROOM", "AnswerRatio", "pack_units", "wave_sizes"]

# Answers spread around the run's mean ratio from pack to pack: the verbose fake on A Christmas
# Carol, packs of ~1,100 text tokens, from 1.0 to 8.5 answer tokens per text token around 2.6
# (16% of packs above 1.25 x the mean). Sized at the mean (1.0), 33 packs had 7 cut: ~47
# calls; at 1.25, 42 packs, 5 cut: ~52 calls but 8k fewer completion tokens paid for cut
# answers (a cut pays max_tokens for nothing, and completion tokens cost ~4x prompt tokens);
# at 1.5, ~59 calls.
HEADROOM = 1.25


@dataclass
class AnswerRatio:
    """Answer tokens per text token: the prior until answers come back, then what they
    measure (answer tokens / text tokens of the packs answered, a cut answer counting as
    `max_tokens`). The prior weighs as much as one pack sized by it, so one small first answer
    does not swing the size of every later pack."""

    prior: float
    max_tokens: int | None = None
    answer_tokens: int = 0
    text_tokens: int = 0

    def observe(self, answer_tokens: int, text_tokens: int) -> None:
        self.answer_tokens += answer_tokens
        self.text_tokens += text_tokens

    def observe_cut(self, text_tokens: int) -> None:
        """An answer cut at the token limit: it held at least `max_tokens`."""
        self.observe(self.max_tokens or 0, text_tokens)

    @property
    def measured(self) -> float | None:
        """The run's own ratio (None before any answer)."""
        return self.answer_tokens / self.text_tokens if self.text_tokens else None

    @property
    def value(self) -> float:
        """The ratio packs are sized by: the measured one, pulled toward the prior by one
        prior-sized pack of weight."""
        weight = self.max_tokens / (self.prior * HEADROOM) if self.max_tokens else 0.0
        total = weight + self.text_tokens
        return (self.prior * weight + self.answer_tokens) / total if total else self.prior

    def pack_tokens(self, cap: int) -> int:
        """Text tokens a pack may hold so that its answer fits in max_tokens with HEADROOM,
        within `cap` (`extraction.llm_pack_tokens`)."""
        if not self.max_tokens or self.value <= 0:
            return cap
        return max(1, min(cap, int(self.max_tokens / (self.value * HEADROOM))))


def wave_sizes() -> Iterator[int]:
    """Packs per wave: 1, 2, 4, ... The first pack is sized by the prior alone, each later wave
    by every answer before it; doubling keeps a run of n packs to log2(n) waves, so waiting
    for a wave's slowest call (and a progress line per wave) costs little, while the client's
    concurrency bounds the calls in flight."""
    n = 1
    while True:
        yield n
        n *= 2


def pack_units(
    unit_ids: list[str],
    n_tokens: list[int],
    groups: list[str] | None = None,
    max_tokens: int = 1200,
    max_units: int = 12,
) -> list[list[int]]:
    """Row indices packed greedily in input order: a pack holds consecutive units of one group
    (document) whose tokens sum to <= max_tokens (a longer unit goes alone) and at most
    max_units. Deterministic, and the first k packs depend only on the rows they hold (a wave
    packs a prefix); a unit id seen twice is packed once (its first row)."""
    packs: list[list[int]] = []
    cur: list[int] = []
    cur_tok = 0
    cur_group: str | None = None
    seen: set[str] = set()
    for i, (uid, n) in enumerate(zip(unit_ids, n_tokens, strict=True)):
        if uid in seen:
            continue
        seen.add(uid)
        g = groups[i] if groups is not None else ""
        if cur and (g != cur_group or cur_tok + n > max_tokens or len(cur) >= max_units):
            packs.append(cur)
            cur, cur_tok = [], 0
        cur.append(i)
        cur_tok += n
        cur_group = g
    if cur:
        packs.append(cur)
    return packs
