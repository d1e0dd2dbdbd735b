// The "RL post-training" page: reads api/runs, draws the table and an SVG chart. No libraries.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
// Airflow's UI root, relative to this page (mounted one level below it).
const AIRFLOW_ROOT = new URL("../", window.location.href);
const DATE = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
// Past this many runs the chart draws lines only: a dot per run would just be noise.
const MAX_DOTS = 100;
// How a row's TPU-hours were counted (tpu_rl.report.RULES has the whole sentence, as a tooltip).
const RULES = {
  created_pool: "run's reserved pool",
  existing_static_pool: "static pool, run span",
  tpu_nodes: "TPU nodes",
};

function num(value, digits) {
  return value === null || value === undefined ? "" : Number(value).toFixed(digits);
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
    const runUrl = new URL(r.run_url, AIRFLOW_ROOT).href;
    cell(tr, link(runUrl, r.run_id, true), "text run");
    cell(tr, r.state || "", `text ${r.state || ""}`);
    cell(tr, r.run_after ? DATE.format(new Date(r.run_after)) : "", "text");
    cell(tr, duration(r.duration_seconds));
    cell(tr, num(r.pre_mean_reward, 4));
    cell(tr, num(r.post_mean_reward, 4));
    const gain = r.gain === null || r.gain === undefined ? "" : (r.gain >= 0 ? "+" : "") + num(r.gain, 4);
    cell(tr, gain, r.gain > 0 ? "up" : r.gain < 0 ? "down" : "");
    cell(tr, num(r.pre_accuracy, 2));
    cell(tr, num(r.post_accuracy, 2));
    cell(tr, r.gate, `text ${r.gate}`);
    cell(tr, num(r.tpu_hours, 2));
    const rule = document.createElement("span");
    rule.textContent = RULES[r.tpu_hours_rule] || r.tpu_hours_rule || "";
    rule.title = r.tpu_hours_rule_text || "";
    cell(tr, rule, "text rule");
    cell(tr, r.estimated_cost_usd === null ? "" : `$${num(r.estimated_cost_usd, 2)}`);
    cell(tr, r.checkpoint_step === null ? "" : String(r.checkpoint_step));
    cell(tr, link(r.export_url, "export", false), "text");
    cell(tr, link(new URL(r.logs_url, AIRFLOW_ROOT).href, "logs", true), "text");
    rows.appendChild(tr);
  }
  document.querySelector("#runs tbody").replaceChildren(rows);
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
  const margin = (hi - lo) * 0.1;
  lo -= margin; hi += margin;
  const innerW = width - pad.left - pad.right;
  const innerH = height - pad.top - pad.bottom;
  const x = (i) => pad.left + (points.length === 1 ? innerW / 2 : (i * innerW) / (points.length - 1));
  const y = (v) => pad.top + innerH - ((v - lo) / (hi - lo)) * innerH;
  for (let t = 0; t <= 4; t++) {
    const v = lo + ((hi - lo) * t) / 4;
    el("line", { class: "axis", x1: pad.left, x2: width - pad.right, y1: y(v), y2: y(v) }, svg);
    el("text", { x: pad.left - 6, y: y(v) + 4, "text-anchor": "end" }, svg).textContent = v.toFixed(3);
  }
  el("text", { x: pad.left, y: height - 8 }, svg).textContent = "oldest";
  el("text", { x: width - pad.right, y: height - 8, "text-anchor": "end" }, svg).textContent =
    `newest (${points.length} runs)`;
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

async function load() {
  const status = document.getElementById("status");
  try {
    const response = await fetch("api/runs?limit=500", { credentials: "same-origin" });
    if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
    const data = await response.json();
    drawChart(data.runs); // first: it measures the page, cheaper before the table is in
    drawTable(data.runs);
    status.textContent = `${data.runs.length} runs, newest first.`;
    document.body.dataset.loadMs = Math.round(performance.now());
    document.body.dataset.state = "ready";
  } catch (error) {
    status.textContent = `Could not load the runs: ${error.message}`;
    document.body.dataset.state = "error";
  }
}

load();
