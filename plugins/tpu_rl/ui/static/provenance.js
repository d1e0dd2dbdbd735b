// The page's provenance view: a run's "provenance" button reads api/provenance (tpu_rl.ui.provenance)
// and shows the chain of the run's export, base model to registry version, a row per link: what
// the run's records say of it and the OpenLineage dataset it names (namespace and name, as the
// lineage events name it); above it, whether the export is its deployment's champion. Uses
// page.js's AIRFLOW_ROOT, cell and link. No libraries.
"use strict";

// A run's button, beside its export.
function provenanceButton(runId) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "provenance-button";
  button.textContent = "provenance";
  button.title = "base model \u2192 dataset \u2192 run \u2192 step \u2192 evaluation \u2192 export " +
    "\u2192 approval \u2192 registry version";
  button.setAttribute("aria-label", `provenance of ${runId}'s export`);
  button.onclick = () => showProvenance(runId);
  return button;
}

async function showProvenance(runId) {
  const view = document.getElementById("provenance-view");
  const status = document.getElementById("provenance-status");
  document.getElementById("provenance-title").textContent = `Provenance of ${runId}'s export`;
  status.textContent = "Loading\u2026";
  document.getElementById("provenance-table").replaceChildren();
  view.hidden = false;
  view.dataset.state = "loading";
  view.scrollIntoView({ block: "start" });
  try {
    const response = await fetch(`api/provenance?run_id=${encodeURIComponent(runId)}`,
      { credentials: "same-origin" });
    if (!response.ok) {
      const said = await response.json().catch(() => ({}));
      throw new Error(`${response.status} ${said.detail || response.statusText}`);
    }
    drawProvenance(await response.json());
    view.dataset.state = "ready";
  } catch (error) {
    status.textContent = `Could not load the provenance: ${error.message}`;
    view.dataset.state = "error";
  }
}

// The champion's line (and a button to the champion's own chain when it is another run on the
// page), what could not be read, then a row per link.
function drawProvenance(p) {
  const status = document.getElementById("provenance-status");
  const lines = [];
  if (p.champion) {
    const line = document.createElement("p");
    line.className = p.champion.current ? "champion current" : "champion";
    line.append(p.champion.text, " ", link(p.champion.url, "record", false));
    const other = p.champion.run_id;
    if (other && other !== p.run_id && allRuns.some((r) => r.run_id === other)) {
      line.append(" ", provenanceButton(other));
    }
    lines.push(line);
  }
  if (p.error) {
    const error = document.createElement("p");
    error.className = "provenance-error";
    error.textContent = p.error;
    lines.push(error);
  }
  status.replaceChildren(...lines);
  const columns = ["link", "what the run's records say", "OpenLineage dataset", "task"];
  const thead = tableHead(columns.map((text) => [text, "text"]));
  const body = document.createElement("tbody");
  for (const l of p.links) {
    const tr = document.createElement("tr");
    tr.className = l.missing ? "link missing" : "link";
    cell(tr, l.label, "text label");
    const said = document.createElement("div");
    const text = document.createElement("span");
    text.className = "said";
    text.append(l.url ? link(new URL(l.url, AIRFLOW_ROOT).href, l.text, !/^https?:/.test(l.url)) : l.text);
    said.append(text);
    if (l.detail) {
      const detail = document.createElement("span");
      detail.className = "detail";
      detail.textContent = l.detail;
      said.append(detail);
    }
    cell(tr, said, "text");
    cell(tr, datasetCell(l.dataset), "text dataset");
    const task = document.createElement("code");
    task.textContent = l.task;
    cell(tr, task, "text");
    body.append(tr);
  }
  document.getElementById("provenance-table").replaceChildren(thead, body);
}

// A dataset as OpenLineage names it: its name, its namespace under it; a dash for none.
function datasetCell(dataset) {
  const box = document.createElement("div");
  if (!dataset) {
    box.textContent = "\u2014";
    return box;
  }
  const name = document.createElement("code");
  name.textContent = dataset.name;
  const namespace = document.createElement("span");
  namespace.className = "namespace";
  namespace.textContent = dataset.namespace;
  box.append(name, namespace);
  return box;
}

document.getElementById("provenance-close").onclick = () => {
  document.getElementById("provenance-view").hidden = true;
};
