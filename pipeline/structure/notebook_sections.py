"""A notebook export as structure: one NOTE section per note (uri = the note's uri),
nested by parent, ordered by sibling order (`seq`); the note's title as a HEADING node and
its details as one PARAGRAPH node. Relations all derive from the tables: parent =
parent_id, children/siblings = same parent by seq, object = the REIFIES edge from a
reification note's section, referring notes = REIFIES/REFERS_TO edges into a section.

REIFIES edges and links in details (`[text](note-uri)`, `[[Note title]]`, relative paths)
go through pipeline.structure.links, so an object or a linked note in another notebook of
the corpus resolves too.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from pipeline.ingest.load_notebooks import MIME_TYPE, note_tree, parse_notes
from pipeline.structure.markdown import extract_links, parse_markdown
from pipeline.structure.model import DocStructure, position
from pipeline.structure.parsers import register


@register(MIME_TYPE)
def parse_notes_document(
    doc: dict[str, Any], raw: bytes | None, settings: Any = None
) -> DocStructure:
    if raw is None:  # the file changed or is gone: its rendered text is all there is
        out = parse_markdown(doc["id"], doc["source_path"], doc["title"], doc["text"] or "")
        out.warnings.append("notes file not available; structure read from the rendered text")
        return out
    notes, _, _ = parse_notes(PurePosixPath(doc["source_path"]), raw)
    tree, _ = note_tree(notes)
    out = DocStructure(doc["id"], doc["source_path"], doc["title"])
    section: dict[str, str] = {}
    for note, depth in tree:
        parent = out.root_id if depth == 0 else section[note.parent_uri or ""]
        meta: dict[str, Any] = {}
        if note.object_uri:
            meta["object_uri"] = note.object_uri
        if note.sibling_order is not None:
            meta["sibling_order"] = note.sibling_order
        sid = out.add_section(parent, "NOTE", note.title, 1, uri=note.uri, metadata=meta)
        section[note.uri] = sid
        out.add_node(sid, "HEADING", note.title, [position(1)])
        if note.details:
            nid = out.add_node(sid, "PARAGRAPH", note.details, [position(1)])
            for link in extract_links(note.details, {}):
                out.links.append({"source_id": nid, **link})
        if note.object_uri:
            out.links.append(
                {
                    "source_id": sid,
                    "href": note.object_uri,
                    "text": note.title,
                    "kind": "object",
                    "type": "REIFIES",
                }
            )
    return out
