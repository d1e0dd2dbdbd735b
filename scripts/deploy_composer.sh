#!/usr/bin/env bash
# Deploy this project to a Cloud Composer 3 environment (Airflow 3.1+):
#
#   scripts/deploy_composer.sh ENV LOCATION [PROJECT]     (or: make deploy-composer ...)
#
# DRY_RUN=1 prints the commands and runs none. PYPI_PACKAGES="name==version ..." adds PyPI
# packages; by default there are none: the DAG and plugins import only Airflow, the google and
# cncf-kubernetes providers and their dependencies, which Composer ships (a test checks the
# imports). Airflow and its providers are never re-pinned.
#
# Uploads go to this project's own folders of the environment's bucket (dags/tpu_rl_airflow/,
# plugins/tpu_rl/, data/tpu_rl_airflow/include/), so deleting unmatched objects never touches
# other DAGs or plugins of the environment.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $# -lt 2 || $# -gt 3 || -z "$1" || -z "$2" ]]; then
  echo "usage: $0 ENV LOCATION [PROJECT]   (DRY_RUN=1: print the commands only)" >&2
  exit 2
fi
env_name=$1
location=$2
where=(--location "$location")
if [[ -n "${3:-}" ]]; then
  where+=(--project "$3")
fi
dry_run=${DRY_RUN:-0}
read -r -a packages <<<"${PYPI_PACKAGES:-}"

fail() {
  echo "error: $*" >&2
  exit 1
}

show() {  # print a command (to stderr, like set -x), quoting words that need it
  local word line="+"
  for word in "$@"; do
    if [[ "$word" =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then
      line+=" $word"
    else
      line+=" '${word//\'/\'\\\'\'}'"
    fi
  done
  echo "$line" >&2
}

run() {
  show "$@"
  if [[ "$dry_run" != 1 ]]; then
    "$@"
  fi
}

describe() {  # describe FIELD PLACEHOLDER: one field of the environment (PLACEHOLDER in a dry run)
  local cmd=(gcloud composer environments describe "$env_name" "${where[@]}" --format="value($1)")
  show "${cmd[@]}"
  if [[ "$dry_run" == 1 ]]; then
    echo "$2"
  else
    "${cmd[@]}"
  fi
}

for package in "${packages[@]}"; do
  name=${package,,}
  name=${name//[_.]/-}
  if [[ "$name" =~ ^apache-airflow(-core|-task-sdk)?($|[^a-z0-9-])|^apache-airflow-providers- ]]; then
    fail "$package: Composer ships Airflow and its providers; never re-pin them (choose an image version that has what you need)"
  fi
done

prefix=$(describe config.dagGcsPrefix "gs://BUCKET-OF-$env_name/dags")
[[ "$prefix" =~ ^gs://[^/]+/dags$ ]] || fail "unexpected dagGcsPrefix '$prefix' for environment $env_name"
bucket=${prefix%/dags}

triggerers=$(describe config.workloadsConfig.triggerer.count 1)
if [[ ! "$triggerers" =~ ^[1-9][0-9]*$ ]]; then
  fail "environment $env_name has no triggerer: the reward sensor and the Job waits defer, so no" \
    "run would finish (and its TPUs would keep billing). Add one with: gcloud composer" \
    "environments update $env_name ${where[*]} --triggerer-count 1"
fi

if [[ ${#packages[@]} -eq 0 ]]; then
  echo "PyPI: nothing to install (Composer ships every package the DAG imports); no update."
else
  requirements=$(mktemp "${TMPDIR:-/tmp}/composer-requirements.XXXXXX")
  trap 'rm -f "$requirements"' EXIT
  printf '%s\n' "${packages[@]}" >"$requirements"
  echo "PyPI packages for $env_name ($requirements):"
  sed 's/^/  /' "$requirements"
  run gcloud composer environments update "$env_name" "${where[@]}" \
    --update-pypi-packages-from-file="$requirements"
fi

sync() {
  run gcloud storage rsync "$1" "$2" --recursive --delete-unmatched-destination-objects \
    --exclude='.*__pycache__.*'
}
sync dags "$bucket/dags/tpu_rl_airflow"
sync plugins/tpu_rl "$bucket/plugins/tpu_rl"
sync include "$bucket/data/tpu_rl_airflow/include"

if [[ "$dry_run" == 1 ]]; then
  echo "DRY_RUN=1: nothing was run."
else
  echo "Deployed to $env_name: the DAG tpu_rl_post_training appears after the next DAG parse."
fi
