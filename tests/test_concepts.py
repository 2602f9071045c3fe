"""CONCEPT entities read as concepts (pipeline/extract/concepts.py): noun phrases, not verb
fragments, lone plurals or everyday words; English through lemminflect, Russian through
natasha's morphology, frequencies from wordfreq."""

from __future__ import annotations

import pytest

from pipeline.extract.concepts import reads_as_concept
from pipeline.extract.keyphrases import fast_keyphrases
from pipeline.storage import store


@pytest.mark.parametrize(
    ("phrase", "lang"),
    [
        ("special relativity", "en"),
        ("gold foil experiment", "en"),
        ("radium", "en"),
        ("soda ash", "en"),
        ("magnetic needle", "en"),  # a relational adjective names a kind
        ("теория относительности", "ru"),
        ("радиоактивность", "ru"),
    ],
)
def test_noun_phrases_and_rare_words_are_concepts(phrase, lang):
    assert reads_as_concept(phrase.split(), lang)


@pytest.mark.parametrize(
    ("phrase", "lang"),
    [
        ("laureates knew", "en"),  # ends in a verb
        ("taught mathematics", "en"),  # a verb inside
        ("manages", "en"),
        ("conferences today", "en"),  # ends in an adverb
        ("objections", "en"),  # a lone plural
        ("father", "en"),  # everyday words
        ("women", "en"),
        ("quantum_theory", "en"),  # markup, not a word
        ("settlement--one dozen", "en"),
        ("sixty dollars", "en"),
        ("bishop's face", "en"),
        ("seventh studio album", "en"),
        ("great hill", "en"),  # a gradable adjective describes
        ("younger brother", "en"),
        ("преподавал математику", "ru"),
        ("сегодня", "ru"),
        ("отец", "ru"),
    ],
)
def test_verb_fragments_plurals_and_everyday_words_are_not(phrase, lang):
    assert not reads_as_concept(phrase.split(), lang)


def test_the_keyphrase_scorer_keeps_only_concepts():
    text = (
        "The laureates knew one another well. Her father taught mathematics at a school "
        "for women. Pierre measured the radium emanation with a quartz electrometer."
    )
    got = fast_keyphrases(text, "en", 10, set())
    assert got and all(reads_as_concept(p.split(), "en") for p in got)
    assert not {"laureates knew", "father", "taught mathematics", "women"} & set(got)


def test_the_sample_index_has_no_verb_fragment_concept(sample_run):
    entities = store.read_table(sample_run[1], "entities")
    concepts = entities.filter(entities["type"] == "CONCEPT")["title"].to_list()
    assert concepts
    lower = [c for c in concepts if c == c.lower()]
    assert all(reads_as_concept(c.split(), "en") for c in lower), lower


def test_the_extractor_waits_for_a_lexicon_preload_in_another_thread(monkeypatch):
    """The lexicons a run prepared (pipeline.extract.lexicon_preload) load in a thread while
    its first steps run; the libraries' loaders are not written for two threads, so the
    extractor starts only once it has ended, and reads what a load in its own thread would."""
    import threading

    import polars as pl

    from pipeline.config import load_settings
    from pipeline.extract import lexicon_preload
    from pipeline.extract.nlp import NlpExtractor

    units = pl.DataFrame({"id": ["u1"], "text": ["Marie Curie studied radium in Paris."]})
    extractor = NlpExtractor(load_settings(None, {}).extraction)
    expected = extractor.extract(units)
    release, loading = threading.Event(), []

    def slow_load(language: str) -> None:
        loading.append(language)
        release.wait(10)

    monkeypatch.setattr(lexicon_preload, "_LOADING", [])
    monkeypatch.setattr(lexicon_preload, "_PREPARED", [])
    monkeypatch.setattr(lexicon_preload, "load", slow_load)
    lexicon_preload.prepare({"en", "ru"})
    lexicon_preload.start()
    done: list = []
    worker = threading.Thread(target=lambda: done.append(extractor.extract(units)))
    worker.start()
    worker.join(0.5)
    assert done == [] and loading == ["en"]  # held while English loads, Russian next
    release.set()
    worker.join(10)
    assert loading == ["en", "ru"]
    assert [f.equals(e) for f, e in zip(done[0], expected, strict=True)] == [True, True]
    lexicon_preload.start()  # once per process: nothing more starts
    assert len(lexicon_preload._LOADING) == 1


def test_released_lexicons_are_let_go_and_load_again_on_first_use():
    """After the extraction step (pipeline.extract.lexicon_preload.release) the process holds
    no lexicon: every cache is empty; a later extraction loads them again and reads the same."""
    import polars as pl
    import wordfreq
    from lemminflect.utils.Singleton import _Singleton

    from pipeline.config import load_settings
    from pipeline.extract import concepts, lexicon_preload
    from pipeline.extract.nlp import NlpExtractor

    units = pl.DataFrame({"id": ["u1"], "text": ["Marie Curie studied radium in Paris."]})
    extractor = NlpExtractor(load_settings(None, {}).extraction)
    expected = extractor.extract(units)
    assert reads_as_concept(["gold", "foil", "experiment"], "en")
    assert _Singleton._instances and wordfreq.get_frequency_dict.cache_info().currsize
    lexicon_preload.release()
    assert not _Singleton._instances
    assert wordfreq.get_frequency_dict.cache_info().currsize == 0
    assert concepts.lemmas.cache_info().currsize == concepts.everyday.cache_info().currsize == 0
    again = extractor.extract(units)
    assert [f.equals(e) for f, e in zip(again, expected, strict=True)] == [True, True]
    assert concepts.lemmas("houses", "en") == {"NOUN": {"house"}, "VERB": {"house"}}
