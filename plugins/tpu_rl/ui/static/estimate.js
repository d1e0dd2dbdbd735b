// The estimate page: posts the settings' JSON text to api/estimate as they are typed (after a
// pause), shows every problem, the warnings and the estimate's short table, and triggers a run
// with settings that have no problem through Airflow's REST API. The settings come from the
// fields, the textarea or ?conf=.
"use strict";

// Airflow's UI root, relative to this page (mounted one level below it).
const AIRFLOW_ROOT = new URL("../", window.location.href);
const FIGURES = new Set(["TPUs billed", "chip-hours"]); // right-aligned columns
const PAUSE_MS = 300; // typing pauses this long before the settings are estimated
const NUMBER = /^-?\d+(\.\d+)?([eE][+-]?\d+)?$/; // a field's text that is a JSON number

const conf = document.getElementById("conf");
const fields = [...document.querySelectorAll("#fields [data-setting]")];
const button = document.getElementById("trigger");

let asked = 0; // counts changes and estimates: an answer to an older one is dropped
let pause = null; // the timer of the estimate asked for once typing pauses
let dagId = null; // the DAG the estimate answers for, whose run the button triggers
let valid = null; // the settings' text of the newest answer, while it names no problem
let triggering = false;
let triggered = null; // the settings' text of the last run triggered from this page

function plural(count, word) {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

function link(href, text) {
  const a = document.createElement("a");
  a.href = href;
  a.textContent = text;
  a.target = "_top";
  return a;
}

// Airflow's login, which brings the user back to this page's address (holding the settings).
function loginLink() {
  const login = new URL("api/v2/auth/login", AIRFLOW_ROOT);
  login.searchParams.set("next", window.location.href);
  return link(login.href, "Log in to Airflow");
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

// The settings the text holds, as an object (blank text: none set yet), or null.
function settingsOf(text) {
  if (!text.trim()) return {};
  try {
    const value = JSON.parse(text);
    return value && typeof value === "object" && !Array.isArray(value) ? value : null;
  } catch {
    return null;
  }
}

// The fields show the settings the textarea holds; text that is no settings object (the
// problem says why) leaves them disabled, as they were.
function fillFields() {
  const settings = settingsOf(conf.value);
  document.getElementById("fields").disabled = settings === null;
  if (settings === null) return;
  for (const input of fields) {
    const value = settings[input.dataset.setting] ?? "";
    input.value = typeof value === "string" ? value : JSON.stringify(value);
  }
}

// A field typed into: its setting in the textarea's JSON (a number field's text as a number
// when it is one; empty: the setting removed, its default applies).
function fieldTyped(event) {
  const settings = settingsOf(conf.value);
  if (settings === null) return;
  const input = event.target;
  const name = input.dataset.setting;
  const text = input.value.trim();
  if (text === "") delete settings[name];
  else settings[name] = "number" in input.dataset && NUMBER.test(text) ? Number(text) : text;
  conf.value = JSON.stringify(settings, null, 2);
  changed();
}

// What the trigger button does now, or why it does nothing.
function buttonNote() {
  if (triggering) return "Triggering…";
  if (valid !== null && valid === triggered) {
    return "Triggered: change the settings to trigger another run.";
  }
  if (valid !== null) return "Starts the run now, with these settings.";
  if (document.body.dataset.state === "loading") {
    return "Waiting for the estimate of these settings.";
  }
  if (document.body.dataset.state === "login") return "Possible once you are logged in.";
  return "Possible once no setting is invalid.";
}

function updateButton() {
  button.disabled = valid === null || triggering || valid === triggered;
  document.getElementById("trigger-note").textContent = buttonNote();
}

// Logged out (or not allowed): what to do, with a way to log in that comes back here, the
// settings kept in this page's address (?conf=).
function showLogin(status, code) {
  status.replaceChildren(
    code === 401
      ? "You are not logged in to Airflow (or your session ended), and the estimate needs a " +
        "user who may read the DAG tpu_rl_post_training (any role that can view it, e.g. " +
        "Viewer). "
      : "Your Airflow user may not read the DAG tpu_rl_post_training: ask an Airflow admin " +
        "for a role that can view it (e.g. Viewer), or log in as another user. ",
    loginLink(),
    code === 401
      ? ": Airflow brings you back here, with these settings; or log in in another tab, " +
        "then reload this page."
      : ".",
  );
  document.body.dataset.state = "login";
}

function show(answer, text) {
  const errors = document.getElementById("errors");
  errors.querySelector("h2").textContent = `${plural(answer.errors.length, "problem")} to fix`;
  fillList(errors, answer.errors);
  fillList(document.getElementById("warnings"), answer.warnings);
  for (const input of fields) {
    const named = answer.errors.some((e) => e.startsWith(`${input.dataset.setting}:`));
    input.setAttribute("aria-invalid", String(named));
  }
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
  dagId = answer.dag_id;
  valid = answer.errors.length ? null : text;
  document.body.dataset.state = "ready";
}

async function estimate() {
  const mine = ++asked;
  const text = conf.value;
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
    if (mine !== asked) return; // the settings changed since: a newer answer is due
    if (response.status === 401 || response.status === 403) {
      showLogin(status, response.status);
    } else if (!response.ok) {
      throw new Error(`${response.status} ${response.statusText}`);
    } else {
      const answer = await response.json();
      if (mine === asked) show(answer, text);
    }
  } catch (error) {
    if (mine !== asked) return;
    status.textContent = `Could not estimate: ${error.message}`;
    document.body.dataset.state = "error";
  }
  if (mine === asked) updateButton();
}

// The settings changed: any answer still to come is for older ones; estimate once typing pauses.
function changed() {
  asked += 1;
  valid = null;
  document.body.dataset.state = "loading";
  document.getElementById("status").textContent = "Estimating…";
  updateButton();
  window.clearTimeout(pause);
  pause = window.setTimeout(estimate, PAUSE_MS);
}

// Airflow's reason for a refusal: its `detail`, a sentence or FastAPI's list of field errors.
function reason(body) {
  const detail = body?.detail;
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail.map((d) => `${(d.loc ?? []).join(".")}: ${d.msg}`).join("; ");
  }
  return "";
}

// What to do when Airflow refused to trigger the run, by its status code.
function refusal(code, why) {
  const said = why ? ` (Airflow: ${why})` : "";
  switch (code) {
    case 401:
      return [
        `Not triggered: you are not logged in to Airflow (or your session ended)${said}. `,
        loginLink(),
        ": Airflow brings you back here with these settings; press Trigger this run again.",
      ];
    case 403:
      return [
        `Not triggered: your Airflow user may not trigger ${dagId}${said}. Triggering needs a ` +
          "role allowed to create its DAG runs (e.g. User or Op): ask an Airflow admin for " +
          "one, or ",
        loginLink(),
        " as another user.",
      ];
    case 409:
      return [
        `Not triggered: Airflow already has a run with the same run id${said}. Press ` +
          "Trigger this run again: the new run gets a new id.",
      ];
    case 422:
      return [
        `Not triggered: Airflow did not accept the request${said}: this page does not fit ` +
          "this Airflow version's API. Trigger from Airflow's trigger form instead: paste " +
          "these settings into its Advanced Options > Configuration JSON.",
      ];
    case 400:
      return [
        `Not triggered: Airflow refused the run${said}. Fix what it names, then press ` +
          "Trigger this run again.",
      ];
    case 404:
      return [
        `Not triggered: Airflow does not know the DAG ${dagId}${said}: its file is not parsed ` +
          "yet, or failed to; see Airflow's DAG list, then press Trigger this run again.",
      ];
    default:
      return [`Not triggered: Airflow answered ${code}${said}. Press Trigger this run again.`];
  }
}

// The new run's page in Airflow and, when the DAG is paused, that the run waits for it.
async function showRun(result, runId) {
  const dag = `dags/${encodeURIComponent(dagId)}`; // its page; api/v2/ + this: its API
  const run = new URL(`${dag}/runs/${encodeURIComponent(runId)}`, AIRFLOW_ROOT);
  result.replaceChildren("Triggered: ", link(run.href, runId), " (its page in Airflow).");
  // a hint only: the run is there whatever this answers
  const details = await fetch(new URL(`api/v2/${dag}`, AIRFLOW_ROOT), {
    credentials: "same-origin",
  })
    .then((response) => (response.ok ? response.json() : null))
    .catch(() => null);
  if (details?.is_paused) {
    result.append(
      ` The DAG ${dagId} is paused: the run waits, queued, until it is unpaused (the toggle ` +
        "on ",
      link(new URL(dag, AIRFLOW_ROOT).href, "the DAG's page"),
      ").",
    );
  }
}

async function trigger() {
  const text = valid;
  const result = document.getElementById("triggered");
  result.hidden = false;
  result.className = "";
  result.textContent = "";
  triggering = true;
  updateButton();
  try {
    const response = await fetch(
      new URL(`api/v2/dags/${encodeURIComponent(dagId)}/dagRuns`, AIRFLOW_ROOT),
      {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ logical_date: null, conf: JSON.parse(text) }),
      },
    );
    const body = await response.json().catch(() => null);
    if (response.ok) {
      triggered = text;
      await showRun(result, body.dag_run_id);
    } else {
      result.className = "refused";
      result.replaceChildren(...refusal(response.status, reason(body)));
    }
  } catch (error) {
    result.className = "refused";
    result.textContent = `Could not reach Airflow (${error.message}): check the connection, ` +
      "then press Trigger this run again.";
  } finally {
    triggering = false;
    updateButton();
  }
}

conf.addEventListener("input", () => {
  fillFields();
  changed();
});
for (const input of fields) input.addEventListener("input", fieldTyped);
button.addEventListener("click", trigger);
const given = new URLSearchParams(window.location.search).get("conf");
if (given !== null) {
  // pretty-printed to edit (the form's link holds its defaults on one line)
  let text = given;
  try {
    text = JSON.stringify(JSON.parse(given), null, 2);
  } catch {
    // not JSON: shown as given, and its problem named
  }
  conf.value = text;
  estimate();
}
fillFields();
updateButton();
