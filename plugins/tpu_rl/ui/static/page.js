// The "RL post-training" page: reads api/runs, draws the table and an SVG chart; again every
// REFRESH_MS while a run goes on. Runs filtered by model; the ticked ones compared. No libraries.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
// Airflow's UI root, relative to this page (mounted one level below it).
const AIRFLOW_ROOT = new URL("../", window.location.href);
const DATE = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const DAY = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric" });
const DAY_TIME = new Intl.DateTimeFormat(undefined, {
  month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
});
const MONTH = new Intl.DateTimeFormat(undefined, { month: "short", year: "numeric" });
const COLUMNS = 18;
// While a run is queued or running the page reads its runs again this often.
const REFRESH_MS = 5000;
// The runs ticked for the compare view, kept across refreshes.
const ticked = new Set();
// Under a run that ended without a summary (tpu_rl.run_summary): made before its tasks kept one.
const NO_SUMMARY = "no run summary: this run was made before its tasks kept one; its rewards " +
  "and results are in its XComs and its note";
// Past this many runs the chart draws lines only: a dot per run would just be noise.
const MAX_DOTS = 100;
// How a row's chip-hours and host-hours were counted (tpu_rl.report.billing.RULES has the whole sentence, and
// the price used, as a tooltip).
const RULES = {
  tpu_node_life: "TPU nodes' life",
  created_pool: "run's static pool (task times)",
  existing_static_pool: "static pool, run span (task times)",
  tpu_nodes: "TPU steps (task times)",
};

function num(value, digits) {
  return value === null || value === undefined ? "" : Number(value).toFixed(digits);
}

function plural(count, word) {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "";
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = Math.floor(seconds % 60);
  return h ? `${h}h ${m}m` : m ? `${m}m ${s}s` : `${s}s`;
}

function cell(row, content, cls) {
  const td = document.createElement("td");
  if (content instanceof Node) td.appendChild(content);
  else td.textContent = content;
  if (cls) td.className = cls;
  row.appendChild(td);
}

// A table's head: one th per [text, className] column (className may be left out).
function tableHead(columns) {
  const row = document.createElement("tr");
  for (const [text, cls] of columns) {
    const th = document.createElement("th");
    th.textContent = text;
    if (cls) th.className = cls;
    row.append(th);
  }
  const thead = document.createElement("thead");
  thead.append(row);
  return thead;
}

function link(href, text, top) {
  if (!href) return "";
  const a = document.createElement("a");
  a.href = href;
  a.textContent = text;
  // Airflow shows this page in an iframe: its own pages open in the whole window.
  a.target = top ? "_top" : "_blank";
  if (!top) a.rel = "noopener";
  return a;
}

function drawTable(runs) {
  const rows = document.createDocumentFragment();
  for (const r of runs) {
    const tr = document.createElement("tr");
    tr.className = "run";
    const runUrl = new URL(r.run_url, AIRFLOW_ROOT).href;
    const name = document.createElement("span");
    name.append(tickBox(r.run_id), link(runUrl, r.run_id, true));
    cell(tr, name, "text run");
    cell(tr, r.state || "", `text ${r.state || ""}`);
    cell(tr, r.run_after ? DATE.format(new Date(r.run_after)) : "", "text date");
    cell(tr, setupCell(r), "text setup");
    cell(tr, duration(r.duration_seconds));
    cell(tr, num(r.pre_mean_reward, 4));
    cell(tr, num(r.post_mean_reward, 4));
    const gain = r.gain === null || r.gain === undefined ? "" : (r.gain >= 0 ? "+" : "") + num(r.gain, 4);
    cell(tr, gain, r.gain > 0 ? "up" : r.gain < 0 ? "down" : "");
    cell(tr, num(r.pre_accuracy, 2));
    cell(tr, num(r.post_accuracy, 2));
    cell(tr, r.gate, `text ${r.gate}`);
    cell(tr, r.chip_hours === null ? "" : `${num(r.chip_hours, 2)} (${num(r.host_hours, 2)})`);
    const rule = document.createElement("span");
    rule.textContent = RULES[r.tpu_hours_rule] || r.tpu_hours_rule || "";
    const price = r.price
      ? ` Price: ${r.price.usd_per_chip_hour} USD per chip-hour, ${r.price.capacity} ` +
        `(${r.price.basis}; ${r.price.source}, ${r.price.read}).`
      : "";
    rule.title = (r.tpu_hours_rule_text || "") + price;
    cell(tr, rule, "text rule");
    // a reservation is paid by its commitment, not by the run (tpu_rl.report.prices)
    const paid = document.createElement("span");
    if (r.billed_as === "commitment") {
      paid.textContent = "reserved";
      paid.title = "paid by the reservation's commitment, whether or not the pool exists";
    }
    cell(tr, r.estimated_cost_usd === null ? paid : `$${num(r.estimated_cost_usd, 2)}`);
    cell(tr, attemptsCell(r.attempts || [], r.steps_recomputed), "text attempts");
    cell(tr, r.checkpoint_step === null ? "" : String(r.checkpoint_step));
    const results = document.createElement("span");
    results.append(link(r.export_url, "export", false));
    if (r.report_url) results.append(document.createElement("br"), link(r.report_url, "report", false));
    // a verified export: the chain it came from, base model to registry version (provenance.js)
    if (r.export_uri) results.append(document.createElement("br"), provenanceButton(r.run_id));
    cell(tr, results, "text");
    cell(tr, link(new URL(r.logs_url, AIRFLOW_ROOT).href, "logs", true), "text");
    rows.appendChild(tr);
    if ((r.rungs || []).length) rows.appendChild(noteRow("rungs", "capacity ladder: ", rungsText(r.rungs)));
    const ended = (r.attempts || []).filter((a) => a.why);
    if (ended.length) rows.appendChild(noteRow("rungs", "training attempts: ", endedText(ended)));
    if (r.progress) rows.appendChild(noteRow("progress", "training: ", r.progress));
    // a run the watchdog failed says it in its failure; one that exported, here
    if (r.health) rows.appendChild(noteRow("reason", "training health: ", r.health));
    if (r.failure) rows.appendChild(reasonRow(r.failure));
    if (r.summary === false) rows.appendChild(noteRow("no-summary", NO_SUMMARY));
    if (r.error) rows.appendChild(noteRow("error", "data error: ", r.error));
  }
  document.querySelector("#runs tbody").replaceChildren(rows);
}

// What the run trained on, a line each: model, TPU type x slices, capacity mode.
function setupCell(r) {
  const box = document.createElement("span");
  const slices = r.slices ? ` \u00d7 ${r.slices}` : "";
  for (const [cls, text] of [["model", r.model], ["tpu", `${r.tpu_type || ""}${slices}`],
    ["capacity", r.capacity]]) {
    const line = document.createElement("span");
    line.className = cls;
    line.textContent = text || "";
    box.append(line);
  }
  return box;
}

// The run's box for the compare view.
function tickBox(runId) {
  const box = document.createElement("input");
  box.type = "checkbox";
  box.checked = ticked.has(runId);
  box.title = "compare this run";
  box.setAttribute("aria-label", `compare ${runId}`);
  box.onchange = () => {
    if (box.checked) ticked.add(runId); else ticked.delete(runId);
    updateCompareButton();
  };
  return box;
}

function updateCompareButton() {
  const button = document.getElementById("compare");
  button.disabled = ticked.size < 2;
  button.textContent = `Compare ${ticked.size} runs`;
}

// The models of the runs in the filter (the choice kept), and the runs it lets through.
function filtered(runs) {
  const select = document.getElementById("model-filter");
  const picked = select.value;
  const models = [...new Set(runs.map((r) => r.model).filter(Boolean))].sort();
  const options = [["", "all models"], ...models.map((m) => [m, m])].map(([value, text]) => {
    const option = document.createElement("option");
    option.value = value;
    option.textContent = text;
    return option;
  });
  select.replaceChildren(...options);
  select.value = models.includes(picked) ? picked : "";
  return select.value ? runs.filter((r) => r.model === select.value) : runs;
}

// Training attempts (a resume after capacity loss adds one): their count and the steps computed
// again; the tooltip has each attempt's steps, outcome and TPU node-hours.
function attemptsCell(attempts, recomputed) {
  if (!attempts.length) return "";
  const span = document.createElement("span");
  span.textContent = attempts.length === 1 ? "1" : `${attempts.length}: ${recomputed} steps redone`;
  span.title = attempts.map((a) => {
    const hours = a.tpu_node_hours === null ? "?" : num(a.tpu_node_hours, 2);
    const redone = a.steps_recomputed === null ? "" : `, ${a.steps_recomputed} steps redone after`;
    const reached = a.reached_step === null ? "?" : a.reached_step;
    return `${attemptLabel(a)}: steps ${a.resumed_from_step || 0}-${reached}, ${a.outcome || "running"}, ` +
      `${hours} TPU node-hours${redone}`;
  }).join("\n");
  return span;
}

// Training attempts that did not complete (a capacity loss, a stop at a save before the capacity
// ended), under the run's row: where each ran, how it ended and why.
function endedText(attempts) {
  return attempts.map((a) => `${attemptLabel(a)} ${a.outcome}: ${a.why}`).join("; ");
}

// "attempt N", and the capacity rung it ran on when recorded.
function attemptLabel(a) {
  return `attempt ${a.attempt}${a.rung ? ` on ${a.rung}` : ""}`;
}

// The capacity ladder's rungs as tried, under the run's row: each rung, how long its try took,
// and GKE's own reason when the rung could not give the slice (tpu_rl.cluster.climb).
function rungsText(rungs) {
  return rungs.map((t, i) => {
    const seconds = (new Date(t.ended) - new Date(t.started)) / 1000;
    const why = t.reason ? `: ${t.reason}` : "";
    return `rung ${i + 1} ${t.rung} ${t.outcome} after ${duration(seconds)}${why}`;
  }).join("; ");
}

// A failed run's reason, under its row: the task that failed and its message's first line.
function reasonRow(failure) {
  const task = document.createElement("b");
  task.textContent = failure.task_id;
  return noteRow("reason", "failed at ", task, `: ${failure.message}`);
}

// A line under a run's row, across the table: `parts` are text or nodes.
function noteRow(cls, ...parts) {
  const tr = document.createElement("tr");
  tr.className = cls;
  const td = document.createElement("td");
  td.colSpan = COLUMNS;
  td.append(...parts);
  tr.appendChild(td);
  return tr;
}

// A round tick step (1, 2 or 5 times a power of ten) giving about `count` steps over `span`.
function niceStep(span, count) {
  const raw = span / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / magnitude;
  return (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * magnitude;
}

function el(name, attrs, parent) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  parent.appendChild(node);
  return node;
}

function drawChart(runs) {
  const svg = document.getElementById("chart");
  svg.replaceChildren();
  // oldest first, runs with at least one number
  const points = runs
    .filter((r) => r.pre_mean_reward !== null || r.post_mean_reward !== null)
    .slice()
    .reverse();
  const width = svg.clientWidth || 800;
  const height = svg.clientHeight || 260;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const pad = { left: 56, right: 16, top: 12, bottom: 28 };
  if (!points.length) {
    el("text", { x: pad.left, y: height / 2 }, svg).textContent = "No rewards yet.";
    return;
  }
  const values = points.flatMap((r) => [r.pre_mean_reward, r.post_mean_reward]).filter((v) => v !== null);
  let lo = Math.min(...values);
  let hi = Math.max(...values);
  if (hi === lo) { lo -= 0.05; hi += 0.05; }
  const step = niceStep(hi - lo, 4);
  lo = Math.floor(lo / step) * step;
  hi = Math.ceil(hi / step) * step;
  const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
  const innerW = width - pad.left - pad.right;
  const innerH = height - pad.top - pad.bottom;
  const x = (i) => pad.left + (points.length === 1 ? innerW / 2 : (i * innerW) / (points.length - 1));
  const y = (v) => pad.top + innerH - ((v - lo) / (hi - lo)) * innerH;
  for (let v = lo; v <= hi + step / 2; v += step) {
    el("line", { class: "axis", x1: pad.left, x2: width - pad.right, y1: y(v), y2: y(v) }, svg);
    el("text", { class: "ytick", x: pad.left - 6, y: y(v) + 4, "text-anchor": "end" }, svg)
      .textContent = (Math.abs(v) < step / 2 ? 0 : v).toFixed(decimals);
  }
  // Dates under the runs, as many as fit without overlapping.
  const dates = points.map((r) => (r.run_after ? new Date(r.run_after) : null));
  const known = dates.filter(Boolean);
  const spanDays = known.length ? (known[known.length - 1] - known[0]) / 86400000 : 0;
  // the date's precision follows the span: hours within two days, months past most of a year
  const [format, labelWidth] = spanDays < 2 ? [DAY_TIME, 120] : spanDays < 300 ? [DAY, 80] : [MONTH, 90];
  const labels = Math.max(1, Math.min(points.length, Math.floor(innerW / labelWidth)));
  const every = points.length === 1 ? 1 : (points.length - 1) / Math.max(1, labels - 1);
  const shown = new Set();
  for (let k = 0; k < labels; k++) shown.add(Math.round(k * every));
  for (const i of shown) {
    if (!dates[i] || i >= points.length) continue;
    el("line", { class: "axis", x1: x(i), x2: x(i), y1: pad.top + innerH, y2: pad.top + innerH + 4 }, svg);
    const anchor = points.length === 1 ? "middle" : i === 0 ? "start" : i === points.length - 1 ? "end" : "middle";
    el("text", { class: "xtick", x: x(i), y: height - 8, "text-anchor": anchor }, svg).textContent =
      format.format(dates[i]);
  }
  for (const key of ["pre", "post"]) {
    const field = `${key}_mean_reward`;
    const coords = points.map((r, i) => (r[field] === null ? null : `${x(i)},${y(r[field])}`));
    el("polyline", { class: key, points: coords.filter(Boolean).join(" ") }, svg);
    if (points.length > MAX_DOTS) continue;
    points.forEach((r, i) => {
      if (r[field] === null) return;
      const dot = el("circle", { class: key, cx: x(i), cy: y(r[field]), r: 3.5 }, svg);
      el("title", {}, dot).textContent = `${r.run_id}: ${key} ${num(r[field], 4)}`;
    });
  }
}

// Logged out (or not allowed): what to do, with a way to log in that comes back here.
function showLogin(status, code) {
  const login = new URL("api/v2/auth/login", AIRFLOW_ROOT);
  login.searchParams.set("next", window.location.href);
  const a = link(login.href, "Log in to Airflow", true);
  status.replaceChildren(
    code === 401
      ? "You are not logged in to Airflow (or your session ended), and this page needs a user " +
        "who may read the runs of tpu_rl_post_training and their XComs (e.g. Viewer). "
      : "Your Airflow user may not read the runs of tpu_rl_post_training or their XComs: ask " +
        "an Airflow admin for a role that can (e.g. Viewer), or log in as another user. ",
    a,
    code === 401
      ? ": Airflow brings you back here; or log in in another tab, then reload this page."
      : ".",
  );
  document.body.dataset.state = "login";
}

let allRuns = [];

// Draw the runs the model filter lets through; the curves of the picked one come after.
function show() {
  const runs = filtered(allRuns);
  drawChart(runs); // first: it measures the page, cheaper before the table is in
  drawTable(runs);
  drawEvaluations(runs);
  updateCompareButton();
  const shown = allRuns.length === runs.length ? "" : ` (${runs.length} of the model shown)`;
  document.getElementById("status").textContent =
    `${plural(allRuns.length, "run")}${shown}, newest first.`;
  return drawRunCurves(runs);
}

async function load() {
  const status = document.getElementById("status");
  try {
    const response = await fetch("api/runs?limit=500", { credentials: "same-origin" });
    if (response.status === 401 || response.status === 403) {
      showLogin(status, response.status);
      return;
    }
    if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
    allRuns = (await response.json()).runs;
    await show();
    document.body.dataset.loadMs = Math.round(performance.now());
    document.body.dataset.state = "ready";
    document.body.dataset.loads = String(Number(document.body.dataset.loads || 0) + 1);
    // a run goes on: its progress, evaluations and curves move
    if (allRuns.some((r) => r.state === "running" || r.state === "queued")) setTimeout(load, REFRESH_MS);
  } catch (error) {
    status.textContent = `Could not load the runs: ${error.message}`;
    document.body.dataset.state = "error";
  }
}

document.getElementById("model-filter").onchange = show;
document.getElementById("compare").onclick = () =>
  drawCompare(allRuns.filter((r) => ticked.has(r.run_id)));

load();
