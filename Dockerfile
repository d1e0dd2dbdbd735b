# The Airflow image for docker compose: the official Airflow 3.3.2 image on Python 3.11 with
# this project's provider pins, the tpu-rl-airflow wheel, terraform and the Cluster Toolkit
# bundle, so `gcluster deploy` runs in the worker without downloads at task time. tpu_rl comes
# from the wheel, as on Cloud Composer (every process imports it from site-packages, the
# triggerer too; the UI plugin loads through the wheel's entry point); DAGs and include/ are
# mounted. tests/unit/tools/test_delivery.py keeps every version here equal to requirements.txt,
# pyproject.toml and the settings' defaults.

# Stage 1 builds the wheel as `make dist` does (pip wheel --no-deps on pyproject.toml); only
# the wheel leaves this stage.
FROM apache/airflow:3.3.2-python3.11 AS wheel
COPY --chown=airflow:0 pyproject.toml /home/airflow/src/
COPY --chown=airflow:0 plugins/tpu_rl /home/airflow/src/plugins/tpu_rl
RUN pip wheel --no-cache-dir --no-deps -w /home/airflow/dist /home/airflow/src

FROM apache/airflow:3.3.2-python3.11

SHELL ["/bin/bash", "-o", "pipefail", "-o", "errexit", "-o", "nounset", "-c"]

# Terraform, which gcluster runs for deploy and destroy. Bump deliberately: a new minor version
# can change how terraform reads the Cluster Toolkit modules.
ARG TERRAFORM_VERSION=1.12.2
# The gcluster release: the default of the `cluster_toolkit_version` setting.
ARG CLUSTER_TOOLKIT_VERSION=v1.103.0
# sha256 of that release's gcluster_bundle_linux_<arch>.tgz, required: Cluster Toolkit publishes
# no checksum file, so it is pinned by whoever builds (scripts/pin_gcluster_bundle.sh writes it
# into .env, and docker compose passes it here) and checked before anything is extracted.
ARG GCLUSTER_BUNDLE_SHA256=
# Where tpu_rl.cluster.toolkit.ensure_bundle looks for the bundle:
# <cache>/<version>/gcluster_bundle_linux_<arch>/gcluster.
ENV AIRFLOW__TPU_RL__GCLUSTER_CACHE_DIR=/opt/tpu-rl/gcluster

USER root
# terraform from HashiCorp's release zip, checked against the release's SHA256SUMS, and the
# Cluster Toolkit bundle, checked against GCLUSTER_BUNDLE_SHA256, extracted (read-only) where
# ensure_bundle finds it. The architecture comes from `uname -m`, as in the tutorial and in
# ensure_bundle (platform.machine()).
RUN if [ -z "${GCLUSTER_BUNDLE_SHA256}" ]; then \
      echo "set the build arg GCLUSTER_BUNDLE_SHA256 (scripts/pin_gcluster_bundle.sh writes it into .env)" >&2; \
      exit 1; \
    fi \
    && case "$(uname -m)" in \
      x86_64) arch=amd64 ;; \
      aarch64) arch=arm64 ;; \
      *) echo "no terraform / gcluster build for $(uname -m)" >&2; exit 1 ;; \
    esac \
    && zip="terraform_${TERRAFORM_VERSION}_linux_${arch}.zip" \
    && url="https://releases.hashicorp.com/terraform/${TERRAFORM_VERSION}" \
    && tmp="$(mktemp -d)" \
    && curl -fsSL -o "${tmp}/${zip}" "${url}/${zip}" \
    && curl -fsSL "${url}/terraform_${TERRAFORM_VERSION}_SHA256SUMS" \
       | grep " ${zip}\$" | (cd "${tmp}" && sha256sum -c -) \
    && python -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("terraform", sys.argv[2])' \
       "${tmp}/${zip}" /usr/local/bin \
    && chmod 0755 /usr/local/bin/terraform \
    && terraform version \
    && bundle="gcluster_bundle_linux_${arch}" \
    && bundle_dir="${AIRFLOW__TPU_RL__GCLUSTER_CACHE_DIR}/${CLUSTER_TOOLKIT_VERSION}/${bundle}" \
    && curl -fsSL -o "${tmp}/${bundle}.tgz" \
       "https://github.com/GoogleCloudPlatform/cluster-toolkit/releases/download/${CLUSTER_TOOLKIT_VERSION}/${bundle}.tgz" \
    && echo "${GCLUSTER_BUNDLE_SHA256}  ${tmp}/${bundle}.tgz" | sha256sum -c - \
    && mkdir -p "${bundle_dir}" \
    && tar -xzf "${tmp}/${bundle}.tgz" --no-same-owner -C "${bundle_dir}" \
    && rm -rf "${tmp}" \
    && test -x "${bundle_dir}/gcluster" \
    && test -f "${bundle_dir}/examples/gke-tpu-v6e/gke-tpu-v6e-advanced.yaml" \
    && chmod -R a+rX "${AIRFLOW__TPU_RL__GCLUSTER_CACHE_DIR}"

USER airflow
# Airflow and the providers at requirements.txt's pins, the wheel, and every package pip
# installs or changes at requirements.lock's version (the lock is what the tests ran with);
# then scripts/check_locked.py fails the build if any installed package the lock names differs.
# The test tools are not installed.
COPY requirements.lock scripts/check_locked.py /opt/tpu-rl/
COPY --from=wheel /home/airflow/dist/ /opt/tpu-rl/dist/
RUN pip install --no-cache-dir --constraint /opt/tpu-rl/requirements.lock \
      /opt/tpu-rl/dist/tpu_rl_airflow-*-py3-none-any.whl \
      "apache-airflow==3.3.2" \
      "apache-airflow-providers-google==22.8.0" \
      "apache-airflow-providers-cncf-kubernetes==10.25.0" \
      "apache-airflow-providers-http==6.3.0" \
      "apache-airflow-providers-openlineage==2.20.3" \
      "PyYAML==6.0.3" \
      "jsonschema==4.26.0" \
      "tensorboard==2.21.0" \
    && python /opt/tpu-rl/check_locked.py /opt/tpu-rl/requirements.lock
