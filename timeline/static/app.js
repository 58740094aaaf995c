// zerofs timeline: the page over /api. No framework, no build step.
"use strict";

const PAGE = 50;
// ?all=1 in the page address also lists the steps that changed nothing.
const ALL = new URLSearchParams(location.search).get("all") === "1" ? "&all=1" : "";
const POLL_MS = 2000;
const $ = (id) => document.getElementById(id);

let entries = []; // newest first
let more = false;
let head = null;
let stamp = null; // /api/head's: changes whenever the history does
let mounted = null; // /api/head's: changes made now are being recorded
let diffMode = "unified";
let lastDiff = null;
let pending = null; // the request the preview dialog applies
const rendered = new Map(); // sequence -> {key, el}
const groups = new Map(); // a turn's run of entries (see runs) -> {el, steps}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// quoteName shows a name as `zerofs` (internal/quote) and git's
// core.quotePath do: as is when every character is harmless, else in
// double quotes with C escapes, each byte of a control, format or
// non-UTF-8 character as \ooo. b64, when given (the JSON's pathBytes),
// is the name's exact bytes. Names are put in the page with textContent
// only, never as HTML.
// nameParam is a name as a URL query value, from its exact bytes when it
// has them (a name that is not UTF-8).
function nameParam(s, b64) {
  if (!b64) return encodeURIComponent(s);
  return Array.from(atob(b64), (ch) => "%" + ch.charCodeAt(0).toString(16).padStart(2, "0")).join("");
}

function quoteName(s, b64) {
  if (s === undefined || s === null) return s;
  let bytes;
  if (b64) bytes = Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0));
  else bytes = new TextEncoder().encode(s);
  const dec = new TextDecoder("utf-8", {fatal: true});
  const esc = {0x22: "\\\"", 0x5c: "\\\\", 0x07: "\\a", 0x08: "\\b", 0x09: "\\t", 0x0a: "\\n", 0x0b: "\\v", 0x0c: "\\f", 0x0d: "\\r"};
  const oct = (b) => "\\" + b.toString(8).padStart(3, "0");
  let out = "", quoted = false;
  for (let i = 0; i < bytes.length;) {
    const b = bytes[i];
    if (b < 0x80) {
      if (esc[b]) { out += esc[b]; quoted = true; }
      else if (b < 0x20 || b === 0x7f) { out += oct(b); quoted = true; }
      else out += String.fromCharCode(b);
      i++;
      continue;
    }
    const n = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    let ch = null;
    try { ch = dec.decode(bytes.subarray(i, i + n)); } catch (e) { ch = null; }
    if (ch !== null && n > 1 && [...ch].length === 1 && /^[\p{L}\p{M}\p{N}\p{P}\p{S}\p{Zs}]$/u.test(ch) && ch !== "\ufffd") {
      out += ch;
      i += n;
      continue;
    }
    if (ch === null || n === 1) { out += oct(b); i++; quoted = true; continue; }
    for (let j = i; j < i + n; j++) out += oct(bytes[j]);
    i += n;
    quoted = true;
  }
  return quoted ? "\"" + out + "\"" : out;
}

// inQuotes is a label or prompt in a sentence: \u201cAdd tests\u201d, or,
// when it needs quoting, quoteName's form alone (its own double quotes).
function inQuotes(s) {
  const q = quoteName(s);
  return q.startsWith("\"") ? q : "\u201c" + q + "\u201d";
}

// The token: `zerofs ui` hands it over in the URL's fragment (#token=),
// which the browser sends to no server. The page drops it from the
// address bar, keeps it in this tab's sessionStorage (so a reload works;
// no other origin, another port of 127.0.0.1 included, can read it) and
// sends it as X-Zerofs-Token with every API request. Never a cookie: a
// browser sends a host's cookies to every port of it.
const TOKEN_KEY = "zerofs-token";
let token = null;

// takeToken reads the fragment's token, if any, into token and the tab's
// storage, and drops it from the address; true when there was one.
function takeToken() {
  const t = new URLSearchParams(location.hash.slice(1)).get("token");
  if (!t) return false;
  token = t;
  try { sessionStorage.setItem(TOKEN_KEY, t); } catch (e) { /* kept in memory only */ }
  history.replaceState(null, "", location.pathname + location.search);
  return true;
}

function loadToken() {
  if (takeToken()) return;
  try { token = sessionStorage.getItem(TOKEN_KEY); } catch (e) { token = null; }
}

const NO_TOKEN = "No token: open the URL zerofs ui printed.";

async function api(path, body) {
  if (!token) return {ok: false, status: 403, data: {error: NO_TOKEN}};
  const opts = {headers: {"X-Zerofs-Token": token}};
  if (body !== undefined) {
    opts.method = "POST";
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  const text = await r.text();
  let data = null;
  try { data = JSON.parse(text); } catch (e) { data = {error: text.trim() || r.status + " " + r.statusText}; }
  return {ok: r.ok, status: r.status, data};
}

function setStatus(text, bad) {
  const s = $("status");
  s.textContent = text;
  s.title = "";
  s.classList.toggle("error", !!bad);
  s.classList.remove("warn");
}

// showLive says where the history stands, and whether what is done in
// the workspace now is being recorded: only while it is mounted.
function showLive() {
  if (mounted === false) {
    setStatus("head " + head + " \u00b7 not mounted: nothing is being recorded");
    $("status").classList.add("warn");
    $("status").title = "Changes made in the workspace now are not recorded; zerofs mount records them again.";
    return;
  }
  setStatus("head " + head + (mounted ? " \u00b7 live" : ""));
}

// ---- the list ----

async function loadTop() {
  const r = await api("/api/log?limit=" + PAGE + ALL);
  if (!r.ok) { setStatus(r.data.error, true); return; }
  const page = r.data;
  head = page.head;
  if (page.entries.length === 0) {
    entries = [];
    more = false;
  } else {
    const oldest = oldestStep(page.entries);
    const kept = entries.filter((e) => e.sequence < oldest);
    // A gap (more than a page arrived since): start over from the top.
    const gap = page.more && kept.length === 0 && entries.length > 0;
    entries = gap || kept.length === 0 ? page.entries : merged(page.entries, kept);
    if (gap || kept.length === 0) more = page.more;
  }
  render();
  showLive();
}

// oldestStep is the sequence of the oldest entry that is not a turn: a
// page holds the prompt of every step on it, however old, so the next
// page starts below its oldest step, not below its oldest prompt.
function oldestStep(list) {
  const steps = list.filter((e) => e.type !== "turn");
  return steps.length ? steps[steps.length - 1].sequence : list[list.length - 1].sequence;
}

// merged is a and b as one list, newest first, each sequence once (a
// prompt comes again with the next page of its steps).
function merged(a, b) {
  const by = new Map();
  for (const e of a.concat(b)) by.set(e.sequence, e);
  return [...by.values()].sort((x, y) => y.sequence - x.sequence);
}

async function loadOlder() {
  if (entries.length === 0) return;
  const before = oldestStep(entries);
  $("older").disabled = true;
  const r = await api("/api/log?limit=" + PAGE + ALL + "&before=" + before);
  $("older").disabled = false;
  if (!r.ok) { setStatus(r.data.error, true); return; }
  entries = merged(entries, r.data.entries);
  more = r.data.more;
  render();
}

// Branches: the workspace's, as /api/branches lists them, read at start,
// when the history changes and every BRANCH_POLLS polls (making or
// mounting a branch need not change the history).
const BRANCH_POLLS = 5;
let polls = 0;

async function loadBranches() {
  const r = await api("/api/branches");
  if (!r.ok) return;
  const list = $("branch-list");
  list.replaceChildren(...r.data.branches.map(branchEl));
  $("branches").hidden = r.data.branches.length === 0;
}

function branchEl(b) {
  const li = el("li", "branch" + (b.mounted ? "" : " unmounted"));
  li.dataset.dir = b.dir;
  li.append(el("span", "branch-dir", quoteName(b.dir)));
  li.append(el("span", "branch-base", "from #" + b.base));
  li.append(el("span", "badge " + (b.mounted ? "mounted" : "unmounted"), b.mounted ? "mounted" : "not mounted"));
  let state;
  if (b.unmerged) state = b.changed + " changed path" + (b.changed === 1 ? "" : "s") + ", not merged";
  else if (b.merged) state = "merged as #" + b.merged;
  else state = "no changes";
  li.append(el("span", "branch-state" + (b.unmerged ? " unmerged" : ""), state));
  return li;
}

async function poll() {
  try {
    const r = await api("/api/head");
    if (r.ok) {
      if (r.data.root) $("root").textContent = quoteName(r.data.root);
      const changed = stamp !== null && r.data.stamp !== stamp;
      if (changed || polls++ % BRANCH_POLLS === 0) await loadBranches();
      stamp = r.data.stamp;
      const moved = mounted !== r.data.mounted;
      mounted = r.data.mounted;
      if (changed) await loadTop();
      else {
        if (moved) render();
        showLive();
      }
      refreshTimes();
    } else {
      setStatus(r.data.error, true);
    }
  } catch (e) {
    setStatus("server unreachable", true);
  }
  setTimeout(poll, POLL_MS);
}

// runs cuts the entries (newest first) into what the list shows: an
// entry outside any turn stands alone; a turn's prompt heads the steps it
// led to, which follow it in time and so come before it, newest first
// (as `zerofs log` groups them). A run is one turn's consecutive entries:
// two agent sessions at work at once can split a turn into several runs,
// and a page can end before a turn's prompt (Older steps brings it).
function runs() {
  const out = [];
  let run = null;
  for (const e of entries) {
    const t = e.type === "turn" ? e.sequence : e.type === "gc" ? 0 : e.turn || 0;
    if (t === 0) { out.push(e); run = null; continue; }
    if (!run || run.turn !== t) { run = {turn: t, steps: [], prompt: null}; out.push(run); }
    if (e.type === "turn") { run.prompt = e; run = null; } else run.steps.push(e);
  }
  return out;
}

// place makes els the children of parent, in order, moving what is there.
function place(parent, els) {
  els.forEach((x, i) => {
    if (parent.children[i] !== x) parent.insertBefore(x, parent.children[i] || null);
  });
  while (parent.children.length > els.length) parent.lastElementChild.remove();
}

function render() {
  const list = $("entries");
  const seen = new Set();
  const entryNode = (e) => {
    const key = e.end + ":" + e.changes.length + ":" + (e.turn || 0) + ":" + JSON.stringify(e.lines || {});
    let r = rendered.get(e.sequence);
    if (!r || r.key !== key) {
      const fresh = entryEl(e);
      if (r) r.el.replaceWith(fresh);
      r = {key, el: fresh};
      rendered.set(e.sequence, r);
    }
    seen.add(e.sequence);
    return r.el;
  };
  const used = new Set();
  const top = runs().map((x) => {
    if (!x.turn) return entryNode(x);
    const known = x.prompt || entries.find((e) => e.type === "turn" && e.sequence === x.turn);
    const last = x.steps.length ? x.steps[x.steps.length - 1].sequence : x.turn;
    const key = x.turn + ":" + last + ":" + (x.prompt ? "own" : known ? "known" : "unknown");
    let g = groups.get(key);
    if (!g) {
      const li = el("li", "turn-group");
      li.dataset.turn = x.turn;
      g = {el: li, steps: el("ol", "turn-steps"), head: x.prompt ? null : contEl(x.turn, known)};
      groups.set(key, g);
    }
    used.add(key);
    place(g.steps, x.steps.map(entryNode));
    place(g.el, [x.prompt ? entryNode(x.prompt) : g.head, g.steps]);
    return g.el;
  });
  place(list, top);
  for (const [k] of groups) if (!used.has(k)) groups.delete(k);
  for (const [seq, r] of rendered) {
    if (!seen.has(seq)) { r.el.remove(); rendered.delete(seq); }
  }
  $("older").hidden = !more;
  $("end").hidden = more || entries.length === 0;
  if (entries.length === 0) {
    list.replaceChildren(el("li", "empty muted", mounted === false
      ? "No steps yet. Changes made in the workspace are recorded only while it is mounted (zerofs mount)."
      : "No steps yet. Changes made in the workspace appear here."));
    rendered.clear();
    groups.clear();
  }
}

// fmtTime is a time with its date and how long ago it was:
// "2026-12-03 17:40 · 3 min ago" (the exact time is the element's title).
function fmtTime(iso) {
  const d = new Date(iso);
  const pad = (n) => String(n).padStart(2, "0");
  const date = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate());
  return date + " " + pad(d.getHours()) + ":" + pad(d.getMinutes()) + " \u00b7 " + ago(d);
}

function ago(d) {
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  const n = (v, unit) => v + " " + unit + (v === 1 ? "" : "s") + " ago";
  if (s < 45) return "just now";
  const m = Math.round(s / 60);
  if (m < 60) return m + " min ago";
  const h = Math.round(m / 60);
  if (h < 24) return n(h, "hour");
  const days = Math.round(h / 24);
  if (days < 31) return n(days, "day");
  const months = Math.round(days / 30.4);
  if (months < 12) return n(months, "month");
  return n(Math.round(days / 365), "year");
}

// The relative times age: refreshed with every poll.
function refreshTimes() {
  document.querySelectorAll(".entry time").forEach((t) => { t.textContent = fmtTime(t.dateTime); });
}

function title(e) {
  const t = baseTitle(e);
  return e.statesThinned ? t + " (thinned)" : t;
}

// Titles are sentences about steps, by their labels; sequence numbers
// stay in the entry's corner (#N), out of the sentences.
function baseTitle(e) {
  if (e.type === "gc" && e.thinned) return "Older history thinned to one state a day";
  if (e.type === "gc") return "Older history pruned";
  // A rewind is named as the CLI's log and zerofs_log name it: the
  // server's words (history's Block.Title), never worded here.
  if (e.type === "rewind") return capital(e.title || "rewind");
  if (e.person) return "a person's change (outside the agents)";
  if (e.implicit) return "(no step)" + (e.label ? " " + quoteName(e.label) : "");
  return quoteName(e.label) || "step " + e.sequence;
}

// entryAt is the listed step or rewind holding the sequence s.
function entryAt(s) {
  if (s && typeof s === "object") s = s.sequence;
  return entries.find((x) => x.type !== "gc" && x.start <= s && s <= x.end);
}

// capital is s with its first letter upper-case.
function capital(s) {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

// stepCalled names a step by its label: \u201cEdit main.go\u201d.
function stepCalled(s) {
  const e = entryAt(s);
  if (!e) return "an earlier step";
  if (e.type === "rewind") return "a rewind";
  return e.label ? inQuotes(e.label) : "a step with no label";
}

// stateCalled names a state by the step it follows or precedes.
function stateCalled(t) {
  if (t === 0) return "the start";
  const after = entries.find((x) => x.type === "step" && x.end === t);
  if (after) return "after " + stepCalled(after.sequence);
  const before = entries.find((x) => x.type === "step" && x.before === t);
  if (before) return "before " + stepCalled(before.sequence);
  return "an earlier state";
}

const CHANGE = {added: "A", deleted: "D", modified: "M", mode: "P", xattrs: "X", renamed: "R", skipped: "S", unknown: "?"};

// promptLine is a prompt's first line, cut to n characters, with "…"
// where something was left out (as the CLI's log shows it).
function promptLine(p, n) {
  const lines = p.trim().split("\n");
  const first = [...lines[0].trim()];
  if (first.length > n) return first.slice(0, n - 1).join("") + "\u2026";
  return first.join("") + (lines.slice(1).join("\n").trim() ? " \u2026" : "");
}

// contEl heads a run of a turn's steps whose prompt is not the run's
// own: another agent session's steps came in between (the prompt is
// further down, known), or the prompt is on a page not loaded yet.
function contEl(seq, known) {
  const d = el("div", "entry turn cont");
  d.dataset.seq = seq;
  const h = el("div", "head");
  const what = !known ? "An earlier prompt (Older steps shows it)"
    : (known.prompt ? inQuotes(promptLine(known.prompt, 200)) : "(prompt kept out)") + " (continued)";
  h.append(el("span", "badge turn", "prompt"), el("span", "label", what));
  const meta = el("span", "meta");
  meta.append(el("span", "seq", "#" + seq));
  h.append(meta);
  d.append(h);
  return d;
}

// turnEl is a turn's prompt card, the head of its group.
function turnEl(e) {
  const li = el("div", "entry turn");
  li.dataset.seq = e.sequence;
  const h = el("div", "head");
  const prompt = e.prompt ? inQuotes(promptLine(e.prompt, 200)) : "(prompt kept out)";
  h.append(el("span", "badge turn", "prompt"), el("span", "label", prompt));
  const meta = el("span", "meta");
  meta.append(el("span", "seq", "#" + e.sequence));
  if (e.agent) meta.append(el("span", "agent", quoteName(e.agent)));
  const t = el("time", "", fmtTime(e.time));
  t.dateTime = e.time;
  t.title = e.time;
  meta.append(t);
  h.append(meta);
  li.append(h);
  const acts = el("div", "actions");
  acts.append(button("Rewind to before this prompt", "rewind", () => preview("Rewind the workspace to before this prompt (" + e.before + "): everything done since, commands included", {target: e.before})));
  li.append(acts);
  return li;
}

function entryEl(e) {
  if (e.type === "turn") return turnEl(e);
  const li = el("li", "entry " + e.type + (e.implicit ? " implicit" : "") + (e.turn ? " inturn" : "") + (e.outcome === "failed" ? " failed" : ""));
  li.dataset.seq = e.sequence;
  const h = el("div", "head");
  const merge = e.type === "rewind" && e.rewind && e.rewind.merge;
  h.append(el("span", "badge " + (merge ? "merge" : e.type), e.person ? "person" : e.implicit ? "outside" : merge ? "merge" : e.type), el("span", "label", title(e)));
  if (e.result) {
    // The tool call's result: a mark (failed, ok, or a dot when the agent
    // did not say) and how long it took, the error's first line on hover.
    const r = el("span", "outcome " + (e.outcome || "unsaid"), (e.outcome || "done") + (e.took ? " · " + e.took : ""));
    if (e.result.summary) r.title = e.result.summary;
    h.append(r);
  }
  const meta = el("span", "meta");
  meta.append(el("span", "seq", "#" + e.sequence));
  const t = el("time", "", fmtTime(e.time));
  t.dateTime = e.time;
  t.title = e.time;
  meta.append(t);
  h.append(meta);
  li.append(h);
  if (merge) li.append(mergeEl(merge));
  if (e.procs && e.procs.length) {
    li.append(el("div", "procs", "by " + e.procs.map((p) => (quoteName(p.comm) || "?") + " (" + p.pid + ")").join(", ")));
  }
  if (e.type !== "gc") {
    if (e.changes.length === 0) li.append(el("div", "nochange muted", "changed nothing"));
    const ul = el("ul", "files");
    for (const c of e.changes) ul.append(fileEl(e, c));
    li.append(ul);
  }
  const acts = el("div", "actions");
  if (e.type === "step" && e.changes.length > 0) {
    acts.append(button("Revert step", "revert", () => preview("Revert " + stepName(e) + ", keeping later changes", {revert: e.sequence})));
    acts.append(button("Rewind to before", "rewind", () => preview("Rewind the whole workspace to before " + stepName(e), {target: e.before})));
  }
  if (e.type === "rewind" && e.changes.length > 0) {
    acts.append(button("Undo", "undo", () => preview("Undo this: " + baseTitle(e).replace(/^./, (c) => c.toLowerCase()), {target: e.before})));
  }
  if (acts.childElementCount) li.append(acts);
  return li;
}

// mergeEl says what a merge brought in, from its record: the branch (or
// fork) and the state of this workspace it began from (a branch merged
// before: that merge, whose state of it was this merge's base), and its
// steps, numbered in its own log (they are not steps of this timeline).
function mergeEl(m) {
  const d = el("div", "merge-info");
  const side = m.branch ? "the branch " : "the fork ";
  d.append(el("div", "merge-from", "from " + side + quoteName(m.dir) + ", which began at #" + m.base + " of this workspace" +
    (m.since ? ", merged before as #" + m.since + ": what it did since" : "")));
  const steps = m.steps || [];
  if (steps.length === 0) d.append(el("div", "muted", "its history recorded no steps"));
  else {
    d.append(el("div", "merge-head", steps.length === 1 ? "brought in its step" : "brought in its " + steps.length + " steps"));
    const ol = el("ol", "merge-steps");
    for (const s of steps) {
      const li = el("li", "merge-step");
      li.append(el("span", "seq", "#" + s.sequence), el("span", "label", s.label ? quoteName(s.label) : s.implicit ? "(no step)" : "a step with no label"));
      ol.append(li);
    }
    d.append(ol);
  }
  if (m.merged && m.merged.length) d.append(el("div", "merge-lines", "merged line by line: " + m.merged.map((p) => quoteName(p)).join(", ")));
  if (m.settled && m.settled.length) d.append(el("div", "merge-settled", "settled by taking " + (m.settledAs === "ours" ? "this workspace's side" : "its side") + ": " + m.settled.map((p) => quoteName(p)).join(", ")));
  return d;
}

function stepName(e) {
  return e.label ? inQuotes(e.label) : "the step";
}

function button(text, cls, fn) {
  const b = el("button", cls, text);
  b.addEventListener("click", (ev) => { ev.stopPropagation(); fn(); });
  return b;
}

function fileEl(e, c) {
  const li = el("li", "file");
  li.append(el("span", "chg chg-" + c.change, CHANGE[c.change] || "?"));
  const a = el("a", "path");
  a.href = "#";
  let name = quoteName(c.path, c.pathBytes) + (c.kind === "dir" ? "/" : "");
  if (c.from) name = quoteName(c.from, c.fromBytes) + " \u2192 " + name;
  a.textContent = name;
  const tip = [c.change];
  if (c.kind === "symlink") tip.push("symlink" + (c.target ? " to " + quoteName(c.target, c.targetBytes) : ""));
  if (c.oldKind) tip.push("was " + c.oldKind);
  if (c.mode || c.oldMode) tip.push("mode " + oct(c.oldMode) + " \u2192 " + oct(c.mode));
  if (c.xattrs) tip.push("xattrs " + c.xattrs.map((x) => quoteName(x)).join(", "));
  if (c.reason) tip.push(quoteName(c.reason));
  a.title = tip.join(", ");
  a.addEventListener("click", (ev) => { ev.preventDefault(); showDiff(e, c, li); });
  li.append(a);
  const info = el("span", "info");
  const l = e.lines && e.lines[c.path];
  if (c.mode || c.oldMode) info.append(el("span", "mode", oct(c.oldMode) + "\u2192" + oct(c.mode)));
  if (c.kind === "symlink") info.append(el("span", "tag", "symlink"));
  if (l && l.binary) info.append(el("span", "tag", "binary"));
  else if (l && (l.added || l.removed)) {
    info.append(el("span", "add", "+" + l.added), el("span", "del", "\u2212" + l.removed));
  }
  // The counts keep to the row's right edge, in columns of their own, the
  // same for every row: the button (shown on hover) goes before them.
  if (e.type === "step" && c.change !== "skipped" && c.change !== "unknown") {
    const paths = c.from ? [c.path, c.from] : [c.path];
    // A name that is not UTF-8 goes by its exact bytes: its readable form
    // (each odd byte U+FFFD) may name another file.
    const pathsBytes = c.from ? [c.pathBytes || "", c.fromBytes || ""] : [c.pathBytes || ""];
    const names = paths.map((p, i) => quoteName(p, pathsBytes[i])).join(" and ");
    // Restoring a path the step added removes it: say so.
    const [label, what] = c.change === "added"
      ? ["Remove (as before the step)", "Remove " + names + ", as before " + stepName(e)]
      : c.change === "renamed"
        ? ["Restore (undo the move)", "Move " + quoteName(c.path, c.pathBytes) + " back to " + quoteName(c.from, c.fromBytes) + ", as before " + stepName(e)]
        : ["Restore", "Restore " + names + " as it was before " + stepName(e)];
    const req = {target: e.before, paths};
    if (pathsBytes.some((b) => b)) req.pathsBytes = pathsBytes;
    const b = button(label, "restore", () => preview(what, req));
    b.title = what;
    li.append(b);
  }
  li.append(info);
  return li;
}

function oct(m) { return m ? "0" + (m & 0o7777).toString(8) : "?"; }

// ---- diffs ----

// diffWanted counts the diffs asked for and closed: a diff that arrives
// after a later click, or after the panel was closed, is not shown.
let diffWanted = 0;

async function showDiff(e, c, li) {
  document.querySelectorAll(".file.selected").forEach((x) => x.classList.remove("selected"));
  if (li) li.classList.add("selected");
  const q = new URLSearchParams({a: e.before, b: e.after || e.end});
  let qs = q.toString() + "&path=" + nameParam(c.path, c.pathBytes);
  if (c.from) qs += "&path=" + nameParam(c.from, c.fromBytes);
  const wanted = ++diffWanted;
  const r = await api("/api/diff?" + qs);
  if (wanted !== diffWanted) return;
  $("placeholder").hidden = true;
  $("diff").hidden = false;
  $("diff-title").textContent = (c.from ? quoteName(c.from, c.fromBytes) + " \u2192 " : "") + quoteName(c.path, c.pathBytes) + "  \u00b7  " + baseTitle(e);
  document.body.classList.add("diff-open");
  lastDiff = r.ok ? r.data : {error: r.data.error};
  drawDiff();
}

function drawDiff() {
  const body = $("diff-body");
  body.replaceChildren();
  if (!lastDiff) return;
  if (lastDiff.error) { body.append(el("p", "error", lastDiff.error)); return; }
  if (lastDiff.length === 0) { body.append(el("p", "muted", "No difference (a directory, or it ended as it began).")); return; }
  for (const fd of lastDiff) {
    const box = el("div", "filediff");
    box.append(el("div", "fdhead", (fd.from ? quoteName(fd.from, fd.fromBytes) + " \u2192 " : "") + quoteName(fd.path, fd.pathBytes)));
    if (fd.from) {
      const sim = /^similarity index (\d+)%/m.exec(fd.text);
      box.append(el("div", "fdnote", "renamed" + (sim ? ", " + sim[1] + "% alike" : "")));
    }
    if (fd.binary) {
      box.append(el("div", "binary", "Binary file: contents not shown"));
    } else {
      const hunks = parse(fd.text);
      if (hunks.length === 0) box.append(el("div", "binary", header(fd.text) || "no content change"));
      else box.append(diffMode === "split" ? splitTable(hunks) : unifiedTable(hunks));
    }
    body.append(box);
  }
}

// header is the lines before the first hunk that say more than the names
// (new file, deleted file, mode changes).
function header(text) {
  return text.split("\n").filter((l) => /^(new|deleted) file|^old mode|^new mode|^similarity|^rename/.test(l)).join("; ");
}

function parse(text) {
  const hunks = [];
  let h = null, a = 0, b = 0;
  for (const line of text.split("\n")) {
    const m = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@(.*)$/.exec(line);
    if (m) {
      a = +m[1]; b = +m[2];
      h = {head: line, lines: []};
      hunks.push(h);
      continue;
    }
    if (!h || line === "" ) continue;
    const s = line[0], t = line.slice(1);
    if (s === "+") h.lines.push({k: "add", b: b++, t});
    else if (s === "-") h.lines.push({k: "del", a: a++, t});
    else if (s === " ") h.lines.push({k: "ctx", a: a++, b: b++, t});
    else if (s === "\\") h.lines.push({k: "note", t: line});
  }
  return hunks;
}

function row(cells) {
  const tr = el("tr");
  for (const [cls, text] of cells) tr.append(el("td", cls, text === undefined ? "" : String(text)));
  return tr;
}

function cols(t, widths) {
  const g = el("colgroup");
  for (const w of widths) { const c = el("col"); if (w) c.style.width = w; g.append(c); }
  t.append(g);
}

function unifiedTable(hunks) {
  const t = el("table", "diff unified");
  cols(t, ["3.5em", "3.5em", ""]);
  for (const h of hunks) {
    t.append(row([["hunk", ""], ["hunk", ""], ["hunk", h.head]]));
    for (const l of h.lines) {
      const sign = l.k === "add" ? "+" : l.k === "del" ? "-" : " ";
      t.append(row([["num", l.a], ["num", l.b], ["code " + l.k, l.k === "note" ? l.t : sign + l.t]]));
    }
  }
  return t;
}

function splitTable(hunks) {
  const t = el("table", "diff split");
  cols(t, ["3.5em", "", "3.5em", ""]);
  for (const h of hunks) {
    t.append(row([["hunk", ""], ["hunk", h.head], ["hunk", ""], ["hunk", ""]]));
    let dels = [], adds = [];
    const flush = () => {
      for (let i = 0; i < Math.max(dels.length, adds.length); i++) {
        const d = dels[i], a = adds[i];
        t.append(row([["num", d ? d.a : ""], ["code " + (d ? "del" : "none"), d ? d.t : ""],
          ["num", a ? a.b : ""], ["code " + (a ? "add" : "none"), a ? a.t : ""]]));
      }
      dels = []; adds = [];
    };
    for (const l of h.lines) {
      if (l.k === "del") dels.push(l);
      else if (l.k === "add") adds.push(l);
      else {
        flush();
        if (l.k === "ctx") t.append(row([["num", l.a], ["code ctx", l.t], ["num", l.b], ["code ctx", l.t]]));
      }
    }
    flush();
  }
  return t;
}

function setMode(m) {
  diffMode = m;
  $("mode-unified").classList.toggle("on", m === "unified");
  $("mode-split").classList.toggle("on", m === "split");
  drawDiff();
}

// ---- actions ----

async function preview(what, req) {
  const dlg = $("preview");
  $("preview-title").textContent = what;
  $("preview-summary").textContent = "Working out what would change\u2026";
  $("preview-list").replaceChildren();
  $("preview-error").hidden = true;
  $("preview-apply").disabled = true;
  pending = null;
  if (!dlg.open) dlg.showModal();
  const r = await api("/api/rewind", Object.assign({dryRun: true}, req));
  const rep = r.data.report || {};
  const rr = rep.report || {restored: 0, deleted: 0, skipped: []};
  // The counts are the rows' own, so the summary and the list agree.
  const n = {restore: 0, create: 0, delete: 0};
  for (const c of rep.preview || []) n[c.action] = (n[c.action] || 0) + 1;
  const parts = [];
  if (n.restore) parts.push("restore " + n.restore);
  if (n.create) parts.push("create " + n.create);
  if (n.delete) parts.push("delete " + n.delete);
  if ((rr.skipped || []).length) parts.push("skip " + rr.skipped.length);
  // The server's words for the report (history.Describe), as the CLI
  // prints them; the counts per action follow, from the rows themselves.
  const counts = parts.length ? "Would " + parts.join(", ") + "." : "Would change nothing.";
  $("preview-summary").textContent = r.data.text ? capital(r.data.text) : counts;
  const ul = $("preview-list");
  for (const c of rep.preview || []) {
    const li = el("li", "pv " + c.action);
    li.append(el("span", "act", c.action), el("span", "path", quoteName(c.path, c.pathBytes) + (c.kind === "dir" ? "/" : "")));
    if (c.lines && (c.lines.added || c.lines.removed)) {
      li.append(el("span", "add", "+" + c.lines.added), el("span", "del", "\u2212" + c.lines.removed));
    }
    ul.append(li);
  }
  (rr.skipped || []).forEach((p, i) => ul.append(el("li", "pv skip", "skip " + quoteName(p, (rr.skippedBytes || [])[i]) + " (its earlier state was not kept)")));
  for (const f of rep.foreign || []) ul.append(el("li", "pv foreign", (f.kept ? "leaves alone " : "overwrites ") + quoteName(f.path, f.pathBytes) + ", changed " + f.why + " by " + quoteName(f.comm) + " (" + f.pid + ")"));
  (rep.conflicts || []).forEach((p, i) => ul.append(el("li", "pv conflict", "conflict: " + quoteName(p, (rep.conflictsBytes || [])[i]) + " changed later")));
  if ((rep.preview || []).length === 0 && !r.data.error) ul.append(el("li", "muted", "nothing to change"));
  const applyBtn = $("preview-apply");
  applyBtn.textContent = "Apply";
  applyBtn.onclick = apply;
  if (!r.ok) {
    $("preview-error").textContent = r.data.error;
    $("preview-error").hidden = false;
    if (req.revert && !req.force && (rep.conflicts || []).length) {
      // A revert refused for later changes: offer to put those back too.
      applyBtn.textContent = "Preview with force";
      applyBtn.onclick = () => preview(what + ", putting back later changes too", Object.assign({}, req, {force: true}));
      applyBtn.disabled = false;
    }
    return;
  }
  pending = req;
  // Nothing to apply: the engine would change and record nothing.
  applyBtn.disabled = (rep.preview || []).length === 0 && !(rr.skipped || []).length;
}

async function apply() {
  if (!pending) return;
  const req = pending;
  pending = null;
  $("preview-apply").disabled = true;
  const r = await api("/api/rewind", req);
  if (!r.ok) {
    $("preview-error").textContent = r.data.error;
    $("preview-error").hidden = false;
    return;
  }
  $("preview").close();
  const rep = r.data.report;
  if (rep.unchanged) {
    toast(capital(r.data.text || "nothing to change") + " (nothing recorded).", null);
    await loadTop();
    return;
  }
  // The server's words for what was done (history.Describe).
  toast(capital(r.data.text || "done") + ".", rep.checkpointSequence > 0 ? rep.checkpointSequence - 1 : null);
  await loadTop();
}

function toast(msg, undoTarget) {
  $("toast-text").textContent = msg;
  const u = $("toast-undo");
  u.hidden = undoTarget === null;
  u.onclick = () => { $("toast").hidden = true; preview("Undo that", {target: undoTarget}); };
  $("toast").hidden = false;
}

document.addEventListener("DOMContentLoaded", () => {
  $("older").addEventListener("click", loadOlder);
  $("mode-unified").addEventListener("click", () => setMode("unified"));
  $("mode-split").addEventListener("click", () => setMode("split"));
  $("preview-cancel").addEventListener("click", () => { pending = null; $("preview").close(); });
  $("toast-close").addEventListener("click", () => { $("toast").hidden = true; });
  $("diff-close").addEventListener("click", () => {
    diffWanted++;
    document.body.classList.remove("diff-open");
    document.querySelectorAll(".file.selected").forEach((x) => x.classList.remove("selected"));
  });
  // The printed URL opened again in this tab (perhaps of a restarted
  // zerofs ui, with a new token) changes only the fragment: no reload.
  window.addEventListener("hashchange", () => { if (takeToken()) loadTop(); });
  loadToken();
  loadTop().then(poll);
});
