// The page's training curves (api/curves): for one run (#curve-run) a chart per curve over the
// training steps, the watchdog's thresholds dashed, its anomaly a red line, the saves as ticks on
// the step axis (the ones Orbax keeps filled); and the compare view of the runs ticked in the
// table: their settings that differ, their metrics and cost, their curves overlaid. Uses page.js's
// SVG, el, num, duration and link. No libraries.
"use strict";

// Each chart: its title, the curves drawn (api/curves names), the threshold it marks.
const CURVE_CHARTS = [
  { name: "loss", title: "loss", lines: ["loss"], threshold: "loss", mirrored: true },
  { name: "kl", title: "KL", lines: ["kl"], threshold: "kl" },
  { name: "reward", title: "batch reward: mean, min-max", lines: ["reward_mean"],
    band: ["reward_min", "reward_max"] },
  { name: "length", title: "completion length", lines: ["completion_length"] },
];
// One color per compared run, in the order they were ticked.
const RUN_COLORS = ["#2563eb", "#d97706", "#059669", "#db2777", "#7c3aed", "#0891b2", "#65a30d", "#dc2626"];
// Settings the compare view's first rows show already (model, TPU, slices, capacity).
const SHOWN_SETTINGS = new Set(["model_name", "tpu_type", "capacity", "cluster_nodepool_count",
  "num_trainer_slices", "num_samplers_slices"]);
const CHART_W = 340;
const CHART_H = 170;

async function fetchCurves(runIds) {
  const query = runIds.map((id) => `run_id=${encodeURIComponent(id)}`).join("&");
  const response = await fetch(`api/curves?${query}`, { credentials: "same-origin" });
  if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
  return (await response.json()).runs;
}

// The curves of one run, under the evaluations: redrawn at each refresh of the page.
async function drawRunCurves(runs) {
  const select = document.getElementById("curve-run");
  const box = document.getElementById("curves");
  if (!runs.length) {
    select.hidden = true;
    box.textContent = "No runs.";
    return;
  }
  const picked = select.value;
  select.replaceChildren(...runs.map((r) => {
    const option = document.createElement("option");
    option.value = r.run_id;
    option.textContent = `${r.run_id} (${r.state})`;
    return option;
  }));
  select.hidden = false;
  if (runs.some((r) => r.run_id === picked)) select.value = picked;
  select.onchange = () => drawRunCurves(runs);
  const run = runs.find((r) => r.run_id === select.value);
  const found = (await fetchCurves([run.run_id]))[run.run_id];
  const series = [{ run, data: found, color: RUN_COLORS[0] }];
  box.replaceChildren(...curveFigures(series, true), curveNote(run, found));
  box.dataset.run = run.run_id;
}

// What the marks mean, and the run's data error if any.
function curveNote(run, found) {
  const note = document.createElement("p");
  note.className = "curve-note";
  const kept = found.kept.length ? `steps ${found.kept.join(", ")}` : "none yet";
  const anomaly = run.anomaly
    ? ` Red line: the watchdog's ${run.anomaly.rule} at step ${run.anomaly.step} (no checkpoint ` +
      `from step ${run.anomaly.anomaly_step} on is used).`
    : "";
  note.textContent = `Ticks under the step axis: the saves the log showed; filled: the newest ` +
    `ten, which Orbax keeps (${kept}). Dashed: the watchdog's fixed thresholds (a spike or KL ` +
    `blow-up must also pass its factor times the median).${anomaly}` +
    (found.error ? ` Data error: ${found.error}` : "");
  return note;
}

// A figure per chart over the runs of `series` ({run, data, color}); `marks`: the thresholds,
// anomaly and saves of a single run.
function curveFigures(series, marks) {
  return CURVE_CHARTS.map((chart) => {
    const figure = document.createElement("figure");
    const caption = document.createElement("figcaption");
    caption.textContent = chart.title;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "curve-chart");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", `${chart.title} per training step`);
    svg.dataset.curve = chart.name;
    figure.append(caption, svg);
    curveChart(svg, chart, series, marks);
    if (svg.dataset.offScale) {
      const note = document.createElement("span");
      note.className = "threshold-note";
      note.textContent = ` (${svg.dataset.offScale})`;
      caption.append(note);
    }
    return figure;
  });
}

function curveChart(svg, chart, series, marks) {
  const pad = { left: 50, right: 10, top: 10, bottom: 30 };
  svg.setAttribute("viewBox", `0 0 ${CHART_W} ${CHART_H}`);
  const names = [...chart.lines, ...(chart.band || [])];
  const all = series.flatMap((s) => names.flatMap((n) => s.data.curves[n] || []));
  if (!all.length) {
    el("text", { x: pad.left, y: CHART_H / 2 }, svg).textContent = "no values yet";
    return;
  }
  const one = series[0];
  const threshold = marks && chart.threshold ? one.data.thresholds[chart.threshold] : null;
  const saves = marks ? one.data.saves : [];
  const anomaly = marks && one.run.anomaly ? one.run.anomaly.step : null;
  const steps = [...all.map((p) => p[0]), ...saves, ...(anomaly === null ? [] : [anomaly])];
  const [first, last] = [Math.min(...steps), Math.max(...steps)];
  let values = all.map((p) => p[1]);
  let [lo, hi] = [Math.min(...values), Math.max(...values)];
  // a threshold far past the curve would flatten it: drawn within 5 times the curve's reach,
  // else named in the corner
  const limits = threshold === null ? [] : chart.mirrored ? [threshold, -threshold] : [threshold];
  const shown = limits.filter((v) => Math.abs(v) <= 5 * Math.max(Math.abs(lo), Math.abs(hi)));
  if (threshold !== null && !shown.length) {
    svg.dataset.offScale = `watchdog: ${chart.mirrored ? `|${chart.title}|` : chart.title} > ${threshold}, off this scale`;
  }
  values = [...values, ...shown];
  [lo, hi] = [Math.min(...values), Math.max(...values)];
  if (hi === lo) { lo -= 1e-3 + Math.abs(lo) * 0.05; hi += 1e-3 + Math.abs(hi) * 0.05; }
  const x = (s) => pad.left + (last === first ? 0.5 : (s - first) / (last - first)) *
    (CHART_W - pad.left - pad.right);
  const y = (v) => pad.top + (1 - (v - lo) / (hi - lo)) * (CHART_H - pad.top - pad.bottom);
  const bottom = CHART_H - pad.bottom;
  el("line", { class: "axis", x1: pad.left, x2: CHART_W - pad.right, y1: bottom, y2: bottom }, svg);
  for (const v of [lo, hi]) {
    el("text", { class: "ytick", x: pad.left - 4, y: y(v) + 4, "text-anchor": "end" }, svg)
      .textContent = Math.abs(v) >= 100 ? num(v, 0) : Number(v.toPrecision(3)).toString();
  }
  for (const s of new Set([first, last])) {
    el("text", { class: "xtick", x: x(s), y: CHART_H - 4, "text-anchor": "middle" }, svg)
      .textContent = String(s);
  }
  for (const v of shown) {
    const line = el("line", { class: "threshold", x1: pad.left, x2: CHART_W - pad.right, y1: y(v), y2: y(v) }, svg);
    el("title", {}, line).textContent = `watchdog threshold ${v}`;
  }
  const kept = new Set(marks ? one.data.kept : []);
  for (const s of saves) {
    const tick = el("rect", { class: kept.has(s) ? "save kept" : "save", x: x(s) - 2, y: bottom + 2, width: 4, height: 7 }, svg);
    el("title", {}, tick).textContent = `save at step ${s}${kept.has(s) ? " (kept)" : ""}`;
  }
  if (anomaly !== null) {
    const line = el("line", { class: "anomaly", x1: x(anomaly), x2: x(anomaly), y1: pad.top, y2: bottom }, svg);
    el("title", {}, line).textContent = `${one.run.anomaly.rule} at step ${anomaly}`;
  }
  for (const s of series) {
    if (chart.band) {
      const [low, high] = chart.band.map((n) => s.data.curves[n] || []);
      if (low.length && high.length) {
        const outline = [...high.map((p) => `${x(p[0])},${y(p[1])}`),
          ...low.slice().reverse().map((p) => `${x(p[0])},${y(p[1])}`)];
        el("polygon", { class: "band", points: outline.join(" "), fill: s.color }, svg);
      }
    }
    for (const name of chart.lines) {
      const points = s.data.curves[name] || [];
      const line = el("polyline", { class: "curve", stroke: s.color,
        points: points.map((p) => `${x(p[0])},${y(p[1])}`).join(" ") }, svg);
      line.dataset.run = s.run.run_id;
      line.dataset.points = String(points.length);
      const newest = points[points.length - 1];
      if (newest) el("title", {}, line).textContent = `${s.run.run_id}: ${name} ${newest[1]} at step ${newest[0]}`;
    }
  }
}

// The compare view of the ticked runs: settings that differ, metrics and cost, curves overlaid.
async function drawCompare(runs) {
  const view = document.getElementById("compare-view");
  view.hidden = runs.length < 2;
  if (runs.length < 2) return;
  const table = document.getElementById("compare-table");
  const head = document.createElement("tr");
  head.append(th(""), ...runs.map((r, i) => {
    const cell = th(r.run_id);
    cell.style.color = RUN_COLORS[i % RUN_COLORS.length];
    return cell;
  }));
  const rows = [head];
  const metrics = [
    ["model", (r) => r.model], ["TPU", (r) => r.tpu_type], ["slices", (r) => r.slices],
    ["capacity", (r) => r.capacity], ["state", (r) => r.state],
    ["duration", (r) => duration(r.duration_seconds)],
    ["pre reward", (r) => num(r.pre_mean_reward, 4)], ["post reward", (r) => num(r.post_mean_reward, 4)],
    ["gain", (r) => num(r.gain, 4)], ["post acc %", (r) => num(r.post_accuracy, 2)],
    ["gate", (r) => r.gate], ["checkpoint", (r) => (r.checkpoint_step ?? "").toString()],
    ["chip-hours", (r) => num(r.chip_hours, 2)],
    ["est. cost", (r) => (r.estimated_cost_usd === null ? "" : `$${num(r.estimated_cost_usd, 2)}`)],
  ];
  for (const [label, value] of metrics) rows.push(compareRow(label, runs.map(value), "metric"));
  const keys = [...new Set(runs.flatMap((r) => Object.keys(r.settings || {})))]
    .filter((k) => !SHOWN_SETTINGS.has(k)).sort();
  const differ = keys.filter((k) => new Set(runs.map((r) => JSON.stringify(r.settings[k] ?? null))).size > 1);
  for (const key of differ) {
    rows.push(compareRow(key, runs.map((r) => (key in r.settings ? JSON.stringify(r.settings[key]) : "(default)")), "setting"));
  }
  if (!differ.length) rows.push(compareRow("settings", runs.map(() => "the same"), "setting"));
  table.replaceChildren(...rows);
  const found = await fetchCurves(runs.map((r) => r.run_id));
  const series = runs.map((run, i) => ({ run, data: found[run.run_id], color: RUN_COLORS[i % RUN_COLORS.length] }));
  document.getElementById("compare-curves").replaceChildren(...curveFigures(series.filter((s) => s.data), false));
}

function th(text) {
  const cell = document.createElement("th");
  cell.textContent = text;
  return cell;
}

function compareRow(label, values, cls) {
  const tr = document.createElement("tr");
  tr.className = cls;
  tr.append(th(label), ...values.map((v) => {
    const td = document.createElement("td");
    td.textContent = v ?? "";
    return td;
  }));
  return tr;
}
