"""The parser registry: document mime type -> the parser that turns its row (and raw bytes)
into a DocStructure. The format modules (markdown, notes, pdf.parse) register themselves here;
pipeline.structure.build dispatches through it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipeline.config import StructureSettings
from pipeline.structure.model import DocStructure

# mime type -> parser(document row, raw file bytes or None, StructureSettings) -> DocStructure
Parser = Callable[[dict[str, Any], bytes | None, StructureSettings], DocStructure]
PARSERS: dict[str, Parser] = {}


def register(*mime_types: str) -> Callable[[Parser], Parser]:
    def deco(fn: Parser) -> Parser:
        for m in mime_types:
            PARSERS[m] = fn
        return fn

    return deco
