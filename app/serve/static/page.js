// docgraph query page (app/serve/page.py serves this file; the CSP allows no inline script).
// It calls the API of the same server: POST /query/<mode>, GET /page/<doc>/<n>.png,
// /section/<id>, /entity/<id>, /health. Every text from the index goes into the page
// through textContent, never as markup. The page records its state in data-* attributes
// of <body> (state, citations, highlight boxes, entity shown) so a browser test can check it.
(function () {
  "use strict";
  var body = document.body;
  var $ = function (id) { return document.getElementById(id); };
  var form = $("ask"), question = $("question"), modeSelect = $("mode"), status = $("status");
  var MODES = ["naive", "local", "global", "expand", "flow", "focus"];
  var known = MODES.slice();
  var network = null;
  var last = null; // the last result shown
  var llm = false, streamModes = []; // LLM mode, and the modes whose answer it streams

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function setStatus(text, state) {
    status.textContent = text;
    body.setAttribute("data-state", state);
  }
  function detailOf(resp) {
    // the API's one-line {"detail": ...}, else the status line
    return resp.text().then(function (text) {
      try {
        var d = JSON.parse(text).detail;
        return typeof d === "string" ? d : JSON.stringify(d);
      } catch (e) { return resp.status + " " + resp.statusText; }
    });
  }
  function failed(what, resp) {
    return detailOf(resp).then(function (detail) {
      setStatus(what + " failed (" + resp.status + "): " + detail, "error");
    });
  }
  function where(c) {
    // "Document › section › path, p. 3" as `docgraph query` prints it
    var parts = [c.document_title || c.source_path || "?"];
    (c.section_path || []).forEach(function (p) { if (p !== parts[parts.length - 1]) parts.push(p); });
    var pages = (c.pages || []).slice().sort(function (a, b) { return a - b; });
    var page = "";
    if (pages.length) {
      page = ", p. " + pages[0] + (pages[pages.length - 1] !== pages[0] ? "-" + pages[pages.length - 1] : "");
    }
    return parts.join(" › ") + page;
  }
  function recordOf(id) {
    var recs = (last && last.records) || [];
    for (var i = 0; i < recs.length; i++) if (recs[i].id === id) return recs[i];
    return null;
  }

  // ---- modes and the empty index --------------------------------------------------------
  function fillModes(list) {
    clear(modeSelect);
    list.forEach(function (m) {
      var o = el("option", m);
      o.value = m;
      modeSelect.appendChild(o);
    });
    modeSelect.value = list.indexOf("local") >= 0 ? "local" : list[0];
  }
  fillModes(known);
  modeSelect.addEventListener("change", function () {
    question.placeholder = modeSelect.value === "focus"
      ? "A note or section uri, e.g. niels_bohr.md"
      : "Ask a question";
  });
  var params = new URLSearchParams(location.hash.replace(/^#/, ""));
  fetch("/health").then(function (resp) {
    if (!resp.ok) return failed("health check", resp);
    return resp.json().then(function (h) {
      known = h.modes || MODES;
      fillModes(known);
      llm = !!h.llm;
      streamModes = h.stream_modes || [];
      body.setAttribute("data-text-units", String(h.text_units));
      var mode = params.get("mode");
      if (mode && known.indexOf(mode) < 0) {
        setStatus("unknown mode “" + mode + "”: choose one of " + known.join(", "), "error");
        return;
      }
      if (mode) modeSelect.value = mode;
      if (params.get("q")) question.value = params.get("q");
      if (!h.text_units) {
        setStatus("The index is empty: no documents were indexed, so there is nothing to " +
          "search. Index a folder (docgraph index) and restart docgraph serve.", "empty");
        return;
      }
      setStatus("Ready: " + h.text_units + " text units (index version " + h.version + ")", "idle");
    });
  }).catch(function (e) { setStatus("the server did not answer: " + e, "error"); });

  // ---- asking -------------------------------------------------------------------------------
  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    ask(modeSelect.value, question.value);
  });

  function ask(mode, text) {
    if (known.indexOf(mode) < 0) {
      setStatus("unknown mode “" + mode + "”: choose one of " + known.join(", "), "error");
      return;
    }
    if (!text.trim()) { setStatus("Type a question first.", "error"); return; }
    setStatus("searching…", "searching");
    var started = performance.now();
    var stream = llm && streamModes.indexOf(mode) >= 0;
    fetch("/query/" + encodeURIComponent(mode), {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ query: text, stream: stream })
    }).then(function (resp) {
      if (!resp.ok) return failed("the " + mode + " search", resp);
      var done = function (result) { finished(mode, result, started); };
      if ((resp.headers.get("Content-Type") || "").indexOf("text/event-stream") === 0) {
        return readEvents(resp, done);
      }
      return resp.json().then(done);
    }).catch(function (e) { setStatus("the request failed: " + e, "error"); });
  }

  function finished(mode, result, started) {
    showResult(result);
    var ms = Math.round(performance.now() - started);
    var n = (result.citations || []).length;
    var said = mode + ": " + n + " citations, " + result.records.length + " records in " + ms + " ms";
    if (result.fallback) said += " (the LLM failed, offline answer shown: " + result.fallback + ")";
    setStatus(said, "done");
  }

  // An LLM answer streamed as Server-Sent Events (app/serve/server.py): `answer` events
  // (JSON strings) shown as they come, then `result` (the whole result) or `error`.
  function readEvents(resp, done) {
    var reader = resp.body.getReader(), decoder = new TextDecoder();
    var buffer = "", shown = "", pieces = 0, answer = $("answer");
    clear(answer);
    setStatus("answering…", "streaming");
    function handle(block) {
      var name = "message", data = "";
      block.split("\n").forEach(function (line) {
        if (line.indexOf("event: ") === 0) name = line.slice(7);
        else if (line.indexOf("data: ") === 0) data += line.slice(6);
      });
      if (!data) return;
      var value = JSON.parse(data);
      if (name === "answer") {
        shown += value;
        answer.textContent = shown;
        body.setAttribute("data-pieces", String(++pieces));
      } else if (name === "result") {
        done(value);
      } else if (name === "error") {
        setStatus("the LLM answer failed: " + value.detail, "error");
      }
    }
    function pump() {
      return reader.read().then(function (r) {
        if (r.done) { if (buffer.trim()) handle(buffer); return; }
        buffer += decoder.decode(r.value, { stream: true });
        var blocks = buffer.split("\n\n");
        buffer = blocks.pop();
        blocks.forEach(handle);
        return pump();
      });
    }
    return pump();
  }

  // ---- the answer and its citations -------------------------------------------------------
  function showResult(result) {
    last = result;
    var answer = $("answer"), list = $("citations"), reports = $("reports");
    clear(answer); clear(list); clear(reports);
    $("viewer").hidden = true;
    $("entity").hidden = true;
    ["data-entity", "data-highlight", "data-section-cited"].forEach(function (a) { body.removeAttribute(a); });
    var cites = result.citations || [];
    if (cites.length) {
      var p = el("p");
      cites.forEach(function (c) {
        p.appendChild(document.createTextNode(c.sentence + " "));
        var b = el("button", "[" + c.n + "]", "cite");
        b.type = "button";
        b.title = where(c);
        b.addEventListener("click", function () { openCitation(c); });
        p.appendChild(b);
        p.appendChild(document.createTextNode(" "));
      });
      answer.appendChild(p);
    } else {
      answer.appendChild(el("p", result.answer || "(no answer)"));
    }
    cites.forEach(function (c) {
      var li = el("li");
      li.setAttribute("data-n", String(c.n));
      var b = el("button", where(c), "source-link");
      b.type = "button";
      b.addEventListener("click", function () { openCitation(c); });
      li.appendChild(b);
      list.appendChild(li);
    });
    $("citations-title").hidden = !cites.length;
    body.setAttribute("data-citations", String(cites.length));
    var reps = result.records.filter(function (r) { return r.kind === "report"; });
    reps.slice(0, 20).forEach(function (r) {
      var li = el("li");
      li.appendChild(el("strong", r.title || ""));
      li.appendChild(el("div", (r.text || "").slice(0, 400), "meta"));
      reports.appendChild(li);
    });
    $("reports-title").hidden = !(reps.length && result.mode === "global");
    reports.hidden = $("reports-title").hidden;
    body.setAttribute("data-reports", String(reps.length));
    showGraph(result.records);
  }

  function openCitation(c) {
    var rec = recordOf(c.id) || c;
    var boxes = (rec.positions || rec.bbox || []).filter(function (b) { return b.x1 > b.x0 && b.y1 > b.y0; });
    var isPdf = /\.pdf$/i.test(rec.source_path || c.source_path || "");
    $("viewer").hidden = false;
    $("viewer-title").textContent = "[" + c.n + "] " + where(c);
    var source = rec.source_path || c.source_path || "";
    $("viewer-source").textContent = source ? "file: " + source + " (in the input folder)" : "";
    if (isPdf && boxes.length && rec.section_id) {
      // the boxes of the cited sentence's own content nodes, where the section has them
      fetch("/section/" + encodeURIComponent(rec.section_id) + "?unit=" + encodeURIComponent(c.id))
        .then(function (resp) { return resp.ok ? resp.json() : null; })
        .then(function (s) { showPdfCitation(c, rec, sentenceBoxes(s, c.sentence) || boxes); })
        .catch(function () { showPdfCitation(c, rec, boxes); });
    } else if (isPdf && boxes.length) {
      showPdfCitation(c, rec, boxes);
    } else {
      clear($("viewer-nav"));
      showSection(rec.section_id, c.id, c.sentence);
    }
  }

  function flat(text) { return String(text || "").replace(/\s+/g, " ").trim(); }

  function sentenceBoxes(section, sentence) {
    // boxes of the cited nodes holding the sentence, else of every cited node, else null
    if (!section) return null;
    var cited = section.nodes.filter(function (n) { return n.cited && n.boxes.length; });
    var want = flat(sentence);
    var holding = cited.filter(function (n) { return want && flat(n.text).indexOf(want) >= 0; });
    var chosen = holding.length ? holding : cited;
    var boxes = [];
    chosen.forEach(function (n) { boxes = boxes.concat(n.boxes); });
    return boxes.length ? boxes : null;
  }

  function showPdfCitation(c, rec, boxes) {
    var pages = [];
    boxes.forEach(function (b) { if (pages.indexOf(b.page) < 0) pages.push(b.page); });
    pages.sort(function (a, b) { return a - b; });
    var nav = $("viewer-nav");
    clear(nav);
    pages.forEach(function (pg) {
      var b = el("button", "p. " + pg);
      b.type = "button";
      b.addEventListener("click", function () { showPdf(rec.document_id || c.document_id, pg, boxes); });
      nav.appendChild(b);
    });
    showPdf(rec.document_id || c.document_id, pages[0], boxes);
  }

  function showPdf(docId, page, boxes) {
    var canvas = $("pdf");
    $("section-text").hidden = true;
    body.setAttribute("data-pdf", "loading");
    fetch("/page/" + encodeURIComponent(docId) + "/" + page + ".png").then(function (resp) {
      if (!resp.ok) return failed("the page image", resp);
      var zoom = parseFloat(resp.headers.get("x-page-zoom")) || 1;
      return resp.blob().then(createImageBitmap).then(function (bitmap) {
        canvas.width = bitmap.width;
        canvas.height = bitmap.height;
        var g = canvas.getContext("2d");
        g.drawImage(bitmap, 0, 0);
        var drawn = 0;
        g.fillStyle = "rgba(255, 200, 0, 0.45)";
        g.strokeStyle = "rgb(230, 150, 0)";
        g.lineWidth = 2;
        boxes.forEach(function (b) {
          if (b.page !== page) return;
          var x = b.x0 * zoom, y = b.y0 * zoom, w = (b.x1 - b.x0) * zoom, h = (b.y1 - b.y0) * zoom;
          g.fillRect(x, y, w, h);
          g.strokeRect(x, y, w, h);
          drawn++;
        });
        canvas.hidden = false;
        body.setAttribute("data-pdf", docId + "/" + page);
        body.setAttribute("data-pdf-zoom", String(zoom));
        body.setAttribute("data-highlight", String(drawn));
      });
    }).catch(function (e) { setStatus("the page image failed: " + e, "error"); });
  }

  function showSection(sectionId, unitId, sentence) {
    var box = $("section-text");
    $("pdf").hidden = true;
    if (!sectionId) { clear(box); box.appendChild(el("p", "(no section recorded)")); box.hidden = false; return; }
    var url = "/section/" + encodeURIComponent(sectionId) + (unitId ? "?unit=" + encodeURIComponent(unitId) : "");
    fetch(url).then(function (resp) {
      if (!resp.ok) return failed("the section", resp);
      return resp.json().then(function (s) {
        clear(box);
        var marked = 0;
        s.nodes.forEach(function (n) {
          var d = el("div", null, "node" + (n.cited ? " cited" : ""));
          var at = sentence ? n.text.indexOf(sentence) : -1;
          if (at >= 0) { // the cited sentence itself, marked inside its node
            d.appendChild(document.createTextNode(n.text.slice(0, at)));
            d.appendChild(el("mark", sentence));
            d.appendChild(document.createTextNode(n.text.slice(at + sentence.length)));
          } else {
            d.textContent = n.text;
          }
          if (n.cited) marked++;
          box.appendChild(d);
        });
        box.hidden = false;
        body.setAttribute("data-section", s.id);
        body.setAttribute("data-section-cited", String(marked));
      });
    }).catch(function (e) { setStatus("the section failed: " + e, "error"); });
  }

  // ---- the graph of the entities and relationships used ----------------------------------
  function showGraph(records) {
    var ents = records.filter(function (r) { return r.kind === "entity"; }).slice(0, 60);
    var byTitle = {}, nodes = [], seen = {};
    ents.forEach(function (e) {
      if (seen[e.id]) return;
      seen[e.id] = true;
      byTitle[e.title] = e.id;
      nodes.push({ id: e.id, label: e.title, title: el("div", (e.type || "") + " " + e.title) });
    });
    var edges = [];
    records.filter(function (r) { return r.kind === "relationship"; }).forEach(function (r) {
      var ends = (r.title || "").split(" -> ");
      var s = r.source_id || byTitle[ends[0]], t = r.target_id || byTitle[ends[1]];
      if (seen[s] && seen[t]) edges.push({ id: r.id, from: s, to: t });
    });
    var list = $("entities");
    clear(list);
    nodes.forEach(function (n) {
      var b = el("button", n.label);
      b.type = "button";
      b.setAttribute("data-entity", n.id);
      b.addEventListener("click", function () { openEntity(n.id); });
      list.appendChild(b);
    });
    $("graph-title").hidden = !nodes.length;
    $("graph").hidden = !nodes.length;
    body.setAttribute("data-graph-nodes", String(nodes.length));
    body.setAttribute("data-graph-edges", String(edges.length));
    if (network) { network.destroy(); network = null; }
    body.removeAttribute("data-graph-first");
    if (!nodes.length || typeof vis === "undefined") return;
    network = new vis.Network($("graph"), { nodes: new vis.DataSet(nodes), edges: new vis.DataSet(edges) }, {
      nodes: { shape: "dot", size: 10, font: { size: 13 } },
      edges: { color: { color: "#bbb" }, smooth: false },
      physics: { stabilization: { iterations: 150 } },
      interaction: { hover: true }
    });
    network.on("click", function (params) {
      if (params.nodes && params.nodes.length) openEntity(params.nodes[0]);
    });
    network.once("stabilizationIterationsDone", function () { network.setOptions({ physics: false }); });
    network.on("afterDrawing", function () {
      // where the first node is drawn (px in #graph), for a test to click it
      var id = nodes[0].id, at = network.canvasToDOM(network.getPositions([id])[id]);
      body.setAttribute("data-graph-first", JSON.stringify({ id: id, x: at.x, y: at.y }));
    });
  }

  function openEntity(id) {
    var panel = $("entity");
    fetch("/entity/" + encodeURIComponent(id)).then(function (resp) {
      if (!resp.ok) return failed("the entity", resp);
      return resp.json().then(function (e) {
        clear(panel);
        panel.appendChild(el("h3", e.title));
        panel.appendChild(el("div", e.type + " · " + e.degree + " relationships", "meta"));
        panel.appendChild(el("p", e.description || "(no description)", "description"));
        if (e.relationships.length) {
          panel.appendChild(el("h4", "Relationships"));
          var ul = el("ul");
          e.relationships.forEach(function (r) {
            var li = el("li");
            var b = el("button", r.source + " → " + r.target, "source-link");
            b.type = "button";
            b.addEventListener("click", function () { openEntity(r.other_id); });
            li.appendChild(b);
            if (r.description) li.appendChild(el("div", r.description, "meta"));
            ul.appendChild(li);
          });
          panel.appendChild(ul);
        }
        if (e.sources.length) {
          panel.appendChild(el("h4", "Sources"));
          e.sources.forEach(function (s) {
            var d = el("div", null, "source");
            d.appendChild(el("div", where(s), "meta"));
            d.appendChild(el("div", s.text));
            panel.appendChild(d);
          });
        }
        if (e.reports.length) {
          panel.appendChild(el("h4", "Community reports"));
          e.reports.forEach(function (r) {
            var d = el("div", null, "source");
            d.appendChild(el("strong", r.title + " (level " + r.level + ")"));
            d.appendChild(el("div", r.summary));
            panel.appendChild(d);
          });
        }
        panel.hidden = false;
        body.setAttribute("data-entity", e.title);
      });
    }).catch(function (e) { setStatus("the entity failed: " + e, "error"); });
  }

  if (params.get("q") && params.get("ask") === "1") {
    setTimeout(function () { ask(modeSelect.value, question.value); }, 0);
  }
})();
