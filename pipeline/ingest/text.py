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


@register(".txt")
def load_text(path: Path, data: bytes) -> LoadedDoc:
    return LoadedDoc(title=path.stem, mime_type="text/plain", text=decode_text(data))
