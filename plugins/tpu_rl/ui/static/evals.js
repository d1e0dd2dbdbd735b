// The page's evaluations: for one run (picked in #eval-run), a small SVG chart per metric over
// the evaluated steps (pre at step 0, post at the final step), the exported step ringed. Uses
// page.js's SVG, el and num. No libraries.
"use strict";

const EVAL_METRICS = ["accuracy", "partial_accuracy", "format_accuracy", "mean_reward"];

function drawEvaluations(runs) {
  const select = document.getElementById("eval-run");
  const box = document.getElementById("evals");
  const shown = runs.filter((r) => (r.evaluations || []).some((e) => e.step !== null));
  select.hidden = !shown.length;
  if (!shown.length) {
    box.textContent = "No evaluations yet.";
    return;
  }
  const picked = select.value;
  select.replaceChildren(...shown.map((r) => {
    const option = document.createElement("option");
    option.value = r.run_id;
    option.textContent = r.run_id;
    return option;
  }));
  if (shown.some((r) => r.run_id === picked)) select.value = picked; // kept across refreshes
  const draw = () => drawRunEvaluations(box, shown.find((r) => r.run_id === select.value));
  select.onchange = draw;
  draw();
}

function drawRunEvaluations(box, run) {
  const rows = run.evaluations.filter((e) => e.step !== null);
  const charts = EVAL_METRICS.map((name) => {
    const figure = document.createElement("figure");
    const caption = document.createElement("figcaption");
    caption.textContent = name;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "eval-chart");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", `${name} per step of ${run.run_id}`);
    svg.dataset.metric = name;
    figure.append(caption, svg);
    miniChart(svg, rows, name);
    return figure;
  });
  const chosen = rows.find((e) => e.chosen);
  const note = document.createElement("p");
  note.className = "eval-note";
  note.textContent = chosen ? `Exported: step ${chosen.step} (ringed).` : "Nothing exported.";
  box.replaceChildren(...charts, note);
}

// One metric over the steps: a line through the evaluations, a dot per step, the exported
// step ringed; the first and last step and the value range as ticks.
function miniChart(svg, rows, name) {
  const width = 260;
  const height = 130;
  const pad = { left: 44, right: 10, top: 10, bottom: 22 };
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const points = rows.filter((r) => r[name] !== null);
  if (!points.length) {
    el("text", { x: pad.left, y: height / 2 }, svg).textContent = "no values";
    return;
  }
  const steps = rows.map((r) => r.step);
  const [first, last] = [Math.min(...steps), Math.max(...steps)];
  const values = points.map((r) => r[name]);
  let [lo, hi] = [Math.min(...values), Math.max(...values)];
  if (hi === lo) { lo -= 1e-3 + Math.abs(lo) * 0.05; hi += 1e-3 + Math.abs(hi) * 0.05; }
  const digits = name === "mean_reward" ? 3 : 1;
  const x = (s) => pad.left + (last === first ? 0.5 : (s - first) / (last - first)) *
    (width - pad.left - pad.right);
  const y = (v) => pad.top + (1 - (v - lo) / (hi - lo)) * (height - pad.top - pad.bottom);
  const bottom = height - pad.bottom;
  el("line", { class: "axis", x1: pad.left, x2: width - pad.right, y1: bottom, y2: bottom }, svg);
  for (const v of [lo, hi]) {
    el("text", { class: "ytick", x: pad.left - 4, y: y(v) + 4, "text-anchor": "end" }, svg)
      .textContent = num(v, digits);
  }
  for (const s of new Set([first, last])) {
    el("text", { class: "xtick", x: x(s), y: height - 6, "text-anchor": "middle" }, svg)
      .textContent = String(s);
  }
  el("polyline", { class: "post", points: points.map((r) => `${x(r.step)},${y(r[name])}`).join(" ") }, svg);
  for (const r of points) {
    if (r.chosen) el("circle", { class: "chosen", cx: x(r.step), cy: y(r[name]), r: 7 }, svg);
    const dot = el("circle", { class: r.label, cx: x(r.step), cy: y(r[name]), r: 3 }, svg);
    el("title", {}, dot).textContent = `step ${r.step} (${r.label}): ${name} ${num(r[name], 4)}`;
  }
}
