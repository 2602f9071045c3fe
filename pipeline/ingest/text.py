"""Plain-text loader and the byte-to-text decoding every text format shares."""

from __future__ import annotations

from pathlib import Path

from pipeline.ingest.loader import LoadedDoc, LoadError, register


def decode_text(data: bytes) -> str:
    """Strict UTF-8 (no silent mojibake), BOM stripped, newlines normalised to \\n."""
    if b"\x00" in data:
        raise LoadError("binary content")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LoadError(f"invalid UTF-8 at byte {e.start}") from None
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise LoadError("empty file")
    return text


TITLE_MAX_CHARS = 100


def first_line_title(text: str) -> str | None:
    """A short first line that is not a sentence, followed by more text, reads as the title
    (as a person reads "The Solvay Conferences\n\nThe Solvay Conferences are..."); else None."""
    head, _, rest = text.strip().partition("\n")
    head = head.strip()
    if rest.strip() and 0 < len(head) <= TITLE_MAX_CHARS and head[-1] not in ".!?;:,…":
        return head
    return None


@register(".txt")
def load_text(path: Path, data: bytes) -> LoadedDoc:
    text = decode_text(data)
    return LoadedDoc(title=first_line_title(text) or path.stem, mime_type="text/plain", text=text)
