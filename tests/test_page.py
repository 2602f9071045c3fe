"""The query page of `docgraph serve` (app/serve/page.py), driven in a real headless Chromium
over its DevTools protocol: a question typed and Enter pressed, the answer and its citations,
a PDF citation's page with its boxes highlighted (canvas pixels checked), a text citation's
section with the passage marked, an entity opened from the graph panel, global mode's
reports, the messages for an unknown mode and a failed request, and an index whose document
is titled like an XSS payload, with an entity named so by the (fake) model, that runs
nothing. Without a browser: the security headers,
and the 404s of the page images that must read no file."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

import pymupdf
import pytest
from browser import CHROMIUM, Browser
from conftest import needs_system_tool, write_report_pdf
from test_serve import running

from app.run import run_index
from app.serve.page_images import NotServed, PageImages
from app.serve.server import open_index
from pipeline.config import load_settings
from pipeline.storage import store

needs_chromium = needs_system_tool("chromium", CHROMIUM is not None)
PDF_QUESTION = "Who directed the Cavendish Laboratory?"
PDF_TITLE = "Laboratories of Modern Physics"
XSS_TITLE = "<img src=x onerror=window.__xss=1>"
XSS_ENTITY = XSS_TITLE.strip("<>")  # the entity's title: its description keeps the payload


def get(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def post(url: str, body: dict) -> dict:
    data = json.dumps(body).encode("utf-8")
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def _open(inp: Path, out: Path):
    return open_index(
        str(out), load_settings(None, {"output_dir": str(out), "input_dir": str(inp)})
    )


@pytest.fixture(scope="module")
def served(sample_index):
    """The sample corpus plus a two-page PDF, served; (index, base URL)."""
    inp, out, _, _ = sample_index
    index = _open(inp, out)
    with running(index) as url:
        yield index, url


def _xss_extraction(messages: list[dict]) -> str:
    """The fake LLM's answers, its extraction also naming an entity like an XSS payload
    (related to Marie Curie): what a model may well return for such a text."""
    from pipeline.llm.fake_answers import default_responder

    answer = default_responder(messages)
    try:
        blocks = json.loads(answer)
    except ValueError:
        return answer
    if not isinstance(blocks, dict) or not all(
        isinstance(b, dict) and "entities" in b for b in blocks.values()
    ):
        return answer
    for block in blocks.values():
        block["entities"].append(
            {
                "title": XSS_TITLE,
                "type": "ORGANIZATION",
                "description": f"{XSS_TITLE} is an institute in Paris.",
            }
        )
        block.setdefault("relationships", []).append(
            {
                "source": "Marie Curie",
                "target": XSS_TITLE,
                "type": "RELATED_TO",
                "description": f"Marie Curie directed {XSS_TITLE}.",
                "strength": 8,
            }
        )
    return json.dumps(blocks, ensure_ascii=False)


@pytest.fixture(scope="module")
def xss_served(tmp_path_factory):
    """An index of one Markdown document whose title and heading are an XSS payload, built
    in LLM mode by a fake model that also names an entity so; served offline."""
    from conftest import write_llm_config

    from pipeline.llm.fake_server import FakeLlm

    root = tmp_path_factory.mktemp("xss-page")
    inp, out = root / "input", root / "output"
    inp.mkdir()
    body = (
        f"# {XSS_TITLE}\n\n{XSS_TITLE} was founded by Marie Curie in Paris in 1909. "
        f"Marie Curie directed {XSS_TITLE} and worked there with Irène Curie.\n"
    )
    (inp / "payload.md").write_text(body, encoding="utf-8")
    with FakeLlm(responder=_xss_extraction) as fake, pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_API_KEY", "sk-test")
        config = write_llm_config(root / "llm.yaml", fake.base_url)
        done = run_index(config, str(inp), str(out), log_level="ERROR")
    assert done.success
    titles = store.read_table(out, "entities")["title"].to_list()
    assert XSS_ENTITY in titles, titles  # the merge cleans a title's brackets away
    with running(_open(inp, out)) as url:
        yield url


@pytest.fixture(scope="module")
def empty_served(tmp_path_factory):
    """An index of a folder whose one file is empty: no text units."""
    root = tmp_path_factory.mktemp("empty-page")
    inp, out = root / "input", root / "output"
    inp.mkdir()
    (inp / "empty.txt").write_bytes(b"")
    assert run_index(input_dir=str(inp), output_dir=str(out), log_level="ERROR").success
    with running(_open(inp, out)) as url:
        yield url


def test_page_and_assets_carry_the_security_headers(served):
    _, url = served
    for path, kind in [
        ("/", "text/html"),
        ("/assets/page.js", "text/javascript"),
        ("/assets/page.css", "text/css"),
        ("/assets/vis-network.min.js", "text/javascript"),
        ("/assets/vis-network.LICENSE.txt", "text/plain"),
    ]:
        status, headers, body = get(url + path)
        assert status == 200 and headers["content-type"].startswith(kind), path
        csp = headers["content-security-policy"]
        assert "default-src 'self'" in csp and "script-src 'self'" in csp
        assert "unsafe-inline" not in csp and "http" not in csp and "*" not in csp
        assert headers["x-content-type-options"] == "nosniff"
    html = get(url + "/")[2].decode()
    assert "<script>" not in html and "style=" not in html and "http" not in html
    status, headers, _ = get(url + "/docs")  # FastAPI's API docs still load their CDN files
    assert status == 200 and "content-security-policy" not in {h.lower() for h in headers}
    assert get(url + "/assets/graph.js")[0] == 404
    assert get(url + "/assets/..%2fserver.py")[0] == 404


def test_page_images_refuse_what_the_index_does_not_hold(served, monkeypatch):
    """404 for an unknown document, a Markdown document, `..`, a page out of range; no
    file is opened or read for any of them; a good page is rendered once, then cached."""
    index, url = served
    docs = index.documents
    pdf = docs.filter(docs["source_path"] == "laboratories.pdf")["id"][0]
    text = docs.filter(docs["source_path"] == "marie_curie.md")["id"][0]
    opened, read = [], []
    real_open, real_read = pymupdf.open, Path.read_bytes
    monkeypatch.setattr(pymupdf, "open", lambda *a, **k: opened.append(a) or real_open(*a, **k))
    monkeypatch.setattr(Path, "read_bytes", lambda p: read.append(p) or real_read(p))
    refused = [
        f"/page/{'0' * 32}/1.png",  # not in the index
        f"/page/{text}/1.png",  # in the index, not a PDF
        f"/page/{pdf}/0.png",
        f"/page/{pdf}/3.png",  # the PDF has two pages
        f"/page/{pdf}/-1.png",
        f"/page/{pdf}/99999999999999999999.png",
        f"/page/{pdf}/one.png",
        "/page/../laboratories.pdf/1.png",
        "/page/%2e%2e/1.png",
        f"/page/{pdf}%2f..%2f..%2fetc/1.png",
        f"/page/{pdf}/..%2f1.png",
        f"/page/{'a' * 200}/1.png",
        "/entity/no-such-entity",
        f"/entity/{'a' * 129}",
        "/section/..",
        "/section/no-such-section",
    ]
    for path in refused:
        status, _, body = get(url + path)
        assert status == 404, (path, status, body)
    assert opened == [] and read == []
    status, headers, png = get(f"{url}/page/{pdf}/2.png")
    assert status == 200 and png.startswith(b"\x89PNG") and headers["x-page-zoom"] == "1.5"
    assert get(f"{url}/page/{pdf}/2.png")[2] == png
    assert len(opened) == 1  # the second came from the cache


def _pixels_in(browser: Browser, box: dict, zoom: float) -> tuple[int, int]:
    """(highlight-coloured pixels, all pixels) of the canvas inside a box (PDF points)."""
    x, y = int(box["x0"] * zoom) + 3, int(box["y0"] * zoom) + 3
    w, h = int((box["x1"] - box["x0"]) * zoom) - 6, int((box["y1"] - box["y0"]) * zoom) - 6
    return browser.evaluate(
        f"""(function () {{
        var d = document.getElementById('pdf').getContext('2d')
          .getImageData({x}, {y}, {w}, {h}).data, n = 0;
        for (var i = 0; i < d.length; i += 4)
          if (d[i] > 235 && d[i + 1] > 210 && d[i + 1] < 245
              && d[i + 2] > 115 && d[i + 2] < 165) n++;
        return [n, d.length / 4];
        }})()"""
    )


def _ask(browser: Browser, url: str | None, mode: str, question: str) -> None:
    """Ask in `mode`: on a freshly opened page (`url`), or on the page open."""
    if url:
        browser.navigate(url + "/#mode=" + mode)
        browser.wait_for("document.body.dataset.state === 'idle'")
    else:
        browser.evaluate(f"document.getElementById('mode').value = {json.dumps(mode)}")
        browser.evaluate("document.getElementById('question').value = ''")
    browser.type_and_enter("#question", question)
    browser.wait_for("document.body.dataset.state === 'done'")


@needs_chromium
def test_page_asks_and_shows_the_evidence(served, tmp_path):
    index, url = served
    result = post(url + "/query/local", {"query": PDF_QUESTION})
    cites = result["citations"]
    pdf_n = next(c["n"] for c in cites if c["document_title"] == PDF_TITLE)
    text_n = next(c["n"] for c in cites if c["source_path"].endswith((".md", ".txt")))
    unit = next(r for r in result["records"] if r["id"] == cites[pdf_n - 1]["id"])
    # the highlight: the boxes of the cited sentence's content node, not the whole unit's
    section = json.loads(get(f"{url}/section/{unit['section_id']}?unit={unit['id']}")[2])
    sentence = " ".join(cites[pdf_n - 1]["sentence"].split())
    nodes = [n for n in section["nodes"] if n["cited"] and sentence in " ".join(n["text"].split())]
    boxes = [b for n in nodes for b in n["boxes"] if b["page"] == 1]
    others = [
        p
        for p in unit["positions"]
        if p["page"] == 1 and p["x1"] > p["x0"] and not any(p["y0"] == b["y0"] for b in boxes)
    ]
    assert len(nodes) == 1 and boxes and others  # the unit holds the heading and the title too
    with Browser(tmp_path / "profile") as browser:
        _ask(browser, url, "local", PDF_QUESTION)
        assert browser.evaluate("document.body.dataset.citations") == str(len(cites))
        shown = browser.evaluate(
            "[...document.querySelectorAll('#citations li')].map(e => e.textContent)"
        )
        assert len(shown) == len(cites) and PDF_TITLE in shown[pdf_n - 1]
        answer = browser.evaluate("document.getElementById('answer').textContent")
        assert cites[0]["sentence"] in answer and "[1]" in answer
        # the PDF citation: its page, the cited boxes highlighted where they are recorded
        browser.evaluate(
            f"document.querySelector('#citations li[data-n=\"{pdf_n}\"] button').click()"
        )
        browser.wait_for("document.body.dataset.highlight > 0")
        assert browser.evaluate("document.body.dataset.highlight") == str(len(boxes))
        source = browser.evaluate("document.getElementById('viewer-source').textContent")
        assert source == f"file: {unit['source_path']} (in the input folder)"
        zoom = float(browser.evaluate("document.body.dataset.pdfZoom"))
        for box in boxes:
            marked, total = _pixels_in(browser, box, zoom)
            assert marked > 0.3 * total, (box, marked, total)
        margin = {"x0": 5, "y0": 5, "x1": 60, "y1": 50}  # no box there
        for box in [margin, *others]:
            assert _pixels_in(browser, box, zoom)[0] == 0, box
        # a text citation: its section, the cited sentence marked
        browser.evaluate(
            f"document.querySelector('#citations li[data-n=\"{text_n}\"] button').click()"
        )
        browser.wait_for("document.body.dataset.sectionCited > 0")
        marked = browser.evaluate("document.querySelector('#section-text mark').textContent")
        assert marked == cites[text_n - 1]["sentence"]
        # the graph panel: a node clicked on the canvas opens its entity, description shown
        assert int(browser.evaluate("document.body.dataset.graphNodes")) > 0
        browser.wait_for("document.body.dataset.graphFirst")
        time.sleep(0.3)  # the layout has settled: the node stays where it was drawn
        first = json.loads(browser.evaluate("document.body.dataset.graphFirst"))
        canvas = "document.querySelector('#graph canvas').getBoundingClientRect()"
        box = browser.evaluate(f"(r => [r.left, r.top])({canvas})")
        browser.click_at(box[0] + first["x"], box[1] + first["y"])
        entity = json.loads(get(f"{url}/entity/{first['id']}")[2])
        browser.wait_for("document.body.dataset.entity")
        assert browser.evaluate("document.body.dataset.entity") == entity["title"]
        shown = browser.evaluate("document.querySelector('#entity .description').textContent")
        assert shown == entity["description"] and entity["description"]
        panel = browser.evaluate("document.getElementById('entity').textContent")
        assert all(r["title"] in panel for r in entity["reports"]) and entity["reports"]
        if os.environ.get("PAGE_SCREENSHOT_PNG"):  # docs/page.png: the PDF citation open
            browser.evaluate("document.body.dataset.highlight = ''")
            browser.evaluate(
                f"document.querySelector('#citations li[data-n=\"{pdf_n}\"] button').click()"
            )
            browser.wait_for("document.body.dataset.highlight > 0")
            Path(os.environ["PAGE_SCREENSHOT_PNG"]).write_bytes(browser.screenshot())
        # global mode: the reports it reduced
        _ask(browser, None, "global", "What are the main themes?")
        assert int(browser.evaluate("document.body.dataset.reports")) > 0
        assert browser.evaluate("document.getElementById('reports').children.length") > 0
        # focus: a uri, not a question
        _ask(browser, None, "focus", "niels_bohr.md")
        assert "Niels Bohr" in browser.evaluate("document.getElementById('answer').textContent")
        assert browser.dialogs() == []
        assert [e for e in browser.events if e.get("method") == "Runtime.exceptionThrown"] == []


@needs_chromium
def test_page_says_what_went_wrong(served, tmp_path):
    _, url = served
    with Browser(tmp_path / "profile") as browser:
        browser.navigate(url + "/#mode=nosuch")
        browser.wait_for("document.body.dataset.state === 'error'")
        assert "unknown mode" in browser.evaluate("document.getElementById('status').textContent")
        _ask_fails = "document.body.dataset.state === 'error'"
        browser.navigate(url + "/#mode=focus")
        browser.wait_for("document.body.dataset.state === 'idle'")
        browser.type_and_enter("#question", "no_such_note.md")
        browser.wait_for(_ask_fails)
        status = browser.evaluate("document.getElementById('status').textContent")
        detail = json.loads(_post_status(url + "/query/focus", {"query": "no_such_note.md"}))
        assert "failed (400)" in status and detail["detail"] in status


@needs_chromium
def test_page_says_the_index_is_empty(empty_served, tmp_path):
    with Browser(tmp_path / "profile") as browser:
        browser.navigate(empty_served + "/")
        browser.wait_for("document.body.dataset.state === 'empty'")
        status = browser.evaluate("document.getElementById('status').textContent")
        assert status.startswith("The index is empty")
        browser.type_and_enter("#question", "Who was Marie Curie?")
        browser.wait_for("document.body.dataset.state === 'done'")
        answer = browser.evaluate("document.getElementById('answer').textContent")
        assert "is empty" in answer and browser.evaluate("document.body.dataset.citations") == "0"


def _post_status(url: str, body: dict) -> str:
    try:
        post(url, body)
    except urllib.error.HTTPError as exc:
        return exc.read().decode()
    raise AssertionError("the request did not fail")


@needs_chromium
def test_page_shows_an_xss_title_as_text(xss_served, tmp_path):
    url = xss_served
    with Browser(tmp_path / "profile") as browser:
        browser.navigate(url + "/")
        browser.evaluate("window.__xss = 0")
        browser.wait_for("document.body.dataset.state === 'idle'")
        browser.type_and_enter("#question", "Who founded it in Paris in 1909?")
        browser.wait_for("document.body.dataset.state === 'done'")
        assert int(browser.evaluate("document.body.dataset.citations")) > 0
        cited = browser.evaluate("document.getElementById('citations').textContent")
        assert XSS_TITLE in cited  # the title, as text
        browser.evaluate("document.querySelector('#citations button').click()")
        browser.wait_for("document.body.dataset.sectionCited > 0")
        titles = browser.evaluate(
            "[...document.querySelectorAll('#entities button')].map(b => b.textContent)"
        )
        assert titles, "the answer used no entity"
        assert XSS_ENTITY in titles  # the entity named like the payload, as a chip's text
        chip = titles.index(XSS_ENTITY)
        browser.evaluate(f"document.querySelectorAll('#entities button')[{chip}].click()")
        browser.wait_for("document.body.dataset.entity")
        shown = browser.evaluate("document.getElementById('entity').textContent")
        assert shown.count(XSS_TITLE) >= 2  # its description and its source, as text
        assert browser.evaluate("document.querySelectorAll('main img').length") == 0
        assert browser.evaluate("window.__xss") == 0
        assert browser.dialogs() == []


def test_page_images_cache_is_bounded_and_files_are_checked(sample_index, tmp_path):
    """The LRU holds at most its entries and bytes; a PDF that changed size since it was
    indexed, that is gone, or whose path leads out of the input folder is not served."""
    from pipeline.query import GraphIndex

    src, out, _, _ = sample_index
    inp = tmp_path / "input"
    inp.mkdir()
    pdf = inp / "laboratories.pdf"
    pdf.write_bytes((src / "laboratories.pdf").read_bytes())
    settings = load_settings(None, {"output_dir": str(out), "input_dir": str(inp)})
    index = GraphIndex.open(out, settings)
    doc = index.documents.filter(index.documents["source_path"] == "laboratories.pdf")["id"][0]
    one = PageImages(max_entries=1)
    for page in (1, 1, 2, 1):
        one.png(index, doc, page)
    assert one.renders == 3 and len(one._cache) == 1  # page 1 was evicted by page 2
    first = one.png(index, doc, 1)[0]
    small = PageImages(max_bytes=len(first) + 10)
    for page in (1, 2):
        small.png(index, doc, page)
    assert small._bytes <= len(first) + 10 and len(small._cache) == 1
    outside = tmp_path / "outside.pdf"
    outside.write_bytes(pdf.read_bytes())
    pdf.unlink()
    pdf.symlink_to(outside)  # same size, but out of the input folder
    with pytest.raises(NotServed):
        PageImages().png(index, doc, 1)
    pdf.unlink()
    with pytest.raises(NotServed):  # gone
        PageImages().png(index, doc, 1)
    pdf.write_bytes(outside.read_bytes() + b"\n% changed\n")
    with pytest.raises(NotServed):  # changed since it was indexed
        PageImages().png(index, doc, 1)


@needs_chromium
def test_page_streams_an_llm_answer(sample_index, tmp_path):
    """LLM mode: the answer is shown piece by piece as the server streams it (Server-Sent
    Events), then as the whole result; an LLM that fails is said in the status line."""
    from test_serve import QUESTION, responder

    from pipeline.config import LlmSettings
    from pipeline.llm.client import LlmClient
    from pipeline.llm.fake_server import FakeLlm
    from pipeline.query import GraphIndex

    inp, out, _, _ = sample_index
    settings = load_settings(None, {"output_dir": str(out), "input_dir": str(inp)})
    with FakeLlm(responder=responder) as fake:
        llm = LlmSettings(base_url=fake.base_url, api_key="sk-test", timeout_s=5.0)
        client = LlmClient(llm, tmp_path / "llm-cache", backoff_base_s=0.01)
        index = GraphIndex.open(out, settings, llm=client)
        with running(index) as url, Browser(tmp_path / "profile") as browser:
            health = json.loads(get(url + "/health")[2])
            assert health["llm"] and health["stream_modes"] == ["naive", "local", "expand", "flow"]
            _ask(browser, url, "naive", QUESTION)
            answer = browser.evaluate("document.getElementById('answer').textContent")
            pieces = int(browser.evaluate("document.body.dataset.pieces || '0'"))
            status = browser.evaluate("document.getElementById('status').textContent")
            fake.queue_faults(*["500"] * 10)  # every try of the next answer fails
            browser.evaluate("document.getElementById('question').value = ''")
            browser.type_and_enter("#question", "Where did Marie Curie work?")
            browser.wait_for("document.body.dataset.state === 'error'")
            failed = browser.evaluate("document.getElementById('status').textContent")
            assert browser.dialogs() == []
    assert answer.startswith("FROM CONTEXT: ") and pieces > 1, (answer, pieces)
    assert status.startswith("naive: ")
    assert failed.startswith("the LLM answer failed: LLM answer failed: "), failed


def test_a_published_reindex_is_what_the_next_request_sees(tmp_path):
    """After a re-index publishes a new version, the running page answers from it: the old
    version's PDF is no longer served, the new one is (the image cache is per version)."""
    import polars as pl

    from pipeline.storage import store

    inp, out = tmp_path / "input", tmp_path / "output"
    inp.mkdir()
    write_report_pdf(inp / "report.pdf")
    (inp / "note.md").write_text("# Note\n\nMarie Curie worked in Paris.\n", encoding="utf-8")

    def pdf_id() -> str:
        docs = store.read_table(out, "documents")
        return docs.filter(pl.col("source_path") == "report.pdf")["id"].item()

    assert run_index(input_dir=str(inp), output_dir=str(out), log_level="ERROR").success
    old = pdf_id()
    with running(_open(inp, out)) as url:
        first = json.loads(get(url + "/health")[2])["version"]
        assert get(f"{url}/page/{old}/1.png")[0] == 200
        with open(inp / "report.pdf", "ab") as f:  # same pages, new bytes: a new document id
            f.write(b"% edited\n")
        assert run_index(input_dir=str(inp), output_dir=str(out), log_level="ERROR").success
        new = pdf_id()
        assert new != old
        assert json.loads(get(url + "/health")[2])["version"] != first
        assert get(f"{url}/page/{old}/1.png")[0] == 404
        status, _, png = get(f"{url}/page/{new}/1.png")
        assert status == 200 and png.startswith(b"\x89PNG")
        result = post(url + "/query/naive", {"query": "Who directed the Cavendish Laboratory?"})
        assert any(c["document_id"] == new for c in result["citations"])


@needs_chromium
def test_the_page_works_with_the_keyboard_alone(served, tmp_path):
    """Ask with Enter, Tab to the first citation, open it with Enter, Tab on to an entity
    and open it with Enter: no mouse, no script calling click()."""
    _, url = served
    with Browser(tmp_path / "profile") as browser:
        _ask(browser, url, "local", PDF_QUESTION)
        for target in ("#citations button", "#entities button"):
            for _ in range(60):  # Tab until the first such button has the focus
                browser.press("Tab", 9)
                if browser.evaluate(
                    f"document.activeElement === document.querySelector({json.dumps(target)})"
                ):
                    break
            else:
                raise AssertionError(f"Tab never reached {target}")
            browser.press("Enter", 13, "\r")
        browser.wait_for("!document.getElementById('viewer').hidden")
        browser.wait_for("document.body.dataset.entity")
        assert browser.dialogs() == []
