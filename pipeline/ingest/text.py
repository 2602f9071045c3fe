"""Plain-text loader and the byte-to-text decoding every text format shares."""

from __future__ import annotations

import codecs
import re
from pathlib import Path

from pipeline.ingest.formats import LoadedDoc, LoadError, register

# Byte order marks -> (codec that strips it, name in reasons); UTF-32 before UTF-16, whose
# little-endian mark is the first half of UTF-32's.
BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig", "UTF-8"),
    (codecs.BOM_UTF32_LE, "utf-32", "UTF-32"),
    (codecs.BOM_UTF32_BE, "utf-32", "UTF-32"),
    (codecs.BOM_UTF16_LE, "utf-16", "UTF-16"),
    (codecs.BOM_UTF16_BE, "utf-16", "UTF-16"),
)


def decode_text(data: bytes) -> str:
    """Text by its byte order mark (UTF-8, UTF-16 or UTF-32, as Windows tools write it), else
    strict UTF-8 (no silent mojibake); newlines normalised to \\n. A NUL without a BOM, or
    in the decoded text, is binary content."""
    codec, name = next(((c, n) for bom, c, n in BOMS if data.startswith(bom)), ("utf-8", None))
    if name is None and b"\x00" in data:
        raise LoadError("binary content")
    try:
        text = data.decode(codec)
    except UnicodeDecodeError as e:
        raise LoadError(f"invalid {name or 'UTF-8'} at byte {e.start}") from None
    if "\x00" in text:
        raise LoadError("binary content")
    text = text.removeprefix("\ufeff")
    if "\r" in text:  # each replace copies the text: only when there is something to replace
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text or text.isspace():  # (not `strip()`: a copy of a file that may be huge)
        raise LoadError("empty file")
    return text


TITLE_MAX_CHARS = 100
_LEADING_SPACE = re.compile(r"\s*")
_NON_SPACE = re.compile(r"\S")


def first_line_title(text: str) -> str | None:
    """A short first line that is not a sentence, followed by more text, reads as the title
    (as a person reads "The Solvay Conferences\n\nThe Solvay Conferences are..."); else None."""
    start = _LEADING_SPACE.match(text).end()  # offsets, not strip(): no copy of the text
    end = text.find("\n", start)
    if end < 0:
        return None
    head = text[start:end].strip()
    rest = _NON_SPACE.search(text, end) is not None
    if rest and 0 < len(head) <= TITLE_MAX_CHARS and head[-1] not in ".!?;:,…":
        return head
    return None


@register(".txt")
def load_text(path: Path, data: bytes) -> LoadedDoc:
    text = decode_text(data)
    return LoadedDoc(title=first_line_title(text) or path.stem, mime_type="text/plain", text=text)
