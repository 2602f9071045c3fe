"""Settings of the stages that read documents: structure (PDF layout, OCR), chunking into
text units, and entity/relationship extraction.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pipeline.config.section import Section


class StructureSettings(Section):
    pdf_structure: Literal["layout", "heuristic"] = Field(
        "layout",
        description="how PDF structure is read: 'layout' classes page regions (headings, "
        "captions, footnotes, tables, page headers/footers, margin text) and orders them with "
        "pymupdf's layout model (~0.25 s of CPU a page, over worker processes: "
        "pipeline/pdf/layout/workers.py); "
        "'heuristic': font-size and position rules, ~5-50 ms a page, for very large corpora",
    )
    pdf_workers: int = Field(
        0,
        ge=0,
        description="layout path: processes that read PDF pages with the model, each on one "
        "thread: 0 = one a usable CPU, 1 = the index process alone (the model's threads on "
        "every core). Lower it where several steps run at once (a multiprocess executor)",
    )
    pdf_tables: bool = Field(
        False,
        description="heuristic path: detect tables with pymupdf find_tables (~0.15 s/page; "
        "the time spent is kept in the document section's metadata); the layout path takes "
        "tables, with their cells, from the model",
    )
    header_footer_margin: float = Field(
        0.12, description="top/bottom page fraction where running headers/footers are looked for"
    )
    header_footer_min_repeat: float = Field(
        0.3,
        description="a margin line repeating (digits ignored) on this share of pages is a "
        "running header/footer",
    )
    heading_max_words: int = Field(20, description="longer lines are never headings")
    footnote_zone: float = Field(
        0.4, description="footnotes are looked for in this bottom fraction of the page"
    )
    ocr: Literal["auto", "off"] = Field(
        "auto",
        description="scanned (image-only) PDF pages and pages whose text layer is unreadable "
        "(fonts without a Unicode map): 'auto' OCRs them when the optional OCR engine is "
        "installed (pip install 'docgraph[ocr]'; models in the package, CPU, ~seconds a page), "
        "else they are skipped with the reason; 'off' never OCRs",
    )


class ChunkingSettings(Section):
    chunk_size: int = Field(300, description="target max tokens (o200k) per text unit")
    overlap: int = Field(30, description="tokens of trailing sentences repeated at the next unit")
    min_size: int = Field(
        100,
        description="content-defined cuts are at least this many tokens apart (the anchor "
        "window); only forced splits of an over-long span or the last unit may be shorter",
    )
    cut_divisor: int = Field(
        3,
        description="a sentence end inside a paragraph is a cut candidate when its hash % "
        "divisor == 0 (paragraph, page and heading boundaries always are)",
    )
    method: Literal["smart", "simple", "semantic"] = Field(
        "smart",
        description="smart: chunks inside sections with a section-path prefix, tables whole, "
        "tiny sections merged; simple: the document text alone; semantic: smart's structure, "
        "cut where adjacent sentences' embeddings diverge (embeds every sentence: slow on CPU)",
    )
    heading_prefix: bool = Field(
        True,
        description="smart/semantic: start each unit with '# section path' (counted in chunk_size)",
    )
    semantic_percentile: float = Field(
        10.0,
        description="semantic: a boundary is a topic cut when its adjacent-sentence cosine is "
        "at or below this percentile of the section's boundaries",
    )
    semantic_window: int = Field(
        2, description="semantic: sentences averaged on each side of a boundary"
    )


# Answer tokens per text token a real extractor writes on dense text: HippoRAG 2 (Gutiérrez et
# al. 2025, arXiv:2502.14802) reports 3.0M completion tokens indexing MuSiQue's 11,656
# passages, 1.26M text tokens at their mean of 108 o200k tokens (HippoRAG's own MuSiQue
# passages, ../shared/data/musique): 2.4. (Its 9.2M prompt tokens hold its prompt templates
# too, so 3.0 / 9.2 is no answer ratio.) Prose holds fewer facts a token and gets less: a
# safe first guess, which the answers then correct.
MODEL_ANSWER_RATIO = 2.4


class ExtractionSettings(Section):
    extractor: str = "nlp"
    max_entities_per_unit: int = 40
    keyphrases_per_unit: int = 5
    keyphrase_method: str = Field(
        "rake", description="CONCEPT keyphrases: 'rake' (fast, default) or 'yake' (~50x slower)"
    )
    max_relation_distance: int = Field(
        1, description="relate entities in the same sentence or up to N sentences apart"
    )
    llm_pack_tokens: int = Field(
        2400, description="llm: short units of one document are packed into one call up to this"
    )
    llm_answer_ratio: float = Field(
        MODEL_ANSWER_RATIO,
        description="llm: answer tokens per text token assumed until the run's answers measure "
        "their own (packs are then sized by what they measure, so that answers fit in "
        "llm.max_tokens; see extract/llm_packing.py); default: a real extractor's on dense "
        "text (HippoRAG 2 on MuSiQue)",
    )
    llm_pack_max_units: int = Field(16, description="llm: at most this many units per call")
    gleanings: int = Field(0, description="llm: extra 'what was missed?' rounds per call")
    prompt_path: str | None = Field(
        None,
        description="llm: a file replacing extract_graph.txt, or a folder of <name>.txt prompt "
        "overrides",
    )
