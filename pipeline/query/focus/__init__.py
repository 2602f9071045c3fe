"""Focus context (the Doughnut "notes seed"): one note or section and its related notes.

In: a uri and the index tables (query/tables.py). Out: a SearchResult whose `data` is the
Overall JSON. Modules: graph (the note graph), priority (related notes by class),
note_shapes (the note shapes), context (budgeted context, answer).

Given a uri (a notebook note's own uri, or a Markdown/PDF section's `path#slug`, or a
document's path), the context holds the focus node itself — title, details, parent,
object, contextual path, and the uri-and-titles of its children, referrings and prior /
younger siblings — then related nodes ranked by priority until a token budget is spent:

    P1 parent, object, contextual path, object's contextual path   (all of P1 first)
    P2 children, reified children, prior siblings, younger siblings, referring notes
    P3 reified children's objects, parent's siblings, object's parent's siblings,
       referring subjects
    P4 cousins, object cousins, referring paths, referring cousins, distant object links

After P1, the classes are drawn 3:2:1 (three notes from P2, two from P3, one from P4,
repeat; an exhausted class drops out and the others go on). Within a class the relation
types take turns, one note each (so a small budget still sees every kind). A note counts
once, at its highest-priority occurrence (classes are claimed P1 -> P4, each in its
turn order), and the focus node never appears among its related notes. A note that does
not fit the remaining budget is skipped (it is not a draw); later, smaller ones may fit.
The budget covers the whole context text, the focus note first (its details take at
most FOCUS_DETAILS_SHARE of the budget, less if the focus block alone would not fit).
Bounds for hubs: LIST_LIMIT entries per focus list, CANDIDATES_PER_RELATION notes per
relation type, and drawing stops once not even an empty note fits (or after
MAX_CONSECUTIVE_SKIPS notes in a row over budget).

Definitions (all derived from sections / content_nodes / structure_edges):
  parent = parent_id; children = sections under it by seq; siblings = the parent's other
  children (prior nearest first, younger nearest first); contextual path = ancestors from
  the document root down to the parent (as related notes: nearest first); details = the
  first text nodes (PARAGRAPH, LIST_ITEM, BLOCK_QUOTATION) of the section; object = target
  of the REIFIES edge from the section; reified children = children with an object (the
  other children are "children"); referring notes = sources of REFERRING_EDGES into the
  section (a content-node endpoint, source or target, maps to its section; a section's
  reference to itself is dropped), in table order; referring subject = a referring note's
  parent; referring path = a referring note's ancestors;
  referring cousins = the referring subjects' children; cousins = children of the parent's
  siblings; object cousins = children of the object's parent's siblings; distant object
  links = notes referring to the focus's object or to a reified child's object.

Output shapes (the Doughnut graph RAG design), uri_and_title = "[title](uri)":
  BareNote {uri_and_title, details_truncated, parent_uri_and_title, object_uri_and_title}
  NoteWithContextualPath {contextualPath[], ...BareNote}
  FocusNote {children[], referrings[], prior_siblings[], younger_siblings[],
             ...NoteWithContextualPath}
  Overall {focusNote, related_notes[]}
A related note carries its contextualPath (NoteWithContextualPath) when it was reached
over a link (object, reified child's object, referring note, referring subject, distant
object link): its place in the tree then does not follow from the focus note's path.
Notes reached over the tree are BareNotes (their parent link places them).

Which edges refer: REIFIES and REFERS_TO (notes: a reification, a link in a note's details;
Markdown: a link to a document or heading) and CROSS_REFERENCES (PDF and Markdown: a
"see Section 3" / "Figure 2" in a content node, pointing at another section or at a node in
it) all say "this section is about / points the reader to that one". REFERENCES_NOTE and
REFERENCES_CITATION do not: a footnote or endnote is part of the section that calls it (its
text belongs there, not to another note), and a citation points to a bibliography entry —
the work cited, not a section of this corpus — so every citing section would become a
"referring note" of the References list, a hub that says nothing about the focus.

Speed: the lookups (rows by uri, parent, children by seq, object, referrers,
details) are built once per index with polars and cached on it; a query is dict lookups
plus token counting of the notes it considers (~1-3 ms at 100k sections).
"""
