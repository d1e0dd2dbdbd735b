# tpu-rl-airflow: every command a person or CI runs. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3.11
# VENV and LOCK name another locked environment: make venv-compat and make test-compat set them
VENV ?= .venv
LOCK ?= requirements.lock
PY := $(VENV)/bin/python
# xdist workers for `make test`: the tests mostly wait (on Airflow's loops, the sandbox's
# clock). On a machine that ran a fixed Python loop in 1.8-3.3 s, 2 workers kept the 2 cores about
# 63% busy (21m24s), 3 filled them (14m49s) and 4 took longer (15m24s, 12% more CPU). On one that
# ran it in 1.0 s, 3 took 11m05s-11m38s (5 runs) with the cores about 62% busy. The suite has
# grown since (1,607 tests): on 2026-12-05 a clean clone's make test took 13m58s with 3 workers,
# 12m19s and 12m41s with 4, and 12m49s with 5 (with 4 the cores were about 78% busy: one
# worker's waits on a simulated clock or a process scenario overlap the others' CPU). On
# 2026-12-06 (1,610 tests) a clean clone took 12m44s with 4 and 12m18s with 5: one run each, less
# apart than runs of one setting (12m11s-12m44s with 4), so no reason to change. Later that day,
# in place: 11m54s with 4 (cores 86% busy, 1216 CPU-s) and 11m51s with 5 (96% busy, 1362 CPU-s):
# the fifth worker filled the idle cores, and the same tests took 12% more CPU. So 4.
TEST_WORKERS ?= 4
STAMP := $(VENV)/.installed
export PYTHONPATH := $(CURDIR)/plugins:$(CURDIR)
export AIRFLOW_HOME ?= $(CURDIR)/.airflow
export AIRFLOW__CORE__LOAD_EXAMPLES := False
export AIRFLOW__CORE__DAGS_FOLDER := $(CURDIR)/dags
export AIRFLOW__CORE__PLUGINS_FOLDER := $(CURDIR)/plugins
# Some machines (this project's CI containers among them) set PYTHONDONTWRITEBYTECODE=1: then no
# .pyc of tpu_rl, the DAGs or the tests is kept, and every Airflow task process compiles the
# package from source again (a quarter of a process-harness run's CPU: 42 s of CPU against 31).
unexport PYTHONDONTWRITEBYTECODE

CONF ?= include/examples/tutorial.json
LINTED := plugins dags sandbox tests tools
OUT ?= plan-out

.PHONY: help venv venv-compat venv-trainer demo demo-ui test test-fast test-compat test-trainer e2e lint params plan preflight dist corpus rewards clean

help: ## list every target with what it does
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

# Exactly Python 3.11 (Composer 3's): the locks pin wheels built for it.
define CHECK_PYTHON
	@command -v $(PYTHON) >/dev/null || { \
	  echo "$(PYTHON) is not on PATH: this project needs exactly Python 3.11 (the version Cloud Composer 3 runs; the pinned wheels are built for it)."; \
	  echo "Install it (Debian/Ubuntu: apt-get install python3.11 python3.11-venv; macOS: brew install python@3.11; or pyenv install 3.11),"; \
	  echo "or name another 3.11 interpreter: make <target> PYTHON=/path/to/python3.11"; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || { \
	  echo "$(PYTHON) is Python $$($(PYTHON) -c 'import platform; print(platform.python_version())'), not 3.11: make <target> PYTHON=/path/to/python3.11"; exit 1; }
endef
# pip install -r <lock> into <venv>, one progress line: $(call PIP_INSTALL,<venv>,<lock>)
define PIP_INSTALL
	@set -o pipefail; $(1)/bin/python -m pip install --disable-pip-version-check -r $(2) | awk -v total=$$(grep -c '==' $(2)) \
	  '/^Collecting /{n++; printf "\r  fetched %d/%d: %-60s", n, total, $$2; fflush()} \
	   /Building wheel for /{printf "\r  building wheel %d: %-60s", ++w, $$4; fflush()} \
	   /^Installing collected/{printf "\n  installing %d packages into the venv: pip shows nothing until all are in (a few minutes)...\n", split($$0, p, ", "); fflush()} \
	   /^Successfully installed/{print "  installed"}'
	@$(1)/bin/python -m pip check >/dev/null
endef

$(STAMP): $(LOCK) $(LOCK:.lock=.txt)
	$(CHECK_PYTHON)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "Installing Airflow $$(sed -n 's/^apache-airflow==//p' $(LOCK)), its providers and the test tools into $(VENV) from $(LOCK) ($$(grep -c '==' $(LOCK)) pinned packages): about 3-5 minutes the first time, once."
	$(call PIP_INSTALL,$(VENV),$(LOCK))
	@touch $(STAMP)
	@echo "$(VENV) is ready."

venv: $(STAMP) ## create .venv from the pinned requirements (once)

COMPAT := VENV=.venv-compat LOCK=requirements-compat.lock
venv-compat: ## create .venv-compat from requirements-compat.lock: the oldest supported Airflow and providers (README "Supported versions")
	@$(MAKE) --no-print-directory venv $(COMPAT)

# The real trainer's own environment: google-tunix and JAX on CPU, pinned apart from
# Airflow's (numpy, protobuf and others differ). Only the sandbox's training pod runs it
# (sandbox/real_trainer/process.py; TPU_RL_TRAINER_PYTHON names another python).
TRAINER_VENV := .venv-trainer
TRAINER_LOCK := requirements-trainer.lock
TRAINER_STAMP := $(TRAINER_VENV)/.installed
$(TRAINER_STAMP): $(TRAINER_LOCK)
	$(CHECK_PYTHON)
	@test -x $(TRAINER_VENV)/bin/python || $(PYTHON) -m venv $(TRAINER_VENV)
	@echo "Installing google-tunix $$(sed -n 's/^google-tunix==//p' $(TRAINER_LOCK)) and JAX $$(sed -n 's/^jax==//p' $(TRAINER_LOCK)) (CPU) into $(TRAINER_VENV) from $(TRAINER_LOCK) ($$(grep -c '==' $(TRAINER_LOCK)) pinned packages, about 1.6 GB): about 4 minutes the first time, once."
	$(call PIP_INSTALL,$(TRAINER_VENV),$(TRAINER_LOCK))
	@touch $(TRAINER_STAMP)
	@echo "$(TRAINER_VENV) is ready."

venv-trainer: $(TRAINER_STAMP) ## create .venv-trainer from requirements-trainer.lock: Tunix's GRPO and JAX on CPU, the real trainer the trainer tier runs

# MaxText as the judge of meshes: MaxText 0.2.4 with JAX and libtpu (which describes
# and compiles for a TPU topology on CPU), on Python 3.12 (MaxText needs it), pinned apart from
# Airflow's. Only the MaxText tier runs it (tools/maxtext_judge/judge.py). pyenv's python3.12
# shim on PATH may name no installed version: an installed pyenv 3.12 comes first.
PYTHON312 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12 /root/.pyenv/versions/3.12*/bin/python3.12) $(shell command -v python3.12))
MAXTEXT_VENV := .venv-maxtext
MAXTEXT_LOCK := requirements-maxtext.lock
MAXTEXT_STAMP := $(MAXTEXT_VENV)/.installed
.PHONY: venv-maxtext test-maxtext
$(MAXTEXT_STAMP): $(MAXTEXT_LOCK)
	@test -n "$(PYTHON312)" && $(PYTHON312) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null || { \
	  echo "No working Python 3.12 ($(or $(PYTHON312),none found)): the MaxText tier needs one (MaxText 0.2.4 requires Python >= 3.12; $(MAXTEXT_LOCK) pins wheels for 3.12)."; \
	  echo "Install it (Debian/Ubuntu: apt-get install python3.12 python3.12-venv; macOS: brew install python@3.12; or pyenv install 3.12),"; \
	  echo "or name one: make test-maxtext PYTHON312=/path/to/python3.12"; exit 1; }
	@test -x $(MAXTEXT_VENV)/bin/python || $(PYTHON312) -m venv $(MAXTEXT_VENV)
	@echo "Installing MaxText $$(sed -n 's/^maxtext==//p' $(MAXTEXT_LOCK)), JAX $$(sed -n 's/^jax==//p' $(MAXTEXT_LOCK)) and libtpu $$(sed -n 's/^libtpu==//p' $(MAXTEXT_LOCK)) into $(MAXTEXT_VENV) from $(MAXTEXT_LOCK) ($$(grep -c '==' $(MAXTEXT_LOCK)) pinned packages, about 1.8 GB): about 4 minutes the first time, once."
	$(call PIP_INSTALL,$(MAXTEXT_VENV),$(MAXTEXT_LOCK))
	@touch $(MAXTEXT_STAMP)
	@echo "$(MAXTEXT_VENV) is ready."

venv-maxtext: $(MAXTEXT_STAMP) ## create .venv-maxtext from requirements-maxtext.lock: MaxText 0.2.4, JAX and libtpu on Python 3.12 (PYTHON312=<path> names it), the judge the MaxText tier runs

demo: $(STAMP) ## one whole DAG run on the local sandbox: a line per task, then the summary (full log: DEMO_LOG, default .airflow/demo.log)
	@$(PY) -m tools.demo

PORT ?= 8080
demo-ui: $(STAMP) ## Airflow's UI on the sandbox: trigger the DAG from its form on http://127.0.0.1:8080 (PORT=<n> for another), login admin/admin; Ctrl-C stops it
	@DEMO_UI_PORT=$(PORT) $(PY) -m tools.demo_ui

# the real-trainer tier (tests/trainer) and the MaxText tier (tests/maxtext) have venvs and
# targets of their own: test-trainer, test-maxtext
test: $(STAMP) chromium postgresql kubectl lint ## lint and every tier: unit, dag, e2e, processes, ui (what CI runs, with test-compat and test-trainer)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --ignore=tests/trainer --ignore=tests/maxtext

test-fast: $(STAMP) lint ## lint and the fast tiers (unit, integration, dag): about 2 minutes
	$(PY) -m pytest -q -n 2 --dist loadgroup -m "unit or integration or dag" --ignore=tests/trainer --ignore=tests/maxtext

# On the older Airflow, deprecations raised inside Airflow's and the providers' own modules are
# shown, not errors (pyproject.toml makes them errors on the pinned versions): this project's
# code, tests and DAG files still must not use a deprecated API.
define COMPAT_WARNINGS
error::DeprecationWarning:(tpu_rl|sandbox|tests|tools)(\.|$$)
error::DeprecationWarning:unusual_prefix_
error::FutureWarning:(tpu_rl|sandbox|tests|tools)(\.|$$)
endef
export COMPAT_WARNINGS
test-compat: venv-compat postgresql ## the DAG tests, the seams driven against the sandbox (integration), make demo's test and the process scenarios that defer, on the oldest supported Airflow (.venv-compat)
	$(COMPAT) .venv-compat/bin/python -m pytest -q -n 2 --dist loadgroup -o "filterwarnings=$$COMPAT_WARNINGS" \
	  -m "dag or integration or e2e or defers" tests/dags tests/integration tests/e2e/test_make_demo.py tests/processes

# One worker: each run's trainer is a process using the cores (JAX on CPU); the compile cache
# (.airflow/jax-cache, TPU_RL_JAX_CACHE) makes a second make test-trainer faster.
test-trainer: $(STAMP) $(TRAINER_STAMP) chromium ## the real-trainer tier: whole DAG runs whose training pod runs Tunix's GRPO on CPU (.venv-trainer), and its process seam
	$(PY) -m pytest -q -m trainer tests/trainer

# One pytest process: the tier's session runs two judge processes side by side (the cells with
# their compiles, the generated settings); JAX's compile cache (.airflow/maxtext-judge) makes a
# second make test-maxtext faster.
test-maxtext: $(STAMP) $(MAXTEXT_STAMP) ## the MaxText judge tier: MaxText 0.2.4's own config loading, meshes and ahead-of-time compile judge every catalogue cell (one and two slices) and 240 generated settings as validate does (.venv-maxtext)
	$(PY) -m pytest -q -m maxtext tests/maxtext

e2e: $(STAMP) postgresql ## only the end-to-end scenarios, both harnesses: make e2e REPORT=<file>
	E2E_REPORT=$(abspath $(or $(REPORT),e2e-report.json)) $(PY) -m pytest -q tests/e2e/test_scenarios.py tests/e2e/test_deployments.py tests/processes

lint: $(STAMP) ## ruff check and format check, the package's layers (import-linter) and types (mypy, strict on the whole package), both configured in pyproject.toml
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	PYTHONPATH=plugins $(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/mypy

params: $(STAMP) ## regenerate every file made from a declaration: params.json and docs/settings.md (the settings), the form's cost estimate of the defaults, the swept kinds' table in docs/operations.md, the preflight checks' lists (README, docs/operations.md, the preflight step's doc), the README's table of the catalogue's cells
	PYTHONPATH=plugins $(PY) -m tpu_rl.settings.param_specs
	PYTHONPATH=plugins $(PY) -m tpu_rl.dag.params
	PYTHONPATH=plugins $(PY) -m tpu_rl.settings.table docs/settings.md
	PYTHONPATH=plugins $(PY) -m tpu_rl.kube.swept_doc docs/operations.md
	PYTHONPATH=plugins $(PY) -m tpu_rl.preflight.checks_doc
	PYTHONPATH=plugins $(PY) -m tpu_rl.report.cells_table

.PHONY: prices
prices: $(STAMP) ## refresh the price table's billing-catalogue rows from the Cloud Billing Catalog API and print what changed (key: TPU_RL_BILLING_API_KEY, else application-default credentials; CHECK=1: only say it, exit 1 when stale); then make params
	PYTHONPATH=plugins $(PY) -m tools.prices $(if $(CHECK),--check)

plan: $(STAMP) ## render a run offline: make plan CONF=<json> OUT=<dir>
	$(PY) -m tpu_rl.plan $(CONF) $(OUT)

preflight: $(STAMP) ## read-only checks of a run against the real project (APIs, IAM, v6e, capacity, bucket, cluster, images, Hugging Face): make preflight CONF=<json>
	@$(PY) -m tools.preflight $(CONF)

# setuptools leaves build/ and plugins/*.egg-info behind: the egg-info's entry point, on the
# plugins folder's sys.path, would make Airflow load the UI plugin a second time
dist: $(STAMP) ## build the wheel dist/tpu_rl_airflow-<version>-py3-none-any.whl (tpu_rl, its data files, the UI plugin's entry point)
	rm -rf build plugins/*.egg-info
	$(PY) -m pip wheel --quiet --disable-pip-version-check --no-deps -w dist .
	rm -rf build plugins/*.egg-info

corpus: $(STAMP) $(TRAINER_STAMP) ## record the corpus of real GRPO runs (sandbox/corpus/*.json) with the real trainer: make corpus [RUN=<name>] (about 5 minutes for all 17)
	PYTHONPATH=plugins:. TPU_RL_TRAINER_PYTHON=$(CURDIR)/$(TRAINER_VENV)/bin/python $(PY) -m tools.trainer_corpus $(if $(RUN),--run $(RUN))

rewards: $(STAMP) ## parse a saved training log: make rewards LOG=<file>
	@test -n "$(LOG)" || { echo "usage: make rewards LOG=<file>"; exit 2; }
	@$(PY) -m tpu_rl.training_log.lines $(LOG)

clean: ## remove .venv, .venv-compat, .venv-trainer, .venv-maxtext, .airflow (demo databases and logs, the JAX cache), plan-out, test-artifacts and caches
	rm -rf $(VENV) .venv-compat $(TRAINER_VENV) $(MAXTEXT_VENV) .airflow plan-out test-artifacts .pytest_cache .ruff_cache

# --- delivery targets (airflow, deploy-composer) below this line ---
.PHONY: airflow deploy-composer

airflow: $(STAMP) ## Airflow standalone on SQLite with this project's folders: UI on http://localhost:8080
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" AIRFLOW_HOME=$(CURDIR)/.airflow AIRFLOW__CORE__DAGS_FOLDER=$(CURDIR)/dags AIRFLOW__CORE__PLUGINS_FOLDER=$(CURDIR)/plugins AIRFLOW__CORE__LOAD_EXAMPLES=False AIRFLOW__API__HOST=127.0.0.1 AIRFLOW__API__PORT=8080 airflow standalone

# python3 from PATH, not .venv: the deploy needs only the standard library (and gcloud, twine).
# The names reach the tool as environment variables, each the variable's text as given
# ($(value): not expanded by make), quoted by the shell as one argument: no name is ever read as
# shell or make text; the tool refuses a name its service cannot have before running anything.
# make exports a command-line variable to every recipe, expanding it first (so a `$(shell ...)`
# in ENV would run): these names go to no recipe but this one's, as DEPLOY_*.
unexport ENV LOCATION PROJECT REPOSITORY WHEEL DRY_RUN
DEPLOY_USAGE := usage: make deploy-composer ENV=<name> LOCATION=<region> [PROJECT=<id>] [REPOSITORY=<name>] [WHEEL=<file>] [DRY_RUN=1]
deploy-composer: export DEPLOY_ENV = $(value ENV)
deploy-composer: export DEPLOY_LOCATION = $(value LOCATION)
deploy-composer: export DEPLOY_PROJECT = $(value PROJECT)
deploy-composer: export DEPLOY_REPOSITORY = $(value REPOSITORY)
deploy-composer: export DEPLOY_WHEEL = $(value WHEEL)
deploy-composer: ## install the wheel on Cloud Composer: make deploy-composer ENV=<name> LOCATION=<region> [PROJECT=<id>] [REPOSITORY=<name>] [WHEEL=<file>] [DRY_RUN=1]
	@[ -n "$$DEPLOY_ENV" ] && [ -n "$$DEPLOY_LOCATION" ] || { echo "$(DEPLOY_USAGE)"; exit 2; }
	@$(PYTHON) -m tools.deploy_composer --project="$$DEPLOY_PROJECT" --repository="$$DEPLOY_REPOSITORY" --wheel="$$DEPLOY_WHEEL" $(if $(filter 1,$(value DRY_RUN)),--dry-run) -- "$$DEPLOY_ENV" "$$DEPLOY_LOCATION"

# --- headless Chromium for the UI tests (tests/ui/) ---
.PHONY: chromium
chromium: ## install Debian's chromium with apt-get when missing (only as root, and says so first; without it the UI tests skip)
	@if command -v chromium >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
	  echo "chromium is missing: installing Debian's chromium as root (apt-get update; apt-get install -y chromium)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "chromium is not installed and this is not root: the UI tests will be skipped"; fi

# --- PostgreSQL for the production-shaped process harness (tests/processes) ---
.PHONY: postgresql
postgresql: ## install Debian's postgresql server (as root; without it the process scenarios skip)
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || { echo "postgresql is missing: installing Debian's postgresql as root (apt-get install -y postgresql)"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; }
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || echo "postgresql not installed (not root): the process scenarios will be skipped"
# --- kubectl for the emulator test (tests/sandbox/test_kubectl.py) ---
.PHONY: kubectl
kubectl: ## install Debian's kubernetes-client (as root; without it the kubectl test skips)
	@command -v kubectl >/dev/null || [ "$$(id -u)" != 0 ] || { echo "kubectl is missing: installing Debian's kubernetes-client as root (apt-get install -y kubernetes-client)"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubernetes-client >/dev/null; }
	@command -v kubectl >/dev/null || echo "kubectl not installed (not root): the kubectl test will be skipped"

# --- benchmarks ---
.PHONY: bench
bench: $(STAMP) ## measure parse, worker, log-read, detection, TPU-idle and preemption-resume figures against naive baselines: bench.json
	$(PY) -m tools.bench.run bench.json
