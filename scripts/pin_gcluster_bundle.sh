#!/usr/bin/env bash
# Pin the Cluster Toolkit bundle the Dockerfile installs: download it once, write its sha256
# into .env as GCLUSTER_BUNDLE_SHA256 (docker compose passes it to the build, which refuses a
# bundle with another checksum). Cluster Toolkit publishes no checksum file, so this is trust
# on first use: compare the printed sum with a colleague's or a second download if you can.
# Run from the project folder: scripts/pin_gcluster_bundle.sh
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
touch .env
{ grep -v '^GCLUSTER_BUNDLE_SHA256=' .env || true; echo "GCLUSTER_BUNDLE_SHA256=${sum}"; } > "${tmp}/env"
cat "${tmp}/env" > .env
echo "GCLUSTER_BUNDLE_SHA256=${sum} written to .env (${url})"
