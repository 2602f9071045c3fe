"""Offline descriptions a reader can use: the opening sentence stands alone and is the
entity's own (its document's defining sentence when it has one), and Markdown is text."""

from __future__ import annotations

import polars as pl

from pipeline.config import ExtractionSettings, GraphSettings
from pipeline.extract import NlpExtractor
from pipeline.graph.merge import merge_graph
from pipeline.graph.titles import unit_titles
from pipeline.sentences import DANGLING, sentence_kind, sentence_kind_expr, split_sentences
from pipeline.structure.markdown_inline import plain_markup

# (unit id, document title, text): a small wiki of linked articles, one unit each
ARTICLES = [
    (
        "u_bohr",
        "Niels Bohr",
        "Niels Bohr\n\nNiels Bohr was a Danish physicist who described the atom. In 1911 he "
        "travelled to England, where he worked with [Ernest Rutherford](ernest_rutherford.md) "
        "at the **University of Manchester**.",
    ),
    (
        "u_solvay",
        "The Solvay Conferences",
        "The Solvay Conferences\n\nThe Solvay Conferences are meetings of physicists in "
        "Brussels. Its participants included Ernest Rutherford, Marie Curie and Max Planck.",
    ),
    (
        "u_curie",
        "Marie Curie",
        "Marie Curie\n\nMarie Curie was a Polish physicist and chemist who discovered "
        "polonium. She founded the Radium Institute in Paris.",
    ),
    (
        "u_rutherford",
        "Ernest Rutherford",
        "Ernest Rutherford\n\nErnest Rutherford was a physicist from New Zealand. He studied "
        "at Canterbury College. Marie Curie and Ernest Rutherford met in Brussels in 1911.",
    ),
    (
        "u_nobel",
        "The Nobel Prize",
        "The Nobel Prize\n\nThe Nobel Prize is awarded in Stockholm. Marie Curie and Ernest "
        "Rutherford met in Brussels in 1911.",
    ),
]


def _graph(articles=ARTICLES) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(entities, relationships) as the index builds them: the offline extractor over the
    units, then the merge with each unit's document title."""
    units = pl.DataFrame(
        {
            "id": [u for u, _, _ in articles],
            "text": [t for _, _, t in articles],
            "document_id": [f"d_{u}" for u, _, _ in articles],
            "section_id": [f"s_{u}" for u, _, _ in articles],
            "seq": [0] * len(articles),
        }
    )
    documents = pl.DataFrame(
        {"id": [f"d_{u}" for u, _, _ in articles], "title": [t for _, t, _ in articles]}
    )
    sections = pl.DataFrame(
        {"id": [f"s_{u}" for u, _, _ in articles], "path": [[t] for _, t, _ in articles]}
    )
    xe, xr = NlpExtractor(ExtractionSettings()).extract(units)
    homes = unit_titles(units.drop("text"), documents, sections)
    ents, rels, _ = merge_graph(xe, xr, units, GraphSettings(), homes)
    return ents, rels


def _description(ents: pl.DataFrame, title: str) -> str:
    return ents.filter(pl.col("title") == title).get_column("description").item()


def _first(text: str) -> str:
    return split_sentences(text)[0]


def test_no_description_opens_with_a_dangling_sentence():
    ents, rels = _graph()
    for title, description in ents.select("title", "description").iter_rows():
        assert sentence_kind(_first(description)) != DANGLING, (title, description)
    for description in rels.get_column("description").to_list():
        assert sentence_kind(_first(description)) != DANGLING, description
    # Max Planck is only named by "Its participants included ...": a line naming him opens
    planck = _description(ents, "Max Planck")
    assert planck.startswith("Max Planck (person). Its participants included")


def test_another_subjects_sentence_does_not_open():
    """Rutherford's own article opens his description, not Bohr's "In 1911 he travelled"."""
    ents, _ = _graph()
    rutherford = _description(ents, "Ernest Rutherford")
    assert _first(rutherford) == "Ernest Rutherford was a physicist from New Zealand."


def test_entity_with_its_own_document_opens_with_its_defining_sentence():
    """Marie Curie's "met in Brussels" sentence comes from two units, her article's first
    sentence from one (and its title line says nothing): her article's sentence opens."""
    ents, _ = _graph()
    curie = _description(ents, "Marie Curie")
    assert _first(curie).startswith("Marie Curie was a Polish physicist and chemist")
    assert "Marie Curie and Ernest Rutherford met in Brussels in 1911." in curie
    assert curie.count("met in Brussels") == 1  # no repeats


def test_markdown_link_becomes_its_text():
    ents, rels = _graph()
    texts = [*ents.get_column("description").to_list(), *rels.get_column("description")]
    assert not [t for t in texts if "](" in t or "**" in t]
    manchester = _description(ents, "University of Manchester")
    assert "worked with Ernest Rutherford at the University of Manchester." in manchester


def test_plain_markup_reads_markdown_and_html_as_text():
    cases = {
        "See [Ernest Rutherford](ernest_rutherford.txt) and [[Marie Curie]].": (
            "See Ernest Rutherford and Marie Curie."
        ),
        "[![build](https://ci/badge.svg)](https://ci) **Bold** and *em*.": "build Bold and em.",
        "**Sign up for *The Stack*, with updates:** _Gutenberg_ _italics_.": (
            "Sign up for The Stack, with updates: Gutenberg italics."
        ),
        "A <b>tag</b>, <https://a.b/c> and <!-- a comment -->x.": "A tag, https://a.b/c and x.",
        "# Marie Curie": "Marie Curie",
        "Call `__init__` or `x**2` with __strong__ text.": (
            "Call __init__ or x**2 with strong text."
        ),
        "The <DW53> word and a < b > c stay.": "The <DW53> word and a < b > c stay.",
    }
    got = pl.DataFrame({"s": list(cases)}).select(plain_markup(pl.col("s"))).to_series()
    assert got.to_list() == list(cases.values())


def test_sentence_kind_reads_a_column_as_it_reads_a_string():
    sentences = [
        "Its participants included Marie Curie.",
        "…knew one another well: Ernest Rutherford taught Niels Bohr.",
        "In 1911 he travelled to England.",
        "Marie Curie",
        "Marie Curie was born in Warsaw.",
        "radioactivity is a property of some elements.",
        "However, Bohr left.",
        "Он родился в Москве.",
        "Москва — столица России.",
        "1911 was a year of conferences.",
    ]
    column = pl.DataFrame({"s": sentences}).select(sentence_kind_expr(pl.col("s"))).to_series()
    assert column.to_list() == [sentence_kind(s) for s in sentences]
    assert column.to_list() == [3, 3, 1, 2, 0, 3, 3, 3, 0, 0]
