#!/usr/bin/env bash
# Prepare .env for docker compose: made from .env.example when missing, with AIRFLOW_UID set to
# your user id on Linux (the containers then read your application-default credentials, mode
# 600, and write logs as you), and the Cluster Toolkit bundle the Dockerfile installs pinned:
# downloaded once, its sha256 written as GCLUSTER_BUNDLE_SHA256 (docker compose passes it to the
# build, which refuses a bundle with another checksum). Cluster Toolkit publishes no checksum
# file, so this is trust on first use: compare the printed sum with a colleague's or a second
# download if you can. Run from the project folder: scripts/pin_gcluster_bundle.sh
set -euo pipefail
version=$(sed -n 's/^ARG CLUSTER_TOOLKIT_VERSION=//p' Dockerfile)
case "$(uname -m)" in
  x86_64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "no gcluster bundle for $(uname -m)" >&2; exit 1 ;;
esac
url="https://github.com/GoogleCloudPlatform/cluster-toolkit/releases/download/${version}/gcluster_bundle_linux_${arch}.tgz"
tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT
curl -fsSL -o "${tmp}/bundle.tgz" "${url}"
sum=$(sha256sum "${tmp}/bundle.tgz" | cut -d ' ' -f 1)
if [ ! -e .env ]; then
  cp .env.example .env
  echo ".env made from .env.example"
fi
# Docker Desktop (macOS) maps file owners itself: the image's default uid stays.
if [ "$(uname -s)" = Linux ] && grep -q '^AIRFLOW_UID=50000$' .env; then
  sed "s/^AIRFLOW_UID=50000\$/AIRFLOW_UID=$(id -u)/" .env > "${tmp}/env" && cat "${tmp}/env" > .env
  echo "AIRFLOW_UID=$(id -u) (your user id) written to .env"
fi
{ grep -v '^GCLUSTER_BUNDLE_SHA256=' .env || true; echo "GCLUSTER_BUNDLE_SHA256=${sum}"; } > "${tmp}/env"
cat "${tmp}/env" > .env
echo "GCLUSTER_BUNDLE_SHA256=${sum} written to .env (${url})"
if grep -q '^HF_TOKEN=$' .env; then
  echo "next: put your Hugging Face token in .env (HF_TOKEN=hf_...), then: docker compose up -d --build"
fi
