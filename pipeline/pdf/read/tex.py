"""Text set in TeX's bitmap fonts, read through the fonts' TeX encodings.

pdfTeX with `\\usepackage[T1]{fontenc}` and no Type 1 version of the EC fonts (cm-super), and
dvips with bitmap Computer Modern, embed Type 3 fonts whose glyphs are named /a28 and that have
no Unicode map: MuPDF gives each glyph's slot in the font, which is its character only where
the TeX encoding agrees with ASCII. Ligatures come out as control characters ("\\x1crst" for
"first", "e\\x1bects" for "effects"; Python's `split` even reads \\x1c-\\x1f as spaces), T1's
quotes and dashes as \\x10, \\x11, \\x15. The slot is read through the font's encoding: T1
(the Cork encoding) or OT1 (Knuth's). Which one a font uses its text tells: ligature slots
inside words (T1 0x1B-0x1F, OT1 0x0B-0x0F), T1's quotes in pairs and its dashes, when they
are most of its control characters. A font without that evidence (a dingbat, a math font,
glyph ids as codes: an unreadable layer, for OCR) keeps its characters.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

_ACCENT = ""  # a TeX accent glyph over a letter the encoding lacks: the letter is kept
# The LaTeX T1 encoding's slots 0x00-0x1F and 0x7F (the rest agree with Latin-1 where MuPDF
# reads them); accents are dropped, the compound-word mark and the per-mille's zero are empty.
T1 = str.maketrans(
    {i: _ACCENT for i in range(0x0D)}
    | dict(zip(range(0x0D, 0x17), "‚‹›“”„«»–—", strict=True))
    | {0x17: "", 0x18: "", 0x19: "ı", 0x1A: "ȷ", 0x1B: "ff", 0x1C: "fi", 0x1D: "fl"}
    | {0x1E: "ffi", 0x1F: "ffl", 0x7F: "-"}
)
# OT1 (cmr and its kin): Greek capitals, ligatures, dotless letters, accents, ß æ œ ø Æ Œ Ø.
OT1 = str.maketrans(
    dict(zip(range(0x0B), "ΓΔΘΛΞΠΣΥΦΨΩ", strict=True))
    | {0x0B: "ff", 0x0C: "fi", 0x0D: "fl", 0x0E: "ffi", 0x0F: "ffl", 0x10: "ı", 0x11: "ȷ"}
    | {i: _ACCENT for i in range(0x12, 0x19)}
    | dict(zip(range(0x19, 0x20), "ßæœøÆŒØ", strict=True))
)
# OT1's printable slots that hold other characters than ASCII's: read so only in a font's
# spans known to be OT1 (a page's whole text may mix in fonts where they are ASCII).
OT1_PRINTABLE = str.maketrans(
    {0x22: "”", 0x3C: "¡", 0x3E: "¿", 0x5C: "“", 0x7B: "–", 0x7C: "—"}
    | {0x7D: _ACCENT, 0x7E: _ACCENT, 0x7F: _ACCENT}
)

# in a page's plain text a tab and a newline are MuPDF's own, not a glyph's slot
_TEXT = {"T1": T1 | {0x09: 0x09, 0x0A: 0x0A}, "OT1": OT1 | {0x09: 0x09, 0x0A: 0x0A}}
_SPANS = {"T1": T1, "OT1": OT1 | OT1_PRINTABLE}

_L = r"[^\W\d_]"
# a ligature slot inside a word: a letter on each side, or two on one side
_T1_LIGATURE = re.compile(rf"{_L}[\x1b-\x1f]{_L}|[\x1b-\x1f]{_L}{{2}}|{_L}{{2}}[\x1b-\x1f]")
_OT1_LIGATURE = re.compile(rf"{_L}[\x0b-\x0f]{_L}|[\x0b-\x0f]{_L}{{2}}|{_L}{{2}}[\x0b-\x0f]")
_T1_QUOTES = re.compile(r"\x10[^\x10\x11\n]{1,300}\x11")
_T1_DASHES = re.compile(r"(?<=[\w ])[\x15\x16](?=[\w ])")
_SLOTS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # no tab, no newline


def tex_encoding(text: str) -> str | None:
    """The TeX encoding ("T1", "OT1") whose slots `text`'s control characters are, or
    None; one only when they are mostly its ligatures (T1: also its quotes and dashes). A
    font without a Unicode map whose codes are glyph ids gives control characters everywhere
    (a space each word): no TeX encoding, an unreadable text layer (`ocr_engine`)."""
    slots = len(_SLOTS.findall(text))
    if not slots:
        return None
    t1 = len(_T1_LIGATURE.findall(text))
    t1_all = t1 + 2 * len(_T1_QUOTES.findall(text)) + len(_T1_DASHES.findall(text))
    ot1 = len(_OT1_LIGATURE.findall(text))
    if ot1 > t1 and ot1 >= slots / 2:
        return "OT1"
    return "T1" if t1_all > ot1 and t1_all >= slots / 2 else None


def decode_text(text: str) -> str:
    """A page's plain text with its control characters read as the TeX encoding they show
    (its fonts are not known apart here: OT1's printable slots stay as they are)."""
    encoding = tex_encoding(text)
    return text if encoding is None else text.translate(_TEXT[encoding])


def decode_spans(d: dict[str, Any]) -> None:
    """The spans of `d` (page.get_text("dict")) read through their font's TeX encoding, per
    font name, where the font's text on the page shows one (a page without a control
    character, nearly every page, costs one scan of its spans)."""
    spans = [s for b in d["blocks"] for line in b.get("lines", ()) for s in line["spans"]]
    if not any(_SLOTS.search(s["text"]) for s in spans):
        return
    by_font: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for span in spans:
        by_font[span["font"]].append(span)
    for same_font in by_font.values():
        encoding = tex_encoding(" ".join(s["text"] for s in same_font))
        for span in same_font if encoding else ():
            span["text"] = span["text"].translate(_SPANS[encoding])
