"""A seeded corpus and sequence of operations on it, for tests/test_incremental_equality.py.

Why its own module: the generator is what makes the equality test mean something, and it is
long. Documents are short and share what an incremental tail could get wrong across
documents: sentences (MuSiQue's; so entities, relationships and their descriptions),
a family of documents on one topic (SAME_TOPIC neighbours beyond `max_connections`),
Markdown links (relative, with anchors to the target's headings, and wikilinks; some to
documents only a later addition creates) and one entity written in two forms. Operations
edit sentences, add, delete, move and rename documents, retitle a section (breaking links'
anchors) and flip the entity's most frequent form (its title, in documents not touched).
"""

from __future__ import annotations

import json
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

SEED = 49
N_DOCS = 200  # documents of the first index
N_OPS = 20  # operations after it
PASSAGES = 120  # MuSiQue passages the sentences come from: documents i and i + 120 share one
# every FAMILY-th document is on the first passages: more sections on one topic than
# same_topic.max_connections, so a change to one moves the SAME_TOPIC edges of others
FAMILY = 8
FOLDERS = ("notes", "notes/archive", "wiki", "wiki/people", "misc")
HEADINGS = ("History", "Career", "Legacy", "Works", "Reception", "Geography")

# One entity in two surface forms (one key, pipeline.graph.titles): its title is the more
# frequent form, which the `form` operation flips from FORM_A to FORM_B.
FORM_A, FORM_B = "Karl-Heinz Brandt", "Karl Heinz Brandt"
FORM_SENTENCE = "{} founded the Brandt Foundry in Leipzig with Maria Oster in 1871."
FORM_LATER = "{} later sold the Brandt Foundry to the city of Dresden."
FORM_DOCS = (0, 1, 2)  # documents 0 and 1 use FORM_A, 2 FORM_B; never deleted or moved


def _split(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9])", text) if len(s) > 20]


@dataclass
class Doc:
    title: str
    sections: list[tuple[str, list[str]]]  # (heading, sentences); the first heading ""
    links: list[str] = field(default_factory=list)  # doc numbers, or "w<n>": a wikilink


class Corpus:
    """Documents in memory, written to `root` after each operation: document i's path,
    title, sections of sentences and links, all from a seeded generator."""

    def __init__(self, root: Path, passages: list[dict]):
        self.root = root
        self.rng = random.Random(SEED)
        self.passages = [(p["title"], _split(p["text"]) or [p["text"]]) for p in passages]
        self.pool = [s for _, ss in self.passages for s in ss]
        self.docs: dict[int, Doc] = {}
        self.paths: dict[int, str] = {}
        self.next = 0
        self.removed: set[str] = set()  # sentences an operation took out of a document

    def path_of(self, i: int, folder: str | None = None, stem: str | None = None) -> str:
        ext = "txt" if i % 4 == 3 else "md"
        return f"{folder or FOLDERS[i % len(FOLDERS)]}/{stem or f'doc{i:03d}'}.{ext}"

    def make(self, i: int) -> Doc:
        rng = self.rng
        title, sents = self.passages[i % PASSAGES]
        if i % FAMILY == 0:  # the family's three passages and one sentence of its own
            sents = [s for _, ss in self.passages[:3] for s in ss] + [rng.choice(self.pool)]
        else:
            sents = list(sents) + rng.sample(self.pool, rng.randint(1, 3))
        if i in FORM_DOCS:
            form = FORM_B if i == FORM_DOCS[-1] else FORM_A
            sents.insert(1, FORM_SENTENCE.format(form))
        cut = max(1, len(sents) // 3)
        headings = rng.sample(HEADINGS, 2)
        sections = [("", sents[:cut]), (headings[0], sents[cut : 2 * cut])]
        sections.append((headings[1], sents[2 * cut :]))
        links = [str(rng.randrange(N_DOCS + N_OPS)) for _ in range(rng.randint(0, 2))]
        links += [f"w{rng.randrange(N_DOCS + N_OPS)}" for _ in range(rng.randint(0, 1))]
        return Doc(f"{title} ({i})", sections, links)

    def render(self, i: int) -> str:
        doc, path = self.docs[i], self.paths[i]
        if path.endswith(".txt"):
            body = [" ".join(ss) for _, ss in doc.sections if ss]
            return doc.title + "\n\n" + "\n\n".join(body) + "\n"
        parts = [f"# {doc.title}"]
        for heading, ss in doc.sections:
            parts += ([f"## {heading}"] if heading else []) + ([" ".join(ss)] if ss else [])
        refs = []
        for link in doc.links:
            if link.startswith("w"):
                refs.append(f"[[doc{int(link[1:]):03d}]]")
                continue
            j = int(link)
            target = self.paths.get(j, self.path_of(j))
            rel = os.path.relpath(target, os.path.dirname(path))
            # the target's heading as it is now (a retitle breaks the anchor), else a guess
            heading = self.docs[j].sections[1][0] if j in self.docs else HEADINGS[j % 6]
            anchor = heading.lower()
            refs.append(f"[page {j}]({rel}#{anchor})")
        if refs:
            parts += ["## See also", " ".join(f"See {r}." for r in refs)]
        return "\n\n".join(parts) + "\n"

    def add(self) -> int:
        i = self.next
        self.next += 1
        self.docs[i], self.paths[i] = self.make(i), self.path_of(i)
        self.write(i)
        return i

    def write(self, i: int) -> None:
        path = self.root / self.paths[i]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.render(i))

    def remove(self, i: int) -> None:
        (self.root / self.paths.pop(i)).unlink()
        del self.docs[i]

    # ---- operations: each returns a line for the log
    def gone(self) -> set[str]:
        """Sentences operations removed that no document holds any more."""
        kept = {s for doc in self.docs.values() for _, ss in doc.sections for s in ss}
        return self.removed - kept

    def pick(self, spare_form: bool = False) -> int:
        ids = sorted(i for i in self.docs if not (spare_form and i in FORM_DOCS))
        return self.rng.choice(ids)

    def _sentence_at(self, i: int) -> tuple[list[str], int]:
        sections = [ss for _, ss in self.docs[i].sections if ss]
        ss = self.rng.choice(sections)
        return ss, self.rng.randrange(len(ss))

    def op_append(self) -> str:
        i = self.pick()
        ss = self.rng.choice([ss for _, ss in self.docs[i].sections])
        ss.append(self.rng.choice(self.pool))
        self.write(i)
        return f"append a sentence to {self.paths[i]}"

    def op_replace(self) -> str:
        i = self.pick()
        ss, k = self._sentence_at(i)
        self.removed.add(ss[k])
        ss[k] = self.rng.choice(self.pool)
        self.write(i)
        return f"replace sentence {k} of {self.paths[i]}"

    def op_delete_sentence(self) -> str:
        i = self.pick(spare_form=True)
        ss, k = self._sentence_at(i)
        self.removed.add(ss.pop(k))
        self.write(i)
        return f"delete sentence {k} of {self.paths[i]}"

    def op_add(self) -> str:
        return f"add {self.paths[self.add()]}"

    def op_delete(self) -> str:
        i = self.pick(spare_form=True)
        path = self.paths[i]
        self.removed.update(s for _, ss in self.docs[i].sections for s in ss)
        self.remove(i)
        return f"delete {path}"

    def op_move(self) -> str:
        i = self.pick(spare_form=True)
        old = self.paths[i]
        folder = self.rng.choice([f for f in FOLDERS if not old.startswith(f + "/")])
        stem = f"doc{i:03d}" if self.rng.random() < 0.5 else f"moved{i:03d}"
        (self.root / old).unlink()
        self.paths[i] = self.path_of(i, folder, stem)
        self.write(i)
        return f"move {old} to {self.paths[i]}"

    def op_retitle(self) -> str:
        i = self.rng.choice(sorted(i for i, p in self.paths.items() if p.endswith(".md")))
        doc = self.docs[i]
        k = self.rng.randrange(1, len(doc.sections))
        heading, ss = doc.sections[k]
        new = self.rng.choice([h for h in HEADINGS if h != heading])
        doc.sections[k] = (new, ss)
        self.write(i)
        return f"retitle section {heading!r} of {self.paths[i]} to {new!r}"

    def op_form(self) -> str:
        """Two more mentions of FORM_B in documents that had none: it becomes the title."""
        others = sorted(i for i in self.docs if i not in FORM_DOCS)
        for i in self.rng.sample(others, 2):
            self.docs[i].sections[-1][1].append(FORM_LATER.format(FORM_B))
            self.write(i)
        return f"flip {FORM_A!r} to {FORM_B!r}"


KINDS = ("append", "replace", "delete_sentence", "add", "delete", "move", "retitle", "form")
COMMON = ("append", "replace", "delete_sentence", "add", "delete", "move", "retitle")


def operations() -> list[str]:
    """N_OPS operation kinds, seeded: each kind once, the rest drawn from the common ones."""
    rng = random.Random(SEED + 1)
    kinds = list(KINDS) + rng.choices(COMMON, k=N_OPS - len(KINDS))
    rng.shuffle(kinds)
    return kinds


def first_corpus(root: Path, musique: Path) -> Corpus:
    """The first N_DOCS documents, written under `root`, from the first PASSAGES passages of
    MuSiQue (`musique`: its corpus JSON)."""
    corpus = Corpus(root, json.loads(musique.read_text())[:PASSAGES])
    for _ in range(N_DOCS):
        corpus.add()
    return corpus
