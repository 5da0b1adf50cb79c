# The rag-gate GitHub Action image (runs.using: docker). Build: docker build -t rag-gate .
#
# Supply chain: the base is pinned by digest (the multi-arch index of python:3.12-slim; refresh it with
# `docker buildx imagetools inspect python:3.12-slim` or `skopeo inspect docker://python:3.12-slim`), every Python
# package is installed from requirements-action.txt (requirements-action-ragas.txt for the -ragas variant) with
# --require-hashes (see its header to regenerate it), and the one Debian package it may add (git) is pinned to the
# version of the base's Debian release.
# CI builds it on a locally made base: --build-arg BASE_IMAGE=localhost/debian-py:bookworm
#
# Two stages: "build" installs the pinned packages into /opt/rag-gate and builds and installs rag-gate's wheel; the
# final image copies only that virtual environment, without the build backend (setuptools), the sources, the wheel,
# pip's caches or the packages' own test suites. Both stages start from the same base, so the environment's
# interpreter paths hold in the final image.
ARG BASE_IMAGE=python:3.12-slim@sha256:78387bc3881b8273120a12ebe6c1ab22b018ccc2c9adf565ae1ac9b536e184ea

# ------------------------------------------------------------------------------------------------ build stage
FROM ${BASE_IMAGE} AS build

ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# PIP_CERT / PIP_INDEX_URL: only for builds behind a TLS-intercepting proxy or a mirror (not stored in the image).
ARG PIP_CERT
ARG PIP_INDEX_URL

# Variant: the default image holds rag-gate's core (every judge but ragas, and matplotlib for the artifact's chart);
# the -ragas image adds ragas, langchain, pandas and pyarrow: --build-arg REQUIREMENTS=requirements-action-ragas.txt
ARG REQUIREMENTS=requirements-action.txt

# Pinned, hashed dependencies first, so that changing the code does not re-install them (layer caching).
COPY requirements-action.txt requirements-action-ragas.txt /opt/rag-gate-src/
RUN python3 -m venv /opt/rag-gate \
    && /opt/rag-gate/bin/pip install --no-cache-dir --require-hashes --no-deps -r "/opt/rag-gate-src/${REQUIREMENTS}"

# The package itself, as users get it: built into a wheel with the hashed setuptools above (no build isolation:
# nothing unhashed is fetched), and the wheel installed. Then what only the build needed leaves the environment:
# setuptools (the build backend; no runtime import of it), the packages' test suites (never imported by rag-gate
# or by the packages themselves) and every __pycache__ of those.
COPY pyproject.toml README.md /opt/rag-gate-src/
COPY src /opt/rag-gate-src/src
RUN /opt/rag-gate/bin/pip wheel --no-cache-dir --no-deps --no-build-isolation -w /opt/rag-gate-dist /opt/rag-gate-src \
    && /opt/rag-gate/bin/pip install --no-cache-dir --no-deps /opt/rag-gate-dist/rag_gate-*.whl \
    && /opt/rag-gate/bin/pip uninstall --yes setuptools \
    && site="$(/opt/rag-gate/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
    && find "$site" -mindepth 2 -depth -type d -name tests -exec rm -rf {} + \
    && /opt/rag-gate/bin/pip check && /opt/rag-gate/bin/rag-gate --version

# ------------------------------------------------------------------------------------------------ final image
FROM ${BASE_IMAGE}

LABEL org.opencontainers.image.title="rag-gate" \
      org.opencontainers.image.description="Regression gate for RAG systems on pull requests" \
      org.opencontainers.image.source="https://github.com/rag-gate/rag-gate" \
      org.opencontainers.image.licenses="Apache-2.0"

# RAG_GATE_PIPELINE_*: rag-gate (root, which holds the tokens) runs the pipeline, its workers and the setup command
# as this unprivileged user, with this Python (README, "Security").
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    RAGAS_DO_NOT_TRACK=true \
    RAG_GATE_PIPELINE_USER=rag-gate-pipeline \
    RAG_GATE_PIPELINE_PYTHON=/opt/rag-gate-pipeline/bin/python \
    PATH=/opt/rag-gate/bin:$PATH

# git: `rag-gate pr` checks the merge base out as a git worktree (the Debian base made in CI already has it).
ARG GIT_VERSION=1:2.39.5-0+deb12u3
RUN if ! command -v git >/dev/null; then \
        apt-get update \
        && apt-get install -y --no-install-recommends "git=${GIT_VERSION}" \
        && apt-get clean \
        && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb; \
    fi

COPY --from=build /opt/rag-gate /opt/rag-gate

# The pipeline user and its virtual environment, which sees the image's packages after its own; with a setup
# command each side gets a new venv made from it (and seeing its packages), which the command installs into;
# rag-gate's environment stays root's and read-only to it.
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/rag-gate-pipeline \
        --shell /usr/sbin/nologin rag-gate-pipeline \
    && python3 -m venv /opt/rag-gate-pipeline \
    && site="$(/opt/rag-gate-pipeline/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
    && /opt/rag-gate/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))' > "$site/rag-gate-image.pth" \
    && chown -R rag-gate-pipeline:rag-gate-pipeline /opt/rag-gate-pipeline \
    && su rag-gate-pipeline -s /bin/sh -c '/opt/rag-gate-pipeline/bin/python -c "import gate._worker, numpy"' \
    && rag-gate --version

ENTRYPOINT ["/opt/rag-gate/bin/rag-gate"]
