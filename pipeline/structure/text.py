"""Plain text as structure: one DOCUMENT section, a PARAGRAPH node per blank-line block
(pages kept where the text holds "\\f" page breaks); a data URI in it reads as `[image]`
(DocStructure.add_node), so a pasted 800 KB image is no thousand units of base64."""

from __future__ import annotations

import re

from pipeline.structure.model import DocStructure, position

_PARAGRAPHS = re.compile(r"\n[ \t]*\n+")


def parse_text(document_id: str, source_path: str, title: str, text: str) -> DocStructure:
    doc = DocStructure(document_id, source_path, title)
    for page_no, page in enumerate(text.split("\f"), start=1):
        # one positions list for the page's nodes (nothing edits a node's positions): a
        # 151 MB text has 618k paragraphs, and a list and dict each were 200 MB of them
        on_page = [position(page_no)]
        for para in _PARAGRAPHS.split(page):
            para = para.strip()
            if para:
                doc.add_node(doc.root_id, "PARAGRAPH", para, on_page)
    return doc
