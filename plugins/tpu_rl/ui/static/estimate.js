// The estimate page: posts the settings' JSON text to api/estimate, shows every problem, the
// warnings and the estimate's short table. The settings come from the textarea or ?conf=.
"use strict";

// Airflow's UI root, relative to this page (mounted one level below it).
const AIRFLOW_ROOT = new URL("../", window.location.href);
const FIGURES = new Set(["TPUs billed", "chip-hours"]); // right-aligned columns

function plural(count, word) {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

function fillList(section, items) {
  section.querySelector("ul").replaceChildren(
    ...items.map((text) => {
      const li = document.createElement("li");
      li.textContent = text;
      return li;
    }),
  );
  section.hidden = items.length === 0;
}

function fillTable(section, estimate) {
  section.querySelector(".summary").textContent = `${estimate.summary}:`;
  section.querySelector("thead tr").replaceChildren(
    ...estimate.columns.map((name) => {
      const th = document.createElement("th");
      th.textContent = name;
      if (FIGURES.has(name)) th.className = "figure";
      return th;
    }),
  );
  section.querySelector("tbody").replaceChildren(
    ...estimate.rows.map((row) => {
      const tr = document.createElement("tr");
      row.forEach((text, i) => {
        const td = document.createElement("td");
        td.textContent = text;
        if (FIGURES.has(estimate.columns[i])) td.className = "figure";
        tr.appendChild(td);
      });
      return tr;
    }),
  );
  section.querySelector(".note").textContent = estimate.note;
}

// Logged out (or not allowed): what to do, with a way to log in that comes back here, the
// settings kept in this page's address (?conf=).
function showLogin(status, code) {
  const login = new URL("api/v2/auth/login", AIRFLOW_ROOT);
  login.searchParams.set("next", window.location.href);
  const a = document.createElement("a");
  a.href = login.href;
  a.textContent = "Log in to Airflow";
  status.replaceChildren(
    code === 401
      ? "You are not logged in to Airflow (or your session ended), and the estimate needs a " +
        "user who may read the DAG tpu_rl_post_training (any role that can view it, e.g. " +
        "Viewer). "
      : "Your Airflow user may not read the DAG tpu_rl_post_training: ask an Airflow admin " +
        "for a role that can view it (e.g. Viewer), or log in as another user. ",
    a,
    code === 401
      ? ": Airflow brings you back here, with these settings; or log in in another tab, " +
        "then reload this page."
      : ".",
  );
  document.body.dataset.state = "login";
}

function show(answer) {
  const errors = document.getElementById("errors");
  errors.querySelector("h2").textContent = `${plural(answer.errors.length, "problem")} to fix`;
  fillList(errors, answer.errors);
  fillList(document.getElementById("warnings"), answer.warnings);
  const section = document.getElementById("estimate");
  section.hidden = !answer.estimate;
  if (answer.estimate) fillTable(section, answer.estimate);
  const status = document.getElementById("status");
  if (answer.withheld_by.length) {
    status.textContent = `No estimate until ${answer.withheld_by.join(", ")} ` +
      `${answer.withheld_by.length === 1 ? "is" : "are"} valid: the figures come from them.`;
  } else {
    status.textContent = answer.errors.length
      ? "The run would be refused: its validate step names the same problems."
      : "Valid settings.";
  }
  document.body.dataset.state = "ready";
}

async function estimate() {
  const text = document.getElementById("conf").value;
  const status = document.getElementById("status");
  const address = new URL(window.location.href);
  address.searchParams.set("conf", text);
  window.history.replaceState(null, "", address);
  document.body.dataset.state = "loading";
  status.textContent = "Estimating…";
  try {
    const response = await fetch("api/estimate", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "text/plain" },
      body: text,
    });
    if (response.status === 401 || response.status === 403) {
      showLogin(status, response.status);
      return;
    }
    if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
    show(await response.json());
  } catch (error) {
    status.textContent = `Could not estimate: ${error.message}`;
    document.body.dataset.state = "error";
  }
}

document.getElementById("run").addEventListener("click", estimate);
const given = new URLSearchParams(window.location.search).get("conf");
if (given !== null) {
  // pretty-printed to edit (the form's link holds its defaults on one line)
  let text = given;
  try {
    text = JSON.stringify(JSON.parse(given), null, 2);
  } catch {
    // not JSON: shown as given, and its problem named
  }
  document.getElementById("conf").value = text;
  estimate();
}
