/*
 * flowpilot: draws a workflow's DAG as SVG.
 *
 * The data is JSON embedded by Django's json_script (never concatenated into
 * code); dagre (vendored, vendor/dagre-*) computes the layout; this file draws
 * it with DOM calls only. Every label is set with textContent, so step ids,
 * tool names and branch labels are always text, never markup.
 *
 * Each node is <g class="fp-node" data-step-id="…" data-kind="…" data-tool="…">,
 * plus, when the data gives the node a status (a run's graph), the class
 * fp-step-<status>, data-status and a status line under its id (class
 * fp-node-status); each edge <g class="fp-edge" data-from="…" data-to="…"
 * data-when="…">, with a <title> tooltip and data-types when the data gives the edge
 * ``types`` (the review page: "a.list: array<object> → b.name: string", one line per
 * mapped reference); the container gets data-drawn="true" (or data-error) when done.
 * On a review diff nodes and edges carry data-change and the class
 * fp-change-<added|removed|changed|unchanged>.
 */
(function () {
  "use strict";

  var SVG_NS = "http://www.w3.org/2000/svg";
  var PAD_X = 14;
  var LINE = 17;
  var LABEL_PAD = 4;

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG_NS, name);
    Object.keys(attrs || {}).forEach(function (key) {
      node.setAttribute(key, String(attrs[key]));
    });
    if (parent) parent.appendChild(node);
    return node;
  }

  function text(parent, cls, content, x, y) {
    var node = el("text", { "class": cls, x: x, y: y }, parent);
    node.textContent = content;
    return node;
  }

  var MAX_CHARS = 44;

  // Long names are cut in the box; the node's <title> tooltip has them whole.
  function clip(value) {
    return value.length > MAX_CHARS ? value.slice(0, MAX_CHARS - 1) + "\u2026" : value;
  }

  function subtitle(node) {
    if (node.loop) {
      return "\u21bb loop \u2264" + node.loop.max_iterations + "\u00d7: " + node.loop.workflow;
    }
    if (node.tool) return node.kind === "tool" ? node.tool : node.kind + ": " + node.tool;
    if (node.kind === "decision" && node.branches.length) {
      return "decision: " + node.branches.join(" | ");
    }
    return node.kind;
  }

  // A review diff marks nodes and edges added, removed, changed or unchanged.
  function changeClass(item) {
    return item.change ? " fp-change-" + item.change : "";
  }

  function width(textNode) {
    try {
      return textNode.getComputedTextLength();
    } catch (err) {
      return textNode.textContent.length * 7.5;
    }
  }

  // Draw the node boxes first (unplaced) so their text can be measured.
  function drawNodes(layer, graph, data) {
    var groups = {};
    data.nodes.forEach(function (node) {
      var attrs = {
        "class": "fp-node fp-kind-" + node.kind + changeClass(node) +
          (node.status ? " fp-step-" + node.status : ""),
        "data-step-id": node.id,
        "data-change": node.change || "",
        "data-kind": node.kind,
        "data-tool": node.tool || "",
        tabindex: 0,
        role: "listitem",
      };
      if (node.status) attrs["data-status"] = node.status;
      if (node.loop) attrs["data-max-iterations"] = node.loop.max_iterations;
      var g = el("g", attrs, layer);
      var title = el("title", {}, g);
      title.textContent = node.id + (node.name ? " — " + node.name : "") +
        (node.change && node.change !== "unchanged" ? " (" + node.change + ")" : "") +
        (node.status ? " (" + node.status + ")" : "") +
        (node.loop ? "\nrepeats " + node.loop.workflow + " until " + node.loop.until +
          " (at most " + node.loop.max_iterations + " iterations)" : "") +
        (node.description ? "\n" + node.description : "");
      var rect = el("rect", { rx: 6, ry: 6 }, g);
      var lines = [
        text(g, "fp-node-id", node.id, 0, 0),
        text(g, "fp-node-tool", clip(subtitle(node)), 0, 0),
      ];
      if (node.name) lines.push(text(g, "fp-node-name", clip(node.name), 0, 0));
      if (node.status) lines.push(text(g, "fp-node-status", clip(node.status_text || node.status), 0, 0));
      var w = Math.max.apply(null, lines.map(width)) + 2 * PAD_X;
      var h = lines.length * LINE + 14;
      lines.forEach(function (line, i) {
        line.setAttribute("x", PAD_X);
        line.setAttribute("y", 8 + LINE * (i + 1) - 4);
      });
      rect.setAttribute("width", w);
      rect.setAttribute("height", h);
      graph.setNode(node.id, { width: w, height: h });
      groups[node.id] = g;
    });
    return groups;
  }

  function drawEdgeLabels(layer, graph, data) {
    var labels = [];
    data.edges.forEach(function (edge, i) {
      var label = null;
      var size = { width: 0, height: 0 };
      if (edge.when) {
        label = el("g", { "class": "fp-edge-label", "data-when": edge.when }, layer);
        var back = el("rect", { rx: 3, ry: 3 }, label);
        el("title", {}, label).textContent = "branch: " + edge.when;
        var t = text(label, "fp-edge-label-text", clip(edge.when), LABEL_PAD, 13);
        size = { width: width(t) + 2 * LABEL_PAD, height: 18 };
        back.setAttribute("width", size.width);
        back.setAttribute("height", size.height);
      }
      graph.setEdge(edge.from, edge.to, { width: size.width, height: size.height, labelpos: "c" }, "e" + i);
      labels.push(label);
    });
    return labels;
  }

  function pathOf(points) {
    var d = "M" + points[0].x + "," + points[0].y;
    if (points.length === 2) return d + " L" + points[1].x + "," + points[1].y;
    // A smooth curve through the layout's control points (quadratic midpoints).
    for (var i = 1; i < points.length - 1; i++) {
      var mx = (points[i].x + points[i + 1].x) / 2;
      var my = (points[i].y + points[i + 1].y) / 2;
      d += " Q" + points[i].x + "," + points[i].y + " " + (i === points.length - 2 ? points[i + 1].x + "," + points[i + 1].y : mx + "," + my);
    }
    return d;
  }

  function draw(container, data) {
    var svg = el("svg", {
      "class": "fp-graph-svg",
      role: "img",
      "aria-label": "Graph of " + data.name + " v" + data.version + ": " + data.nodes.length + " steps",
    });
    container.appendChild(svg);
    var defs = el("defs", {}, svg);
    var marker = el("marker", {
      id: "fp-arrow", viewBox: "0 0 10 10", refX: 9, refY: 5,
      markerWidth: 8, markerHeight: 8, orient: "auto-start-reverse",
    }, defs);
    el("path", { d: "M0,0 L10,5 L0,10 z", "class": "fp-arrow-head" }, marker);
    var root = el("g", { "class": "fp-graph-root" }, svg);
    var edgeLayer = el("g", { "class": "fp-edges" }, root);
    var labelLayer = el("g", { "class": "fp-edge-labels" }, root);
    var nodeLayer = el("g", { "class": "fp-nodes", role: "list" }, root);

    var graph = new dagre.graphlib.Graph({ multigraph: true });
    graph.setGraph({ rankdir: "TB", nodesep: 36, ranksep: 56, edgesep: 18, marginx: 12, marginy: 12 });
    graph.setDefaultEdgeLabel(function () { return {}; });
    var groups = drawNodes(nodeLayer, graph, data);
    var labels = drawEdgeLabels(labelLayer, graph, data);
    dagre.layout(graph);

    data.nodes.forEach(function (node) {
      var box = graph.node(node.id);
      groups[node.id].setAttribute(
        "transform", "translate(" + (box.x - box.width / 2) + "," + (box.y - box.height / 2) + ")"
      );
    });
    data.edges.forEach(function (edge, i) {
      var laid = graph.edge(edge.from, edge.to, "e" + i);
      var g = el("g", {
        "class": "fp-edge" + (edge.inferred ? " fp-edge-inferred" : "") + changeClass(edge),
        "data-from": edge.from,
        "data-change": edge.change || "",
        "data-to": edge.to,
        "data-when": edge.when || "",
      }, edgeLayer);
      if (edge.types && edge.types.length) {
        // The tooltip: what each mapped reference carries across it, and where it goes.
        el("title", {}, g).textContent = edge.types.join("\n");
        g.setAttribute("data-types", edge.types.join("\n"));
      }
      el("path", { d: pathOf(laid.points), "marker-end": "url(#fp-arrow)" }, g);
      if (edge.types && edge.types.length) {
        el("path", { d: pathOf(laid.points), "class": "fp-edge-hit" }, g);
      }
      if (labels[i]) {
        var w = Number(labels[i].firstChild.getAttribute("width"));
        labels[i].setAttribute("transform", "translate(" + (laid.x - w / 2) + "," + (laid.y - 9) + ")");
      }
    });
    var size = graph.graph();
    svg.setAttribute("viewBox", "0 0 " + Math.ceil(size.width) + " " + Math.ceil(size.height));
    svg.setAttribute("width", Math.ceil(size.width));
    svg.setAttribute("height", Math.ceil(size.height));
  }

  function fail(container, message) {
    var p = document.createElement("p");
    p.className = "fp-graph-error";
    p.textContent = "The picture could not be drawn (" + message + "); the tables below hold the same graph.";
    container.appendChild(p);
    container.setAttribute("data-error", message);
  }

  function init() {
    document.querySelectorAll(".fp-graph[data-source]").forEach(function (container) {
      var source = document.getElementById(container.getAttribute("data-source"));
      try {
        if (typeof dagre === "undefined") throw new Error("the layout library did not load");
        draw(container, JSON.parse(source.textContent));
        container.setAttribute("data-drawn", "true");
      } catch (err) {
        fail(container, err.message);
      }
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
