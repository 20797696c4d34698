"""The page's own style and script, and the Content-Security-Policy that allows exactly
them: each by its SHA-256 hash, nothing else, nothing loaded from anywhere.

Neither holds anything from the results: the script reads the rows' ``data-``
attributes, so what a result says can never become code.
"""

from __future__ import annotations

import base64
import hashlib

CSS = """
:root { color-scheme: light dark; --fg: #1d1d1f; --bg: #fff; --muted: #5f6368;
  --panel: #f4f4f6; --line: #ddd; --pre: #f7f7f9; --pre-line: #e3e3e8; --link: #0a58ca;
  --ok-bg: #d9f2df; --ok: #145a26; --bad-bg: #fbe0de; --bad: #8a1c12;
  --warn-bg: #fff1cc; --warn: #6b4e00; --add: #116329; --add-bg: #e6ffec;
  --del: #82071e; --del-bg: #ffebe9; --hunk: #0550ae; --ctl: #8250df; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6e6e6; --bg: #16171a; --muted: #a0a4ab; --panel: #23252a;
    --line: #3a3d44; --pre: #1d1f23; --pre-line: #33363c; --link: #7cb3ff;
    --ok-bg: #1d3b26; --ok: #8fe0a4; --bad-bg: #4a1f1c; --bad: #ffaaa1;
    --warn-bg: #43381a; --warn: #f3d27a; --add: #7ee2a0; --add-bg: #12301d;
    --del: #ffa198; --del-bg: #3d1515; --hunk: #79c0ff; --ctl: #d2a8ff; }
}
[hidden] { display: none !important; }
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em; color: var(--fg);
  background: var(--bg); }
h1 { font-size: 1.5em; margin-bottom: .2em; }
h2 { font-size: 1.15em; margin: 1.4em 0 .4em; }
h4 { margin: .8em 0 .3em; }
.muted, small { color: var(--muted); }
.summary { display: flex; gap: 1em; flex-wrap: wrap; margin: 1em 0 1.5em; }
.summary div { background: var(--panel); border-radius: 6px; padding: .5em .9em; }
.summary b { display: block; font-size: 1.4em; }
table { border-collapse: collapse; }
table.tasks { width: 100%; }
th, td { text-align: left; padding: .35em .6em; border-bottom: 1px solid var(--line);
  vertical-align: top; overflow-wrap: anywhere; }
th { background: var(--panel); overflow-wrap: normal; }
th[data-sort] { cursor: pointer; user-select: none; }
th[aria-sort=ascending]::after { content: " \\25B2"; }
th[aria-sort=descending]::after { content: " \\25BC"; }
table.tasks td:first-child { min-width: 10ch; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.more > td { border-bottom: 2px solid var(--line); padding-top: 0; }
/* The details take the row's full width, never widen the table: long lines wrap. */
tr.more > td > details { width: 0; min-width: 100%; }
.status { white-space: nowrap; font-weight: 600; border-radius: 4px; padding: 0 .4em; }
.s-passed, .s-FULL { background: var(--ok-bg); color: var(--ok); }
.s-failed, .s-rejected, .s-NO { background: var(--bad-bg); color: var(--bad); }
.s-budget, .s-no-submission, .s-PARTIAL, .s-stopped, .s-provider-error, .s-sandbox-error,
.s-usage-error, .s-internal-error { background: var(--warn-bg); color: var(--warn); }
details { margin: .25em 0; }
summary { cursor: pointer; color: var(--link); }
.detail { margin: .3em 0 .6em 1em; }
.attempt { border-left: 3px solid var(--line); padding-left: .7em; margin: .5em 0; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .1em 1em; margin: .3em 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; min-width: 0; }
pre { background: var(--pre); border: 1px solid var(--pre-line); padding: .6em; margin: .3em 0;
  max-height: 40em; overflow: auto; white-space: pre-wrap; overflow-wrap: anywhere;
  word-break: normal; max-width: 100%; box-sizing: border-box; }
/* Diffs and test output keep their lines as they are and scroll inside their own box. */
pre.diff, pre.log { white-space: pre; overflow-wrap: normal; }
small.instruction { display: inline-block; max-width: 40em; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size: .92em; }
pre.commands code { user-select: all; }
.add { color: var(--add); background: var(--add-bg); }
.del { color: var(--del); background: var(--del-bg); }
.hunk { color: var(--hunk); }
.meta { font-weight: 600; }
.ctl { color: var(--ctl); font-weight: 600; }
#controls { display: flex; gap: 1em; flex-wrap: wrap; align-items: center; margin: .5em 0; }
#controls input[type=search] { min-width: 18em; }
#controls select { max-width: 20em; }
.wide { overflow-x: auto; max-width: 100%; }
table.grid a { text-decoration: none; }
tbody.task { scroll-margin-top: .5em; }
"""

#: Sorting by a column (a click on its header, or ``#sort=tokens`` / ``#sort=-tokens`` in
#: the address), filtering by status, model and seed, and a search of each task's text.
#: The address's fragment may also set ``status``, ``model``, ``seed`` and ``q``; a fragment
#: that is a task's ID (``#line-3``) opens that task's details and scrolls to them.
SCRIPT = """
(function () {
  "use strict";
  var root = document.documentElement;
  root.setAttribute("data-script", "ran");
  var table = document.getElementById("tasks");
  var controls = document.getElementById("controls");
  if (!table || !controls) { return; }
  var bodies = Array.prototype.slice.call(table.tBodies);
  var heads = Array.prototype.slice.call(table.querySelectorAll("th[data-sort]"));
  var search = document.getElementById("search");
  var sortPick = document.getElementById("sort-by");
  var shownCount = document.getElementById("shown");
  var picks = ["status", "model", "seed"];
  var texts = new Map();
  var current = { key: "order", desc: false };
  controls.hidden = false;

  function value(body, key, numeric) {
    var raw = body.getAttribute("data-" + key) || "";
    if (!numeric) { return raw.toLowerCase(); }
    return raw === "" ? -Infinity : parseFloat(raw);
  }
  function sortBy(key, desc) {
    var head = heads.filter(function (h) { return h.getAttribute("data-sort") === key; })[0];
    var option = Array.prototype.filter.call(sortPick.options, function (o) {
      return o.value === key;
    })[0];
    if (!option) { return; }
    var numeric = option.getAttribute("data-type") === "num";
    var sorted = bodies.slice().sort(function (a, b) {
      var x = value(a, key, numeric), y = value(b, key, numeric);
      var c = x < y ? -1 : (x > y ? 1 : 0);
      if (c !== 0) { return desc ? -c : c; }
      return value(a, "order", true) - value(b, "order", true);
    });
    var fragment = document.createDocumentFragment();
    sorted.forEach(function (body) { fragment.appendChild(body); });
    table.appendChild(fragment);
    heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
    if (head) { head.setAttribute("aria-sort", desc ? "descending" : "ascending"); }
    current = { key: key, desc: desc };
    sortPick.value = key;
    root.setAttribute("data-sorted", (desc ? "-" : "") + key);
  }
  function textOf(body) {
    if (!texts.has(body)) { texts.set(body, body.textContent.toLowerCase()); }
    return texts.get(body);
  }
  function filter() {
    var wanted = {};
    picks.forEach(function (name) {
      wanted[name] = document.getElementById("pick-" + name).value;
    });
    var words = search.value.trim().toLowerCase();
    var shown = 0;
    bodies.forEach(function (body) {
      var ok = picks.every(function (name) {
        return wanted[name] === "*" || body.getAttribute("data-" + name) === wanted[name];
      });
      if (ok && words) { ok = textOf(body).indexOf(words) !== -1; }
      body.hidden = !ok;
      if (ok) { shown += 1; }
    });
    shownCount.textContent = shown + " of " + bodies.length + " tasks shown";
    root.setAttribute("data-shown", String(shown));
  }
  function remember() {
    var state = new URLSearchParams();
    if (current.key !== "order") { state.set("sort", (current.desc ? "-" : "") + current.key); }
    picks.forEach(function (name) {
      var picked = document.getElementById("pick-" + name).value;
      if (picked !== "*") { state.set(name, picked); }
    });
    if (search.value) { state.set("q", search.value); }
    try { history.replaceState(null, "", "#" + state.toString()); } catch (e) { /* file: */ }
  }
  heads.forEach(function (head) {
    head.tabIndex = 0;
    function activate() {
      var key = head.getAttribute("data-sort");
      sortBy(key, current.key === key ? !current.desc : head.getAttribute("data-type") === "num");
      remember();
    }
    head.addEventListener("click", activate);
    head.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); activate(); }
    });
  });
  sortPick.addEventListener("change", function () {
    var numeric = sortPick.options[sortPick.selectedIndex].getAttribute("data-type") === "num";
    sortBy(sortPick.value, numeric && sortPick.value !== "order");  // the most first
    remember();
  });
  picks.forEach(function (name) {
    document.getElementById("pick-" + name).addEventListener("change", function () {
      filter(); remember();
    });
  });
  var pending = 0;
  search.addEventListener("input", function () {
    clearTimeout(pending);
    pending = setTimeout(function () { filter(); remember(); }, 150);
  });
  var asked = new URLSearchParams(location.hash.slice(1));
  picks.forEach(function (name) {
    var select = document.getElementById("pick-" + name);
    if (asked.has(name)) {
      var wanted = asked.get(name);
      if (Array.prototype.some.call(select.options, function (o) { return o.value === wanted; })) {
        select.value = wanted;
      }
    }
  });
  if (asked.has("q")) { search.value = asked.get("q"); }
  var sort = asked.get("sort");
  if (sort) { sortBy(sort.replace(/^-/, ""), sort.charAt(0) === "-"); }
  filter();

  // "#TASK-ID" opens that task's details and scrolls to it, on load and whenever the
  // fragment changes (a link of the task x model grid, or the address edited).
  function openTask() {
    var raw = location.hash.slice(1);
    if (!raw || raw.indexOf("=") !== -1) { return; }
    var key;
    try { key = decodeURIComponent(raw); } catch (e) { return; }
    var body = bodies.filter(function (b) { return b.getAttribute("data-id") === key; })[0];
    if (!body) { return; }
    body.hidden = false;
    var details = body.querySelector("tr.more details");
    if (details) { details.open = true; }
    body.scrollIntoView({ block: "start" });
    root.setAttribute("data-opened", key);
  }
  window.addEventListener("hashchange", openTask);
  openTask();
})();
"""


def _source_hash(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def content_security_policy() -> str:
    """Nothing loaded from anywhere; the page's own style and script only, by hash."""
    return (
        f"default-src 'none'; style-src {_source_hash(CSS)}; "
        f"script-src {_source_hash(SCRIPT)}; base-uri 'none'; form-action 'none'"
    )
