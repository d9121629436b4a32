// The baton dashboard: vanilla JavaScript, no framework, no bundler, nothing from the
// network. Every node is built with createElement and textContent: no text from the
// server (objectives, model output, logs, diffs) is ever parsed as HTML.
"use strict";

const S = { csrf: "", poolIds: [], es: null, runEs: null, runEsId: null, view: null, timers: {} };
const $ = (id) => document.getElementById(id);

// h("div.a.b", {title: "x", onclick: f}, child, "text", [more]) builds an element.
function h(spec, attrs, ...kids) {
  const el = document.createElement(spec.match(/^[a-z0-9]*/)[0] || "div");
  const id = spec.match(/#([\w-]+)/);
  if (id) el.id = id[1];
  const cls = spec.match(/\.[\w-]+/g);
  if (cls) el.className = cls.map((c) => c.slice(1)).join(" ");
  if (attrs !== undefined && attrs !== null && (typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs))) {
    kids.unshift(attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  add(el, kids);
  return el;
}
function add(el, kids) {
  for (const k of kids.flat(Infinity)) {
    if (k == null || k === false) continue;
    el.appendChild(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return el;
}
const clear = (el, ...kids) => { el.replaceChildren(); return add(el, kids); };
const n = (x) => (x == null ? "–" : Number(x).toLocaleString("en"));
// Ids are time-ordered (UUIDv7): their tails tell them apart.
const short = (id) => { const s = String(id || ""); return s.length > 14 ? s.slice(0, 6) + "…" + s.slice(-5) : s; };
const pill = (s) => h("span.pill." + String(s || "").replace(/[^a-z_]/g, ""), String(s || ""));
function when(ms) {
  if (!ms) return "–";
  const d = new Date(ms), s = (Date.now() - ms) / 1000;
  const t = d.toLocaleTimeString("en-GB");
  if (s < 60) return t + " (just now)";
  if (s < 3600) return t + " (" + Math.round(s / 60) + " min ago)";
  if (s < 86400) return t + " (" + Math.round(s / 3600) + " h ago)";
  return d.toLocaleDateString("en-GB") + " " + t;
}
const clock = (ms) => (ms ? new Date(ms).toLocaleTimeString("en-GB") : "–");
function bar(frac, big) {
  const f = Math.max(0, Math.min(1, frac || 0));
  const i = h("i" + (f >= 1 ? ".full" : f > 0.8 ? ".hi" : ""));
  i.style.width = (f * 100).toFixed(1) + "%";
  return h("div.bar" + (big ? ".big" : ""), i);
}
function debounce(key, ms, fn) {
  clearTimeout(S.timers[key]);
  S.timers[key] = setTimeout(fn, ms);
}

// ---- API ---------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || "HTTP " + status);
    this.status = status;
  }
}
async function api(path, body) {
  const opt = { credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    opt.method = "POST";
    opt.headers["content-type"] = "application/json";
    opt.headers["x-baton-csrf"] = S.csrf;
    opt.body = JSON.stringify(body);
  }
  const r = await fetch("/api" + path, opt);
  let data = null;
  try { data = await r.json(); } catch (_) { /* an empty or non-JSON body */ }
  if (!r.ok) throw new ApiError(r.status, data);
  return data;
}
const errorBox = (e) => h("div.error", { role: "alert" }, String(e.message || e));

// ---- boot, routing, live stream ----------------------------------------------------

async function boot() {
  try {
    const s = await api("/session");
    S.csrf = s.csrf;
    $("conn").title = "baton " + s.version + " · database " + s.database + " · " + s.bind;
  } catch (e) {
    if (e.status === 401) return needToken();
    clear($("main"), errorBox(e));
    return;
  }
  // Pools get their colours in the configuration's order, the same on every view.
  try { for (const p of (await api("/pools")).pools) poolColor(p.id); } catch (_) { /* no pools */ }
  // A token given in the address was turned into a cookie: keep it out of history.
  if (location.search.includes("token=")) history.replaceState(null, "", "/" + location.hash);
  listen();
  window.addEventListener("hashchange", route);
  route();
}

function needToken() {
  $("conn").textContent = "token needed";
  $("conn").className = "conn down";
  $("side").remove();
  $("layout").style.display = "block";
  document.querySelector("nav").remove();
  clear($("main"), h("div.banner#token-needed", { role: "alert" },
    h("h1", "This server needs its token"),
    location.search.includes("token=") ? h("p.error", "The token in this address is not this server's.") : null,
    h("p", "baton serve was started with a token (--token or BATON_TOKEN), so every request must carry it. Nothing is shown without it."),
    h("p", "Open this page once with the token in the address; it is then kept in a cookie only this server is sent, and removed from the address bar:"),
    h("pre", location.origin + "/?token=YOUR_TOKEN"),
    h("p.muted", "API clients send it as the header Authorization: Bearer YOUR_TOKEN.")));
}

// An EventSource that comes back: the browser reconnects by itself after a dropped
// connection (with Last-Event-ID), but gives up for good on an error answer (a server
// restarting, a store briefly away); then a new one resumes after the last event seen.
function stream(url, onMessage, onState, onStart) {
  const s = { es: null, last: null, closed: false, wait: 500 };
  const open = () => {
    const sep = url.includes("?") ? "&" : "?";
    const es = new EventSource(s.last === null ? url : url + sep + "after=" + encodeURIComponent(s.last));
    s.es = es;
    es.onopen = () => { s.wait = 500; if (onState) onState(true); };
    es.onerror = () => {
      if (onState) onState(false);
      if (es.readyState === EventSource.CLOSED && !s.closed) {
        setTimeout(() => { if (!s.closed) open(); }, s.wait);
        s.wait = Math.min(s.wait * 2, 10000);
      }
    };
    es.onmessage = (m) => { if (m.lastEventId) s.last = m.lastEventId; onMessage(m); };
    // Where the server started this stream: resumed from there if it drops before any event.
    // Every event before it is in the store: a view drawn before the stream began is
    // drawn again (onStart), so nothing committed in between is missing from it.
    es.addEventListener("start", (m) => {
      if (s.last === null && m.lastEventId) s.last = m.lastEventId;
      if (onStart) onStart();
    });
  };
  open();
  s.close = () => { s.closed = true; if (s.es) s.es.close(); };
  return s;
}

function listen() {
  if (S.es) S.es.close();
  const conn = $("conn");
  S.es = stream("/api/events", onGlobal, (up) => {
    conn.textContent = up ? "live" : "reconnecting…";
    conn.className = up ? "conn live" : "conn down";
  });
}

function onGlobal(m) {
  let ev;
  try { ev = JSON.parse(m.data); } catch (_) { return; }
  debounce("runs", 250, loadRuns);
  // The floor and the jobs redraw in place (the view that asked, if still shown).
  const again = S.again, gen = S.gen;
  if (again && /seated|turn_committed|run_|job|gate|judged|lease/.test(ev.type)) {
    debounce("again", 300, () => { if (gen === S.gen) again(); });
  }
}

function runStream(id, onEvent) {
  if (S.runEsId === id && S.runEs) { S.runEs.onEvent = onEvent; return; }
  closeRunStream();
  const es = stream("/api/events?run=" + encodeURIComponent(id),
    (m) => { try { es.onEvent(JSON.parse(m.data)); } catch (_) { /* skip */ } },
    null, () => es.onEvent({ type: "stream_start" }));
  es.onEvent = onEvent;
  S.runEs = es;
  S.runEsId = id;
}
function closeRunStream() {
  if (S.runEs) S.runEs.close();
  S.runEs = null;
  S.runEsId = null;
}

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const [a, b, c, d] = parts;
  for (const el of document.querySelectorAll("nav a")) {
    el.classList.toggle("on", el.dataset.nav === (a === "floor" || a === "jobs" ? a : "runs"));
  }
  if (!(a === "runs" && b)) closeRunStream();
  S.view = a || "runs";
  S.run = a === "runs" ? b : null;
  // Each page drawn belongs to one visit: work finishing after the next visit began
  // draws nothing.
  S.gen = (S.gen || 0) + 1;
  S.again = null;
  clear($("main"), h("p.muted", "Loading…"));
  loadRuns();
  if (a === "runs" && b && c === "briefing") return briefing(b, Number(d) || 0);
  if (a === "runs" && b) return runView(b);
  if (a === "floor") return floor();
  if (a === "jobs" && b) return jobView(b);
  if (a === "jobs") return jobs();
  return home();
}

// ---- the side bar: runs and units, and a new unit ----------------------------------

let sideBuilt = false;
function buildSide() {
  const side = $("side");
  const desc = h("input#unit-desc", { type: "text", placeholder: "Describe a unit of work…", "aria-label": "unit description" });
  const offline = h("input#unit-offline", { type: "checkbox" });
  const msg = h("div.sub#unit-msg");
  const form = h("form.row#new-unit", {
    onsubmit: async (e) => {
      e.preventDefault();
      if (!desc.value.trim()) return desc.focus();
      const btn = form.querySelector("button");
      btn.disabled = true;
      try {
        const r = await api("/units", { description: desc.value, offline: offline.checked });
        desc.value = "";
        clear(msg, r.said);
        location.hash = "#/runs/" + r.unit;
      } catch (err) {
        clear(msg, errorBox(err));
      } finally {
        btn.disabled = false;
      }
    },
  }, desc, h("button.primary", { type: "submit" }, "Start"),
  h("label.check", offline, "offline mock workers"));
  clear(side, h("h2", "New unit"), form, msg, h("h2.gap", "Runs and units"), h("ul.runs#runs"));
  sideBuilt = true;
}

async function loadRuns() {
  if (!sideBuilt) buildSide();
  let data;
  try { data = await api("/runs"); } catch (e) { return; }
  const runs = data.runs.slice().sort((x, y) => y.updated_at - x.updated_at);
  S.runs = runs;
  const list = $("runs");
  if (!list) return;
  clear(list, runs.length ? runs.map((r) => h("li", h("a" + (r.id === S.run ? ".on" : ""), { href: "#/runs/" + r.id, "data-run": r.id },
    h("span.obj", r.objective),
    h("span.meta", pill(r.status), r.unit ? h("span.pill", "unit") : null, n(r.turns) + " turns · " + short(r.id))))) :
    h("li.muted", "No runs yet. Start a unit above, or `baton demo` in a shell."));
}

function home() {
  const main = $("main");
  clear(main, h("div.panel", h("h1", "baton"),
    h("p", "Pick a run or a unit on the left to watch it live, or start a unit. ",
      "The floor shows who holds which seat, the pin log and pool headroom; jobs show the queue, outbox and judgements."),
    h("p.muted", "Everything here is served by the baton binary itself; nothing is fetched from the network.")));
}

// ---- a run or a unit, live ---------------------------------------------------------

async function runView(id) {
  const live = h("div.live#live");
  // Each part redraws in its own slot; the question's is left alone while the question
  // is the same, so an answer being typed is never wiped by a redraw.
  const slots = { head: h("div"), question: h("div"), unit: h("div"), turns: h("div") };
  const st = { id, seen: new Set(), first: true, live, gen: S.gen, slots, asking: null };
  const refresh = () => debounce("run", 120, () => drawRun(st));
  runStream(id, (ev) => {
    if (ev.type !== "stream_start") clear(live, liveLine(ev));
    // The page changes when a turn ends, a seat is filled or the run stops; the live
    // line says the rest.
    if (/turn_committed|turn_abandoned|seated|step_done|run_|roster_changed|worker_fell_back|stream_start/.test(ev.type)) refresh();
  });
  await drawRun(st);
}

function liveLine(ev) {
  const t = ev.turn != null ? "turn " + ev.turn + ": " : "";
  switch (ev.type) {
    case "turn_started": return [t, "started, ", h("b", ev.worker), " (" + ev.model + ")"];
    case "seated": return [t, "seat " + ev.seat + " → ", h("b", ev.worker), " from pool " + ev.pool];
    case "model_called": return [t, ev.worker + " " + ev.call + " call: " + n(ev.tokens_sent) + " tokens sent, " + n(ev.tokens_received) + " back"];
    case "turn_committed": return [t, "committed by ", h("b", ev.worker)];
    case "claim_refused": return [t, "claim refused"];
    case "run_blocked": return ["stopped for a human"];
    case "run_finished": return ["finished"];
    default: return [t, ev.type.replace(/_/g, " ")];
  }
}

async function drawRun(st) {
  const id = st.id;
  let run, unit = null, pins = [];
  const me = st.asked = (st.asked || 0) + 1;
  try {
    run = await api("/runs/" + encodeURIComponent(id));
    if (run.unit) [unit, pins] = await Promise.all([api("/units/" + id), api("/pins?run=" + id).then((p) => p.pins)]);
    else if (run.report.run.status === "blocked") {
      // A plain run's question is its last run_blocked event's.
      const evs = (await api("/runs/" + id + "/events")).events.filter((e) => e.type === "run_blocked");
      if (evs.length) run.question = evs[evs.length - 1].question;
    }
  } catch (e) {
    if (st.gen === S.gen) clear($("main"), errorBox(e));
    st.first = true;
    st.asking = null;
    return;
  }
  // Another visit, or a newer redraw of this one, answered first.
  if (st.gen !== S.gen || me !== st.asked) return;
  const rep = run.report, info = rep.run, turns = rep.turns;
  // The report's own status, read with its turns: never "finished" above a turn short.
  const status = info.status;
  const main = $("main");
  const head = h("div.panel",
    h("div.tb", h("h1", info.objective), pill(status), unit ? h("span.pill", "unit · route " + unit.route) : null,
      unit && unit.running_here ? h("span.pill.running", "running here") : null),
    h("div.kv",
      kv("turns", n(turns.length)), kv("tokens sent", n(rep.tokens_sent)), kv("tokens back", n(rep.tokens_received)),
      kv("claims refused", n(rep.refusals)), kv("warnings", n(rep.warnings)),
      kv("conversations passed", n(rep.conversations_passed))),
    h("div.sub", "id " + info.id + " · created " + when(info.created_at) + " · updated " + when(info.updated_at)),
    st.live);
  const question = (unit ? unit.status === "blocked" && unit.question : info.status === "blocked" && run.question) || null;
  const { slots } = st;
  if (st.first) clear(main, Object.values(slots));
  clear(slots.head, head);
  if (question !== st.asking) clear(slots.question, question ? questionBox(id, question, !!unit) : null);
  st.asking = question;
  clear(slots.unit, unit ? unitPanel(unit, pins) : null);
  clear(slots.turns, turnsPanel(st, turns, pins));
  st.first = false;
}
const kv = (label, value) => h("div", h("b", value), h("span", label));

function questionBox(id, question, isUnit) {
  const box = h("div.question#question", { role: "alert" }, h("h2", "Waiting for a human"), h("p", question));
  if (!isUnit) {
    // A plain run takes no answer: once what it asks for is done, it is resumed.
    const msg = h("span.sub");
    const btn = h("button.primary#resume", {
      onclick: async () => {
        btn.disabled = true;
        try { await api("/runs/" + id + "/resume", {}); clear(msg, "Resumed; its turns appear below."); } catch (err) { btn.disabled = false; clear(msg, errorBox(err)); }
      },
    }, "Resume the run");
    box.appendChild(h("div.tb", btn, msg));
    return box;
  }
  const ta = h("textarea#answer", { placeholder: "Your answer (recorded as a decision of human)", "aria-label": "answer" });
  const msg = h("div.sub");
  const form = h("form", {
    onsubmit: async (e) => {
      e.preventDefault();
      if (!ta.value.trim()) return ta.focus();
      const btn = form.querySelector("button");
      btn.disabled = true;
      try {
        const r = await api("/units/" + id + "/answer", { answer: ta.value });
        clear(msg, "Recorded at turn " + r.turn + (r.resumed ? "; the unit goes on." : "."));
        ta.disabled = true;
      } catch (err) {
        btn.disabled = false;
        clear(msg, errorBox(err));
      }
    },
  }, ta, h("div.tb", h("button.primary#answer-send", { type: "submit" }, "Answer and resume"), msg));
  box.appendChild(form);
  return box;
}

function unitPanel(unit, pins) {
  // The stations, in the order the unit reached them (from its pins' phases).
  const order = [];
  for (const p of pins) {
    const s = String(p.phase || "").split(" ")[0];
    if (s && !order.includes(s)) order.push(s);
  }
  if (unit.station && !order.includes(unit.station)) order.push(unit.station);
  // The whole route when the server says it: stations ahead shown as still to come.
  const route = Array.isArray(unit.stations) && unit.stations.length ? unit.stations : order;
  const at = route.indexOf(unit.station);
  const finished = unit.status === "finished";
  const stations = h("div.stations", route.map((s, i) => h("span" + (s === unit.station && !finished ? ".now"
    : (finished || (at >= 0 ? i < at : order.includes(s))) ? ".done" : ".todo"), s)));
  const last = {};
  for (const p of pins) last[p.seat + "|" + p.phase] = p;
  const seats = unit.seats.length ? h("table",
    h("thead", h("tr", ["seat", "held by", "family", "pool", "since", "phase", "pinned"].map((x) => h("th", x)))),
    h("tbody", unit.seats.map((s) => {
      const p = last[s.seat + "|" + s.phase];
      return h("tr", h("td.mono", s.seat), h("td", h("b", s.worker)), h("td", s.family), h("td", poolTag(s.pool)),
        h("td", "turn " + s.since_turn), h("td.muted", s.phase), h("td.muted", p ? pinWhy(p) : ""));
    }))) : h("p.muted", "No seat held now.");
  return h("div.panel#unit",
    h("h2", "Stations"), stations,
    h("div.kv", kv("station", unit.station || "–"), kv("round", n(unit.round)), kv("plan locked", unit.plan_locked || "–"),
      kv("findings open", n(unit.findings_open) + " / " + n(unit.findings)), kv("fix rounds", n(unit.fixes)),
      kv("verdicts", (unit.verdicts || []).join(", ") || "–")),
    h("h3", "Current seats and their pins"), seats);
}
function pinWhy(p) {
  const r = p.reason || {};
  let why = String(r.kind || "").replace(/_/g, " ");
  if (p.excluded && p.excluded.length) why += " · " + p.excluded.length + " excluded";
  return why + " · " + when(p.at);
}

// What the turn was for: its step, or for a lane's turn its seat and phase.
function assignment(t, pin) {
  const seat = pin ? pin.seat + " · " + pin.phase + " · pool " + pin.pool : null;
  if (t.assignment !== "continuation") return [t.assignment, seat ? h("div.sub", seat) : null];
  if (seat) return "As " + seat;
  return h("span.muted", t.worker === "baton" ? "the engine's own turn" : "continuing the work");
}

function turnsPanel(st, turns, pins) {
  const seatOf = {};
  for (const p of pins) seatOf[p.turn] = p;
  const rows = [];
  for (const t of turns.slice().reverse()) {
    const isNew = !st.first && !st.seen.has(t.turn);
    st.seen.add(t.turn);
    const frac = t.budget ? t.package_tokens / t.budget : 0;
    const notes = [];
    for (const r of t.refusals || []) notes.push(h("div.sub.refused", "refused: " + (r.reason || r.claim || JSON.stringify(r))));
    for (const w of t.warnings || []) notes.push(h("div.sub.warned", "warning: " + (typeof w === "string" ? w : w.message || JSON.stringify(w))));
    if (t.error) notes.push(h("div.sub.refused", t.error));
    rows.push(h("tr.click.turn" + (isNew ? ".new" : ""), {
      "data-turn": t.turn,
      onclick: () => { location.hash = "#/runs/" + st.id + "/briefing/" + t.turn; },
    },
    h("td.num", t.turn), h("td", h("b", t.worker), h("div.sub", t.model)),
    h("td", assignment(t, seatOf[t.turn]), notes),
    t.budget ? h("td", h("div.tb", bar(frac), h("span.num", n(t.package_tokens) + " / " + n(t.budget))),
      h("div.sub", t.items_dropped ? t.items_dropped + (t.items_dropped === 1 ? " item" : " items") + " did not fit" : "everything fit")) : h("td.muted", "no briefing (the engine's own turn)"),
    h("td.num", n(t.tokens_sent)), h("td.num", (t.refusals || []).length || ""), h("td.num", (t.warnings || []).length || ""),
    h("td", pill(t.status))));
  }
  return h("div.panel", h("h2", "Turns (newest first; click one for its briefing)"),
    turns.length ? h("table#turns",
      h("thead", h("tr", ["#", "worker", "assignment", "briefing / budget", "sent", "refused", "warn", ""].map((x, i) => h("th" + (i === 0 || i > 3 && i < 7 ? ".num" : ""), x)))),
      h("tbody", rows)) : h("p.muted", "No turn yet."));
}

// ---- the briefing inspector --------------------------------------------------------

async function briefing(id, turn) {
  const main = $("main"), gen = S.gen;
  let b, first;
  try {
    [b, first] = await Promise.all([api("/runs/" + id + "/turns/" + turn + "/briefing"), api("/runs/" + id + "/compile")]);
  } catch (e) {
    clear(main, errorBox(e));
    return;
  }
  if (gen !== S.gen) return;
  const pkg = b.package;
  const out = h("div#recompiled");
  const budget = h("input#budget", { type: "range", min: 50, max: Math.max(4000, pkg.budget * 2), step: 10, value: pkg.budget, "aria-label": "budget" });
  const shown = h("span.big-num#budget-value", n(pkg.budget));
  const worker = h("select#worker", { "aria-label": "worker" }, first.workers.map((w) => h("option", { value: w, selected: w === b.worker }, w)));
  let asked = 0;
  // Compilation is deterministic: a budget seen once is drawn again without asking
  // (until the run moves on: its events clear this).
  const seen = new Map();
  runStream(id, () => seen.clear());
  const recompile = async () => {
    const me = ++asked;
    const key = worker.value + "|" + budget.value;
    try {
      const r = seen.get(key) || await api("/runs/" + id + "/compile?worker=" + encodeURIComponent(worker.value) + "&budget=" + budget.value);
      seen.set(key, r);
      if (me === asked) clear(out, packageView(r.package, "now"));
    } catch (e) {
      if (me === asked) clear(out, errorBox(e));
    }
  };
  const moved = () => {
    clear(shown, n(budget.value));
    if (seen.has(worker.value + "|" + budget.value)) recompile();
    else debounce("compile", 60, recompile);
  };
  budget.addEventListener("input", moved);
  worker.addEventListener("change", moved);
  clear(main,
    h("div.panel", h("div.tb", h("a", { href: "#/runs/" + id }, "← run " + short(id)), h("h1", "Briefing of turn " + turn), h("span.muted", "for " + b.worker))),
    h("div.grid2",
      h("div.panel", h("h2", "As compiled for turn " + turn), packageView(pkg, "then")),
      h("div.panel", h("h2", "Recompiled now, live"),
        h("div.slider", h("label", "worker ", worker), budget, shown, h("span.muted", "tokens")),
        h("div.sub", "From the run's current record: drag the budget to see what fits and what is dropped."),
        out)));
  recompile();
}

function packageView(p, tag) {
  const frac = p.budget ? p.tokens / p.budget : 0;
  const sections = p.sections || [];
  return h("div." + tag,
    h("div.tb", h("span.big-num.tokens", n(p.tokens)), h("span.muted", " / " + n(p.budget) + " tokens · " + (p.estimator || "") + (p.over_budget ? " · OVER BUDGET" : ""))),
    bar(frac, true),
    h("h3", "Sections"),
    h("div.chips.sections", sections.map((s) => h("span.chip" + (!s.included ? ".out" : s.shortened ? ".short" : ""),
      { title: s.items_included + " of " + s.items_available + " items, " + s.tokens + " tokens" },
      s.section.replace(/_/g, " ") + (s.included ? " " + s.items_included + "/" + s.items_available : "")))),
    h("h3", "Did not fit (" + (p.dropped || []).length + ")"),
    (p.dropped || []).length ? h("table.dropped",
      h("thead", h("tr", ["item", "section", "reason", "score"].map((x) => h("th", x)))),
      h("tbody", p.dropped.map((d) => h("tr.drop", h("td.mono", d.item + (d.through ? "–" + d.through : "") + (d.count ? " (" + d.count + ")" : "")),
        h("td", String(d.section).replace(/_/g, " ")), h("td", d.reason), h("td.num", n(d.score)))))) :
      h("p.muted", "Everything fit."),
    h("details", h("summary", "The briefing's text (" + n((p.text || "").length) + " characters)"), h("pre", p.text)));
}

// ---- the floor ---------------------------------------------------------------------

const PALETTE = ["#4f7bd6", "#2f9e6e", "#c98a14", "#a05bd1", "#d0454c", "#2b9bb0", "#8a8f3a", "#c25a93", "#5b6b7c", "#d47a3a"];
const poolColor = (id) => {
  if (!S.poolIds.includes(id)) S.poolIds.push(id);
  return PALETTE[S.poolIds.indexOf(id) % PALETTE.length];
};
function poolTag(id) {
  const sq = h("span.sq");
  sq.style.background = poolColor(id);
  return h("span.tb", sq, id);
}

async function floor() {
  const main = $("main");
  const gen = S.gen;
  S.again = floor;
  let pools, pins;
  try {
    [pools, pins] = await Promise.all([api("/pools"), api("/pins").then((p) => p.pins)]);
  } catch (e) {
    clear(main, errorBox(e));
    return;
  }
  if (gen !== S.gen) return;
  for (const p of pools.pools) poolColor(p.id);
  const benched = new Set(pools.pools.filter((p) => p.benched).map((p) => p.id));
  clear(main, h("div#floor", headroom(pools), timeline(pins, benched), ledger(pins)));
}

function ledger(pins) {
  // Each seat's latest pin: who holds it now (in the run that last seated it).
  const held = new Map();
  for (const p of pins) held.set(p.seat, p);
  const rows = [...held.values()].sort((a, b) => b.at - a.at || b.turn - a.turn);
  return h("div.panel", h("h2", "Seat ledger: who holds each seat now"),
    rows.length ? h("table#ledger", h("thead", h("tr", ["seat", "held by", "pool", "run", "since", "why"].map((x) => h("th", x)))),
      h("tbody", rows.map((p) => h("tr", h("td.mono", p.seat), h("td", h("b", p.worker), h("div.sub", p.model + " · " + p.family)),
        h("td", poolTag(p.pool)), h("td.nowrap", h("a.mono", { href: "#/runs/" + p.run_id }, short(p.run_id))),
        h("td.nowrap", "turn " + p.turn, h("div.sub", clock(p.at))),
        h("td", String((p.reason || {}).kind || "").replace(/_/g, " "),
          (p.excluded || []).slice(0, 3).map((x) => h("div.sub", "not " + x.worker + ": " + x.why)),
          (p.excluded || []).length > 3 ? h("div.sub", "and " + (p.excluded.length - 3) + " more excluded") : null))))) :
      h("p.muted", "No seat was ever pinned: runs without [[pools]] take the roster in order."));
}

function timeline(pins, benched) {
  const runs = new Map();
  for (const p of pins) {
    if (!runs.has(p.run_id)) runs.set(p.run_id, []);
    runs.get(p.run_id).push(p);
  }
  const counts = {};
  for (const p of pins) counts[p.pool] = (counts[p.pool] || 0) + 1;
  const rows = [];
  for (const [run, list] of runs) {
    rows.push(h("a.mono", { href: "#/runs/" + run }, short(run)));
    rows.push(h("div.squares", list.map((p) => {
      const sq = h("span.sq.pin", { title: "turn " + p.turn + " · " + p.seat + " → " + p.worker + " (pool " + p.pool + ") · " + when(p.at), "data-pool": p.pool });
      sq.style.background = poolColor(p.pool);
      return sq;
    })));
  }
  const legend = h("div.legend", Object.keys(counts).concat(S.poolIds.filter((x) => !(x in counts))).map((id) => {
    const sq = h("span.sq");
    sq.style.background = poolColor(id);
    return h("span", sq, id + " (" + (counts[id] || 0) + ")", benched.has(id) ? pill("benched") : null);
  }));
  return h("div.panel", h("h2", "Pin log: one square per seating, by pool, oldest first"),
    pins.length ? h("div.timeline#timeline", rows) : h("p.muted", "No pins yet."), legend);
}

function headroom(data) {
  const pools = data.pools;
  const rows = pools.map((p) => {
    const allowance = Object.entries(p.allowance || {}).map(([k, v]) => k + " " + n(p.used[k] || 0) + " / " + n(v));
    const held = p.held && p.held.turns ? " · held by " + p.held.turns + " turn(s) in flight" : "";
    const button = h("button.bench", {
      "data-pool": p.id,
      onclick: async (e) => {
        e.target.disabled = true;
        try { await api("/pools/" + encodeURIComponent(p.id) + (p.benched ? "/unbench" : "/bench"), { reason: "from the dashboard" }); } catch (err) { alert(err.message); }
        floor();
      },
    }, p.benched ? "Unbench" : "Bench");
    return h("div.pool" + (p.benched ? ".off" : ""), { "data-pool": p.id },
      h("div", poolTag(p.id), p.benched ? pill("benched") : null,
        p.benched ? h("div.sub", "by " + p.benched.by + (p.benched.reason ? ": " + p.benched.reason : "")) : null),
      allowance.length ? h("div", bar(p.used_fraction, true), h("div.sub", allowance.join(" · ") + " · " + Math.round((p.used_fraction || 0) * 100) + "% used" + held)) :
        h("div.sub", "no allowance set (unmetered): " + n(p.used.requests) + " requests this window" + held),
      h("div.sub", p.window + (p.resets_at ? " · resets " + new Date(p.resets_at).toLocaleString("en-GB", { weekday: "short", day: "numeric", month: "short", hour: "2-digit", minute: "2-digit" }) : "")),
      button);
  });
  const extra = [];
  for (const b of data.benched_workers || []) extra.push(h("div.sub", "worker " + b.target.id + " benched by " + b.by + (b.reason ? ": " + b.reason : "")));
  for (const b of data.benched_pools_not_configured || []) extra.push(h("div.sub", "pool " + b.target.id + " (not configured) benched by " + b.by));
  return h("div.panel#pools", h("h2", "Pools: headroom in the current window"),
    rows.length ? rows : h("p.muted", "No pools are configured: add [[pools]] to baton.toml (see the README's Seats, pools and the router)."), extra);
}

// ---- jobs --------------------------------------------------------------------------

async function jobs() {
  const main = $("main"), gen = S.gen;
  S.again = jobs;
  let data;
  try { data = await api("/jobs"); } catch (e) { clear(main, errorBox(e)); return; }
  if (gen !== S.gen) return;
  const cols = { queued: [], running: [], outbox: [], judged: [] };
  for (const j of data.jobs) (cols[j.status] = cols[j.status] || []).push(j);
  clear(main, h("div.kanban#jobs", Object.entries(cols).map(([k, list]) => h("div.col",
    h("h2", k + " (" + list.length + ")"),
    list.map((j) => h("a.card", { href: "#/jobs/" + j.id },
      h("div.tb", h("b", j.spec.candidate || "job"), pill(j.status)),
      h("div", j.spec.objective), h("div.sub.mono", short(j.id) + " · group " + short(j.group))))))),
    data.jobs.length ? null : h("p.muted", "No jobs. Queue some with `baton enqueue`."));
}

async function jobView(id) {
  const main = $("main"), gen = S.gen;
  S.again = () => jobView(id);
  let d;
  try { d = await api("/jobs/" + encodeURIComponent(id)); } catch (e) { clear(main, errorBox(e)); return; }
  if (gen !== S.gen) return;
  const j = d.job, o = j.outbox, spec = j.spec;
  const parts = [h("div.panel", h("div.tb", h("a", { href: "#/jobs" }, "← jobs"), h("h1", spec.objective), pill(j.status)),
    h("div.kv", kv("candidate", spec.candidate), kv("attempts", n(j.attempts)), kv("base", (spec.base || "").slice(0, 12)),
      o ? kv("diff", "+" + o.diff.insertions + " −" + o.diff.deletions + " in " + o.diff.files_changed) : null,
      j.run_id ? kv("run", h("a", { href: "#/runs/" + j.run_id }, short(j.run_id))) : null),
    h("div.sub", "tasks: " + (spec.tasks || []).join(" · ")),
    o ? h("div.sub.mono", "branch " + o.branch + " · head " + o.head.slice(0, 12) + " · " + o.ended) : null,
    j.error ? h("div.error", j.error) : null)];
  parts.push(h("div.panel", h("h2", "Commits"), d.commits.length ? h("table#commits", h("tbody", d.commits.map((c) =>
    h("tr", h("td.mono", c.commit.slice(0, 12)), h("td", "turn " + c.turn + " · " + c.worker), h("td", c.task), h("td.sub.mono", (c.files || []).join(" ")))))) :
    h("p.muted", "No commit yet.")));
  if (o && o.gates && o.gates.length) {
    parts.push(h("div.panel", h("h2", "Gates"), o.gates.map((g) => h("details.gate",
      h("summary", pill(g.passed ? "passed" : "failed"), " ", h("b", g.name), " ", h("code", g.command), h("span.muted", " · exit " + (g.exit_code == null ? "none" : g.exit_code) + " · " + g.duration_ms + " ms")),
      h("pre", (g.log ? g.log.text + (g.log.cut ? "\n… (cut)" : "") : g.output_tail) || "(no output)")))));
  }
  if (d.patch) parts.push(h("div.panel", h("h2", "Patch"), diffView(d.patch.text), d.patch.cut ? h("p.muted", "… cut; the whole patch is " + o.patch_file) : null));
  for (const jd of d.judgements) parts.push(judgementView(jd, j.id));
  clear(main, parts);
}

function diffView(text) {
  return h("pre.diff#diff", text.split("\n").map((l) => {
    const c = l.startsWith("+++") || l.startsWith("---") || l.startsWith("diff ") ? ".file" : l.startsWith("@@") ? ".hunk" : l[0] === "+" ? ".add" : l[0] === "-" ? ".del" : "";
    return h("span" + c, l || " ");
  }));
}

function judgementView(jd, job) {
  const b = jd.body || {}, v = b.verdict || {};
  const labels = b.labels || {};
  return h("div.panel.judgement", h("h2", "Judgement of group " + short(jd.group) + " (" + jd.outcome + ")"),
    h("p", h("b", "Winner " + (v.winner || "?")), " → job ", h("span.mono", short(labels[v.winner])), ": ", v.verdict || ""),
    h("table", h("thead", h("tr", ["label", "job", "score", "reasons"].map((x) => h("th", x)))),
      h("tbody", (v.scores || []).map((s) => h("tr" + (s.candidate === v.winner ? ".winner" : ""),
        h("td", h("b", s.candidate)), h("td.mono", h("a", { href: "#/jobs/" + labels[s.candidate] }, short(labels[s.candidate])), labels[s.candidate] === job ? " (this job)" : ""),
        h("td.num", s.score), h("td", s.reasons))))),
    h("div.sub", "judged by " + (b.judge || "?") + " (" + (b.judge_model || "") + ") blind: it saw only the labels · " + when(jd.recorded_at)));
}

boot();
