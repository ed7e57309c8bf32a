/*
 * flowpilot run page: live refresh while the run is active.
 *
 * Polls the run's status JSON (data-status-url on #fp-run) every POLL_MS. When it
 * changes, the graph's nodes get their new status classes (no redraw), and the
 * summary, timeline and steps sections (and the record form below them) are
 * replaced by the same sections of a fresh copy of this page (rendered and
 * escaped by the server). Polling stops when the run is terminal (succeeded,
 * failed or cancelled).
 */
(function () {
  "use strict";

  var POLL_MS = 1000;
  var SECTIONS = ["fp-run-summary", "fp-run-timeline", "fp-run-steps", "run_form"];

  function recolour(steps) {
    steps.forEach(function (step) {
      document.querySelectorAll("#fp-graph g.fp-node").forEach(function (node) {
        if (node.getAttribute("data-step-id") !== step.step_id) return;
        var classes = node.getAttribute("class").split(" ").filter(function (c) {
          return c.indexOf("fp-step-") !== 0;
        });
        classes.push("fp-step-" + step.status);
        node.setAttribute("class", classes.join(" "));
        node.setAttribute("data-status", step.status);
        var label = node.querySelector(".fp-node-status");
        if (label) label.textContent = step.status;
      });
    });
  }

  function openDetails(root) {
    var open = {};
    root.querySelectorAll("details[open]").forEach(function (d) {
      var card = d.closest("[data-step-id]");
      if (card) open[card.getAttribute("data-step-id") + "|" + d.className] = true;
    });
    return open;
  }

  function replaceSections(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    SECTIONS.forEach(function (id) {
      var now = document.getElementById(id);
      var next = fresh.getElementById(id);
      if (!now || !next) return;
      var open = openDetails(now);
      now.replaceWith(document.importNode(next, true));
      document.getElementById(id).querySelectorAll("details").forEach(function (d) {
        var card = d.closest("[data-step-id]");
        if (card && open[card.getAttribute("data-step-id") + "|" + d.className]) d.open = true;
      });
    });
  }

  function start(root) {
    var url = root.getAttribute("data-status-url");
    var initial = document.getElementById("fp-run-state");
    var last = initial ? JSON.stringify(JSON.parse(initial.textContent)) : null;

    function poll() {
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (!response.ok) throw new Error("status " + response.status);
          return response.json();
        })
        .then(function (data) {
          var text = JSON.stringify(data);
          var changed = text !== last;
          last = text;
          root.setAttribute("data-status", data.status);
          root.setAttribute("data-terminal", data.terminal ? "true" : "false");
          if (!changed) return data;
          recolour(data.steps);
          return fetch(window.location.href, { credentials: "same-origin" })
            .then(function (response) { return response.text(); })
            .then(function (html) { replaceSections(html); return data; });
        })
        .then(function (data) {
          if (data.terminal) {
            root.setAttribute("data-live", "stopped");
            return;
          }
          window.setTimeout(poll, POLL_MS);
        })
        .catch(function (err) {
          root.setAttribute("data-live", "error: " + err.message);
          window.setTimeout(poll, POLL_MS * 5);
        });
    }

    root.setAttribute("data-live", "polling");
    poll();
  }

  function init() {
    var root = document.getElementById("fp-run");
    if (root && root.getAttribute("data-terminal") !== "true") start(root);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
