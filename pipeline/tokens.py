"""Token counting with the o200k_base encoding, embedded in the bpe-openai wheel (no download)."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def _encoding():
    import bpe_openai

    return bpe_openai.get_encoding("o200k_base")


def count_tokens(text: str) -> int:
    # encode_ordinary: text that spells a special token ("<|endoftext|>") is counted as text, not
    # refused (encode() raises on it, and such strings occur in real documents).
    return len(_encoding().encode_ordinary(text)) if text else 0


def count_tokens_batch(texts: list[str]) -> list[int]:
    """count_tokens over many texts. A plain loop: the library's batch call dispatches each
    text to a thread pool, which costs more than encoding short sentences."""
    enc = _encoding()
    return [len(enc.encode_ordinary(t)) if t else 0 for t in texts]


def truncate_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of `text` with at most `max_tokens` tokens."""
    enc = _encoding()
    toks = enc.encode_ordinary(text)
    if len(toks) <= max_tokens:
        return text
    return enc.decode(toks[:max_tokens])
