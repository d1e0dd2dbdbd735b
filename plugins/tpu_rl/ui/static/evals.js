// The page's evaluations: for one run (picked in #eval-run), a small SVG chart per metric over
// the evaluated steps (pre at step 0, post at the final step), the exported step ringed; with a
// held-out evaluation (the run's `heldout`), each scored step's held-out accuracy on the
// mean_reward chart (its own axis, 0-100%), the best step labelled, and a table per benchmark
// under the charts. Uses page.js's SVG, el and num. No libraries.
"use strict";

const EVAL_METRICS = ["accuracy", "partial_accuracy", "format_accuracy", "mean_reward"];
// The chart the held-out accuracy shares: the trainer's reward per step.
const HELDOUT_ON = "mean_reward";
// A reference the held-out evaluation did not score (tpu_rl.heldout.table.NOT_SCORED).
const NOT_SCORED = "\u2014";

function drawEvaluations(runs) {
  const select = document.getElementById("eval-run");
  const box = document.getElementById("evals");
  const shown = runs.filter((r) => r.heldout || (r.evaluations || []).some((e) => e.step !== null));
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
    const heldout = name === HELDOUT_ON ? run.heldout : null;
    const figure = document.createElement("figure");
    const caption = document.createElement("figcaption");
    caption.textContent = name;
    if (heldout) {
      const also = document.createElement("span");
      also.className = "heldout-key";
      also.textContent = " and \u25c6 held-out accuracy (right axis)";
      caption.append(also);
    }
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", heldout ? "eval-chart with-heldout" : "eval-chart");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", `${name}${heldout ? " and held-out accuracy" : ""} per step of ${run.run_id}`);
    svg.dataset.metric = name;
    figure.append(caption, svg);
    miniChart(svg, rows, name, heldout);
    return figure;
  });
  const chosen = rows.find((e) => e.chosen);
  const note = document.createElement("p");
  note.className = "eval-note";
  note.textContent = chosen ? `Exported: step ${chosen.step} (ringed).` : "Nothing exported.";
  if (run.heldout) {
    note.textContent += ` Held-out: ${plural(run.heldout.scores.length, "step")} scored ` +
      `(\u25c6 on the ${HELDOUT_ON} chart, right axis), step ${run.heldout.step} the best.`;
  }
  box.replaceChildren(...charts, note, ...(run.heldout ? [heldoutTable(run.heldout)] : []));
}

// The held-out evaluation's row per benchmark, as the run's report has it (tpu_rl.heldout.table):
// items, the candidate's, the champion's and the base model's accuracy, the difference from each
// in points with its interval and the verdict (the whole sentence as its tooltip); its overall
// verdict above, how to read it below.
function heldoutTable(heldout) {
  const box = document.createElement("div");
  box.className = "table heldout";
  const title = document.createElement("h3");
  title.textContent = "Held-out benchmarks";
  const verdict = document.createElement("p");
  verdict.className = "heldout-verdict";
  verdict.textContent = heldout.verdict;
  const table = document.createElement("table");
  table.className = "heldout-table";
  const points = `points (${heldout.level} interval)`;
  // the text columns (benchmark, verdicts) aligned left as their cells
  const thead = tableHead([["benchmark", "text"], ["items"], [`candidate (step ${heldout.step})`],
    ["champion"], ["base"], [`vs champion, ${points}`], ["verdict vs champion", "text"],
    [`vs base, ${points}`], ["verdict vs base", "text"]]);
  const body = document.createElement("tbody");
  for (const row of heldout.rows) {
    const tr = document.createElement("tr");
    cell(tr, row.guard ? `${row.task} (guard)` : row.task, "text");
    cell(tr, row.items.toLocaleString("en-US"));
    for (const value of [row.candidate, row.champion, row.base]) cell(tr, share(value));
    for (const versus of [row.vs_champion, row.vs_base]) {
      cell(tr, versus ? `${signedPoints(versus.difference)} (${signedPoints(versus.interval[0])} ` +
        `to ${signedPoints(versus.interval[1])})` : NOT_SCORED);
      const said = document.createElement("span");
      said.textContent = versus ? versus.verdict : NOT_SCORED;
      if (versus) said.title = versus.says;
      cell(tr, said, `text ${versus ? { better: "up", worse: "down" }[versus.verdict] || "" : ""}`);
    }
    body.append(tr);
  }
  table.append(thead, body);
  const reading = document.createElement("p");
  reading.className = "eval-note";
  reading.textContent = heldout.reading;
  box.append(title, verdict, table, reading);
  return box;
}

// A share of the items as a percentage: 0.76 -> "76.0%"; the dash when not scored.
function share(value) {
  return value === null || value === undefined ? NOT_SCORED : `${num(value * 100, 1)}%`;
}

// A difference of shares as signed accuracy points: 0.02 -> "+2.0".
function signedPoints(value) {
  return `${value >= 0 ? "+" : ""}${num(value * 100, 1)}`;
}

// One metric over the steps: a line through the evaluations, a dot per step, the exported
// step ringed; the first and last step and the value range as ticks. With `heldout`, each
// scored step's held-out accuracy too, as diamonds on an axis of its own at the right.
function miniChart(svg, rows, name, heldout) {
  const [width, height] = heldout ? [360, 160] : [260, 130];
  const pad = { left: 44, right: heldout ? 48 : 10, top: 10, bottom: 22 };
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const points = rows.filter((r) => r[name] !== null);
  if (!points.length && !heldout) {
    el("text", { x: pad.left, y: height / 2 }, svg).textContent = "no values";
    return;
  }
  const scores = heldout ? heldout.scores : [];
  const steps = [...rows.map((r) => r.step), ...scores.map((s) => s.step)];
  const [first, last] = [Math.min(...steps), Math.max(...steps)];
  const values = points.map((r) => r[name]);
  let [lo, hi] = values.length ? [Math.min(...values), Math.max(...values)] : [0, 1];
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
  if (heldout) heldoutSeries(svg, heldout, x, { width, height, pad });
}

// The held-out accuracy of each scored step on `svg`'s chart: its axis at the right (0-100%,
// labelled), a dashed line through diamonds, the best step's diamond outlined and labelled.
function heldoutSeries(svg, heldout, x, { width, height, pad }) {
  const right = width - pad.right;
  const bottom = height - pad.bottom;
  const y = (share) => pad.top + (1 - share) * (bottom - pad.top);
  el("line", { class: "axis", x1: right, x2: right, y1: pad.top, y2: bottom }, svg);
  for (const share of [0, 0.5, 1]) {
    el("text", { class: "ytick heldout-tick", x: right + 4, y: y(share) + 4 }, svg)
      .textContent = `${share * 100}%`;
  }
  const labelX = width - 6;
  el("text", { class: "heldout-label", x: labelX, y: (pad.top + bottom) / 2, "text-anchor": "middle",
    transform: `rotate(90 ${labelX} ${(pad.top + bottom) / 2})` }, svg).textContent = "held-out accuracy";
  el("polyline", { class: "heldout", points: heldout.scores.map((s) => `${x(s.step)},${y(s.score)}`).join(" ") }, svg);
  const diamond = (s, r) => `M${x(s.step)},${y(s.score) - r} l${r},${r} l${-r},${r} l${-r},${-r}Z`;
  for (const s of heldout.scores) {
    const best = s.step === heldout.step;
    if (best) {
      el("path", { class: "heldout-best", d: diamond(s, 8) }, svg);
      el("text", { class: "heldout-best", x: x(s.step), y: y(s.score) - 11, "text-anchor": "middle" }, svg)
        .textContent = "best";
    }
    const mark = el("path", { class: "heldout", d: diamond(s, 4) }, svg);
    el("title", {}, mark).textContent =
      `step ${s.step}: held-out accuracy ${num(s.score * 100, 1)}%${best ? " (best)" : ""}`;
  }
}
