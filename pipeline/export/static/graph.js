// docgraph entity graph page (pipeline/export/html.py inlines this file).
// Every text from the index goes into the page through textContent, never as markup.
// The page records its state in data-* attributes of <body> (rendered nodes, painted
// pixels, search hits, selection) so a headless browser can check what it shows.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("graph-data").textContent);
  var body = document.body;
  var panel = document.getElementById("panel");
  var PALETTE = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#ad494a", "#637939", "#8c6d31",
    "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363"
  ];
  var levelPos = 0;
  var selected = -1;

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function communityOf(node, pos) {
    // the node's community at level `pos`, or the deepest one above it (-1: none)
    for (var p = Math.min(pos, node.c.length - 1); p >= 0; p--) {
      if (node.c[p] >= 0) return { id: node.c[p], level: data.levels[p] };
    }
    return { id: -1, level: null };
  }

  function colour(community) {
    return community < 0 ? "#bbbbbb" : PALETTE[community % PALETTE.length];
  }

  function styled(i) {
    var c = colour(communityOf(data.nodes[i], levelPos).id);
    return { id: i, color: { background: c, border: c, highlight: { background: c, border: "#000" } } };
  }

  // ---- header: counts, levels
  var shown = data.nodes.length;
  document.getElementById("summary").textContent =
    shown + " of " + data.total + " entities, " + data.edges.length + " relationships" +
    (shown < data.total
      ? " (only the " + shown + " with the highest degree: docgraph export html --max-nodes N shows more)"
      : "");
  var levelSelect = document.getElementById("level");
  data.levels.forEach(function (level, pos) {
    var option = el("option", String(level));
    option.value = String(pos);
    levelSelect.appendChild(option);
  });
  if (!data.levels.length) levelSelect.disabled = true;

  // ---- the network (positions come from the export: no physics)
  var nodes = new vis.DataSet(data.nodes.map(function (n, i) {
    var s = styled(i);
    s.label = n.t;
    s.x = n.x;
    s.y = n.y;
    s.value = n.g;
    return s;
  }));
  var edges = new vis.DataSet(data.edges.map(function (e, i) {
    return { id: i, from: e[0], to: e[1], value: e[2] };
  }));
  var network = new vis.Network(document.getElementById("graph"), { nodes: nodes, edges: edges }, {
    physics: false,
    layout: { improvedLayout: false },
    nodes: {
      shape: "dot",
      scaling: { min: 5, max: 28, label: { enabled: true, min: 11, max: 22, drawThreshold: 7 } },
      font: { size: 12, color: "#222" }
    },
    edges: {
      color: { color: "#c8c8c8", highlight: "#444", opacity: 0.7 },
      scaling: { min: 0.5, max: 4 },
      smooth: false
    },
    interaction: { hover: true, hideEdgesOnDrag: data.nodes.length > 1500, tooltipDelay: 300 }
  });

  network.once("afterDrawing", function () {
    var canvas = document.querySelector("#graph canvas");
    var painted = 0;
    if (canvas && canvas.width && canvas.height) {
      var pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
      for (var p = 3; p < pixels.length; p += 4) if (pixels[p] > 0) painted++;
    }
    body.setAttribute("data-rendered-nodes", String(nodes.length));
    body.setAttribute("data-rendered-edges", String(edges.length));
    body.setAttribute("data-painted-pixels", String(painted));
    body.setAttribute("data-ready", "1");
  });

  // ---- the panel
  function legend() {
    panel.replaceChildren();
    panel.appendChild(el("h2", "Communities"));
    var level = data.levels[levelPos];
    panel.appendChild(el("p", level === undefined ? "no communities" :
      "level " + level + ": colours by community; click a node for its description, sources and report.", "note"));
    var counts = {};
    data.nodes.forEach(function (n) {
      var c = communityOf(n, levelPos).id;
      counts[c] = (counts[c] || 0) + 1;
    });
    var order = Object.keys(counts).map(Number).sort(function (a, b) { return counts[b] - counts[a] || a - b; });
    var box = el("div", null, "legend");
    order.slice(0, 30).forEach(function (c) {
      var row = el("div");
      var swatch = el("span", null, "swatch");
      swatch.style.background = colour(c);
      row.appendChild(swatch);
      var report = data.reports[String(c)];
      row.appendChild(document.createTextNode(
        (c < 0 ? "no community" : (report && report.title) || "community " + c) + " (" + counts[c] + ")"));
      box.appendChild(row);
    });
    panel.appendChild(box);
  }

  function show(i) {
    var n = data.nodes[i];
    selected = i;
    body.setAttribute("data-selected", n.t);
    panel.replaceChildren();
    panel.appendChild(el("h2", n.t));
    panel.appendChild(el("div", n.k + " · degree " + n.g, "meta"));
    panel.appendChild(el("p", n.d || "(no description)"));
    panel.appendChild(el("h3", "Sources (" + n.n + ")"));
    n.s.forEach(function (s) {
      var item = el("div", null, "source");
      item.appendChild(el("div", data.documents[s[0]], "doc"));
      item.appendChild(el("div", s[1]));
      panel.appendChild(item);
    });
    if (n.n > n.s.length) panel.appendChild(el("div", "… and " + (n.n - n.s.length) + " more", "note"));
    var community = communityOf(n, levelPos);
    panel.appendChild(el("h3", "Community report"));
    if (community.id < 0) {
      panel.appendChild(el("p", "in no community", "note"));
      return;
    }
    var report = data.reports[String(community.id)];
    var where = "community " + community.id + ", level " + community.level;
    if (community.level !== data.levels[levelPos]) where += " (not split at level " + data.levels[levelPos] + ")";
    panel.appendChild(el("div", where, "meta"));
    if (report) {
      panel.appendChild(el("div", report.title, "doc"));
      panel.appendChild(el("p", report.summary));
    } else {
      panel.appendChild(el("p", "no report", "note"));
    }
  }

  network.on("click", function (params) {
    if (params.nodes.length) show(params.nodes[0]);
    else { selected = -1; body.removeAttribute("data-selected"); legend(); }
  });

  function countCommunities() {
    var seen = {};
    data.nodes.forEach(function (n) { seen[communityOf(n, levelPos).id] = true; });
    body.setAttribute("data-level", String(data.levels[levelPos]));
    body.setAttribute("data-communities", String(Object.keys(seen).length));
  }

  levelSelect.addEventListener("change", function () {
    levelPos = Number(levelSelect.value);
    nodes.update(data.nodes.map(function (n, i) { return styled(i); }));
    countCommunities();
    if (selected >= 0) show(selected); else legend();
  });

  // ---- search: case-insensitive substring of the title; highlights every hit, opens the first
  var searchBox = document.getElementById("search");
  function search(query, open) {
    var q = query.trim().toLowerCase();
    var hits = [];
    if (q) data.nodes.forEach(function (n, i) { if (n.t.toLowerCase().indexOf(q) >= 0) hits.push(i); });
    hits.sort(function (a, b) { return data.nodes[b].g - data.nodes[a].g || a - b; });
    body.setAttribute("data-search-query", query);
    body.setAttribute("data-search-hits", String(hits.length));
    network.selectNodes(hits, false);
    if (!q) { legend(); return; }
    if (open && hits.length) {
      network.focus(hits[0], { scale: 1.2, animation: false });
      show(hits[0]);
    } else {
      panel.replaceChildren();
      panel.appendChild(el("h2", hits.length + " match" + (hits.length === 1 ? "" : "es")));
      if (data.nodes.length < data.total) {
        panel.appendChild(el("p", "among the " + data.nodes.length + " entities shown (of " +
          data.total + " in the index)", "note"));
      }
      hits.slice(0, 50).forEach(function (i) {
        var b = el("button", data.nodes[i].t + " (" + data.nodes[i].k + ")", "hit");
        b.type = "button";
        b.addEventListener("click", function () {
          network.selectNodes([i], false);
          network.focus(i, { scale: 1.2, animation: false });
          show(i);
        });
        panel.appendChild(b);
      });
    }
  }
  searchBox.addEventListener("input", function () { search(searchBox.value, false); });
  searchBox.addEventListener("keydown", function (e) { if (e.key === "Enter") search(searchBox.value, true); });

  // ---- state from the URL fragment: #level=1&search=curie (opens the first hit)
  var params = new URLSearchParams(location.hash.replace(/^#/, ""));
  var levelParam = data.levels.indexOf(Number(params.get("level")));
  if (params.has("level") && levelParam >= 0) {
    levelSelect.value = String(levelParam);
    levelSelect.dispatchEvent(new Event("change"));
  }
  countCommunities();
  legend();
  if (params.has("search")) {
    searchBox.value = params.get("search");
    search(searchBox.value, true);
  }
})();
