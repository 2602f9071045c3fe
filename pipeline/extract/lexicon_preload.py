"""The offline extractor's lexicons, loaded ahead of the extraction step in a thread.

Why: the extractor reads words' parts of speech and frequencies from lexicons that load on
first use (pipeline.extract.concepts, pipeline.extract.russian): English (lemminflect and
wordfreq) ~0.5 s and 114 MB, Russian (natasha's models, pymorphy2 and wordfreq) ~2 s and
384 MB. A nightly edit extracts a few text units, and that load was most of its extraction
step (0.65-0.77 s of it at 40k documents, English). When a run's steps share its process,
the run (app.run) `prepare`s the languages the changed files had in the published version
(pipeline.ingest.find_stale.files_to_run) and its first per-document step `start`s the load,
which then overlaps the documents, structure and chunks steps on the other core.

The libraries' lazy loaders are not written for two threads: the extractor `wait`s for the
load to end before its first word, so a lexicon is never loaded by two threads at once.

Once the run's extraction is done the extraction step `release`s them: nothing after it
reads a lexicon, and the corpus-wide steps that follow hold the process's largest frames
(English: ~76 of the 110 MB go back to the OS; a later run in the process loads them again).
"""

from __future__ import annotations

import contextlib
import sys
import threading

_PREPARED: list[str] = []  # the languages to load (`prepare`)
_LOADING: list[threading.Thread] = []  # the load started in this process, if any


def load(language: str) -> None:
    """Load the lexicons the extractor reads for `language` ("en", "ru"; others have none)."""
    if language not in ("en", "ru"):
        return
    from wordfreq import zipf_frequency

    from pipeline.extract import concepts

    word = {"en": "houses", "ru": "дома"}[language]
    concepts.lemmas(word, language)
    zipf_frequency(word, language)
    if language == "en":
        concepts.gradable("good")  # lemminflect's inflection table
    else:
        from pipeline.extract.russian import russian_names

        russian_names(word)  # natasha's segmenter and taggers


def prepare(languages: frozenset[str] | set[str]) -> None:
    """Have this process's first `start` load the lexicons of `languages` (app.run)."""
    _PREPARED.clear()
    _PREPARED.extend(sorted(languages))


def start() -> None:
    """Start loading the prepared lexicons in a thread, once per process (the run's first
    per-document step calls it: started with the run, before Dagster's own set-up, the
    load held the interpreter ~0.5 s from that set-up)."""
    if _LOADING or not _PREPARED:
        return
    thread = threading.Thread(
        target=_load_quietly,
        args=(list(_PREPARED),),
        name="docgraph-lexicons",
        daemon=True,
    )
    _LOADING.append(thread)
    thread.start()


def _load_quietly(languages: list[str]) -> None:
    try:
        for language in languages:
            load(language)
    except Exception:  # noqa: BLE001 - the extractor's first use loads it again, and says why
        return


def wait() -> None:
    """Return once no preload is running (a failed one leaves the first use to load)."""
    for thread in _LOADING:
        thread.join()


def release() -> None:
    """Let go of every lexicon this process loaded (their caches; the libraries load them
    again on first use). Reaches into wordfreq's and lemminflect's caches: a version without
    them keeps its lexicons."""
    wait()
    _LOADING.clear()
    from pipeline.extract import concepts, russian

    for cached in (concepts.lemmas, concepts.gradable, concepts.everyday, russian._models):
        cached.cache_clear()
    with contextlib.suppress(AttributeError):
        if (wordfreq := sys.modules.get("wordfreq")) is not None:
            wordfreq.get_frequency_dict.cache_clear()
            wordfreq.get_frequency_list.cache_clear()
            wordfreq._wf_cache.clear()
    with contextlib.suppress(ImportError, AttributeError):
        if "lemminflect" in sys.modules:
            from lemminflect.utils.Singleton import _Singleton

            _Singleton._instances.clear()
