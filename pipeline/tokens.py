"""Token counting with the o200k_base encoding, embedded in the bpe-openai wheel (no download).

Counting, encoding and truncating call the wheel's Rust tokenizer directly (`_tokenizer`):
importing the `bpe_openai` package first builds Python rank tables of all three of its
encodings (~0.6 s a process, the most of a cold query's token counting), which only its
Python decoder needs; `token_starts` (char offsets, the simple chunker's rare over-long
sentence) still uses that decoder.

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


@lru_cache(maxsize=1)
def _encoding():
    import bpe_openai

    return bpe_openai.get_encoding("o200k_base")


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
