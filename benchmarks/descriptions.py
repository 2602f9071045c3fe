"""How entity descriptions read: does the first sentence stand alone and name its entity, and
is any Markdown or HTML syntax left in descriptions and reports?

    python benchmarks/descriptions.py --output DIR      # an index's output folder

Why: the offline description of an entity is a ranking of its evidence sentences
(pipeline/graph/descriptions.py), and a reader (a person, or an LLM given the description
as context) reads its first sentence as what the entity is. A first sentence that opens
"Its participants included ...", "…knew one another well" or "In 1911 he travelled ..." in
someone else's description says nothing of the entity, and `[Ernest Rutherford](x.txt)` is
syntax, not text. Figures, for the index at DIR:

- entities: rows of the entities table.
- dangling opener: share of entities whose description's first sentence (the strict
  splitter, `pipeline.sentences.split_sentences`) opens, after opening quotes, brackets
  and dashes, with an ellipsis ("…", "..."), a lower-case letter, or a word of
  `pipeline.sentences.DANGLING_OPENERS` (pronouns such as It/Its/He/She/They/This/These,
  Russian Он/Она/Это/..., conjunctions such as And/But/Or/However); `sentence_kind` ==
  DANGLING, the rule the pipeline ranks by. An empty description counts as dangling.
- names its entity: share whose first sentence holds the entity's title or, for a title of
  several words, one of its capitalised words of 3+ letters, as a run of whole words (letters
  and digits; `_Osiris_` holds Osiris), both case- and accent-folded (NFKD, combining marks
  dropped, casefold); and the share where that name begins within the sentence's first
  NEAR_WORDS words (the entity as the subject, near the start).
- markup fragments, counted in entity descriptions, relationship descriptions, and report
  summaries + findings (summary and explanation): Markdown links `[text](url)` and images
  `![alt](src)`; HTML tags: a known element's (`<b>`, `<br/>`, `<a href="x">`,
  `markdown_inline.HTML_ELEMENTS`), any closing tag (`</x>`), any tag with a quoted
  attribute or self-closing (`<Badge text="new" />`), but not a bare `<DW53>` (a word of a
  plain-text corpus); `**strong**` / `__strong__` emphasis around text that opens with a
  letter, digit, quote or bracket and closes with one or with end punctuation (a dunder
  name such as `__init__` is a name, and `|__|___|` a plain-text table's rule, not
  emphasis).
"""

from __future__ import annotations

import argparse
import re
import sys
import unicodedata
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.sentences import DANGLING, sentence_kind, split_sentences  # noqa: E402
from pipeline.storage import store  # noqa: E402
from pipeline.structure.markdown_inline import HTML_ELEMENTS  # noqa: E402

_ELEMENTS = "|".join(sorted(HTML_ELEMENTS))
# emphasised text opens with a letter, digit, quote or bracket and closes with one or with
# end punctuation (not `__|___|` table rules)
_EMPHASISED = r"""(?=[^\W_]|["'“(])[^*_\n]*?(?<=[^\W_]|[.:;,!?)"'”])"""
MARKUP = re.compile(
    r"!?\[[^\[\]\n]*\]\([^()\s]*\)"  # [text](url), ![alt](src)
    rf"|</?(?i:{_ELEMENTS})(?:\s[^<>]*)?/?>"  # an HTML element's tag
    r"|</[A-Za-z][\w.:-]*\s*>|<[A-Za-z][\w.:-]*(?:\s+[\w:.-]+=[^<>]*)?\s*/?>(?<=/>|\">|'>)"
    rf"|\*\*{_EMPHASISED}\*\*"  # **strong**
    rf"|__(?![A-Za-z0-9]+__){_EMPHASISED}__"  # __strong__, not __init__
)
_WORD = re.compile(r"[^\W_]+")
NEAR_WORDS = 6  # "near its start": the name begins within the first NEAR_WORDS words


def fold(text: str) -> str:
    """Case- and accent-folded text."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def first_sentence(description: str) -> str:
    sentences = split_sentences(description or "")
    return sentences[0] if sentences else ""


def _words(text: str) -> list[str]:
    return _WORD.findall(fold(text))


def name_at(sentence: str, title: str) -> int | None:
    """The word index where `sentence` first holds `title`, or one of a multi-word title's
    capitalised words of 3+ letters; None where it holds neither."""
    words = _words(sentence)
    forms = [_words(title)]
    parts = title.split()
    if len(parts) > 1:
        forms += [_words(w) for w in parts if w[:1].isupper() and len("".join(_words(w))) >= 3]
    starts = [
        i
        for form in forms
        if form
        for i in range(len(words) - len(form) + 1)
        if words[i : i + len(form)] == form
    ]
    return min(starts) if starts else None


def markup_count(texts: list[str | None]) -> int:
    return sum(len(MARKUP.findall(t)) for t in texts if t)


def report_texts(reports: pl.DataFrame) -> list[str]:
    """Every report's summary and its findings' summaries and explanations."""
    findings = reports.select(pl.col("findings").explode().struct.unnest()).drop_nulls()
    return [
        *reports.get_column("summary").to_list(),
        *findings.get_column("summary").to_list(),
        *findings.get_column("explanation").to_list(),
    ]


def description_quality(output: Path) -> dict[str, float]:
    ents = store.read_table(output, "entities", ["title", "description"])
    rels = store.read_table(output, "relationships", ["description"])
    reports = store.read_table(output, "community_reports", ["summary", "findings"])
    firsts = [(t or "", first_sentence(d)) for t, d in ents.iter_rows()]
    at = [name_at(s, t) for t, s in firsts]
    n = max(len(firsts), 1)
    return {
        "entities": len(firsts),
        "dangling_pct": 100 * sum(not s or sentence_kind(s) == DANGLING for _, s in firsts) / n,
        "names_pct": 100 * sum(a is not None for a in at) / n,
        "near_pct": 100 * sum(a is not None and a < NEAR_WORDS for a in at) / n,
        "markup_entities": markup_count(ents.get_column("description").to_list()),
        "markup_relationships": markup_count(rels.get_column("description").to_list()),
        "markup_reports": markup_count(report_texts(reports)),
    }


def print_description_quality(output_dir: Path | str) -> dict[str, float]:
    q = description_quality(Path(output_dir))
    print(f"index: {output_dir}")
    print(f"  entities                                   {q['entities']:,}")
    print(f"  first sentence opens dangling (…, It, But) {q['dangling_pct']:.1f} %")
    print(f"  first sentence names its entity            {q['names_pct']:.1f} %")
    print(f"    ... within its first {NEAR_WORDS} words               {q['near_pct']:.1f} %")
    print(
        "  markup fragments: entities "
        f"{q['markup_entities']}, relationships {q['markup_relationships']}, "
        f"reports {q['markup_reports']}"
    )
    return q


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--output", type=Path, required=True, help="an index's output folder")
    print_description_quality(ap.parse_args(argv).output)


if __name__ == "__main__":
    main()
