# One image for every role of uq-eval: the API (`uqeval api`, the default command) and the
# Celery workers (`uqeval worker`). The GPU worker's image: `--build-arg EXTRAS=plots,gpu
# --build-arg EXTRA_PACKAGES='cupy-cuda12x[ctk]>=14'` (docker-compose.yml does this).
#
#   docker build -t uq-eval .
#   docker run -e REDIS_URL=redis://... -p 8000:8000 uq-eval             # API
#   docker run -e REDIS_URL=redis://... uq-eval uqeval worker --queues cpu

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ARG EXTRAS="plots"
# Extra pip requirements, e.g. "cupy-cuda12x[ctk]>=14" for a GPU image: CuPy's [ctk] extra
# brings the CUDA runtime libraries from PyPI; the NVIDIA container runtime mounts the driver.
ARG EXTRA_PACKAGES=""
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# Dependencies first (cached while only the source changes).
COPY pyproject.toml README.md ./
RUN mkdir -p uqcore service worker \
    && touch uqcore/__init__.py service/__init__.py worker/__init__.py \
    && pip install ".${EXTRAS:+[$EXTRAS]}" $EXTRA_PACKAGES \
    && pip uninstall -y uq-eval
COPY uqcore ./uqcore
COPY service ./service
COPY worker ./worker
COPY uqeval ./uqeval
RUN pip install --no-deps ".${EXTRAS:+[$EXTRAS]}"

FROM ${PYTHON_IMAGE} AS runtime
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    UQEVAL_HOST=0.0.0.0 \
    UQEVAL_PORT=8000 \
    UQEVAL_DATA_DIR=/home/uqeval/data
COPY --from=build /opt/venv /opt/venv
RUN groupadd --system --gid 10001 uqeval \
    && useradd --system --uid 10001 --gid uqeval --create-home --home-dir /home/uqeval uqeval
USER uqeval:uqeval
WORKDIR /home/uqeval
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
CMD ["uqeval", "api"]
