# The rag-gate GitHub Action image (runs.using: docker). Build: docker build -t rag-gate .
# CI builds it on a locally made base: --build-arg BASE_IMAGE=localhost/debian-py:bookworm
ARG BASE_IMAGE=python:3.12-slim
FROM ${BASE_IMAGE}

LABEL org.opencontainers.image.title="rag-gate" \
      org.opencontainers.image.description="Regression gate for RAG systems on pull requests" \
      org.opencontainers.image.source="https://github.com/rag-gate/rag-gate" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    RAGAS_DO_NOT_TRACK=true \
    PATH=/opt/rag-gate/bin:$PATH

# git: `rag-gate pr` checks the merge base out as a git worktree.
# hadolint ignore=DL3008
RUN if ! command -v git >/dev/null; then \
        apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*; \
    fi

# PIP_CERT / PIP_INDEX_URL: only for builds behind a TLS-intercepting proxy or a mirror (not stored in the image).
ARG PIP_CERT
ARG PIP_INDEX_URL

# Pinned dependencies first, so that changing the code does not re-install them (layer caching).
COPY requirements-action.txt /opt/rag-gate-src/
RUN python3 -m venv /opt/rag-gate \
    && pip install --no-cache-dir -r /opt/rag-gate-src/requirements-action.txt

COPY pyproject.toml README.md /opt/rag-gate-src/
COPY gate /opt/rag-gate-src/gate
# The pins above already satisfy the package; the constraint keeps any dependency added later pinned too.
RUN pip install --no-cache-dir --constraint /opt/rag-gate-src/requirements-action.txt /opt/rag-gate-src \
    && pip check && rag-gate --version

ENTRYPOINT ["/opt/rag-gate/bin/rag-gate"]
