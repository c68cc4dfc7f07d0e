# The Highwater image: a broker (`highwater broker ...`) and the `highwater` CLI.
# Built by docker-compose.yml; see docs/operations.md ("Docker Compose").
#
# Build arguments (all optional):
#   BASE_IMAGE  the Python 3.11 image to build on (default python:3.11-slim); any image with
#               `python` and `pip` on PATH and `useradd` works.
#   PIP_CERT    a CA bundle for pip inside the build (e.g. behind a TLS-inspecting proxy); the
#               file must be mounted into the build, e.g.
#               podman build -v /etc/ssl/certs/ca-certificates.crt:/host-ca.crt:ro \
#                   --build-arg PIP_CERT=/host-ca.crt .
ARG BASE_IMAGE=python:3.11-slim

# --- build: install the package and its pinned dependencies into /install --------------------
FROM ${BASE_IMAGE} AS build
ARG PIP_CERT
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
# Only what the package needs (tests, docs and any venv stay out: see .dockerignore), with the
# exact versions CI tests (constraints.txt).
COPY pyproject.toml constraints.txt README.md ./
COPY protocol ./protocol
COPY broker ./broker
COPY controller ./controller
COPY client ./client
# --root: every file lands where a plain `pip install` would put it, but under /install, so the
# final stage copies the installed package and nothing else (no sources, no build tools).
RUN pip install --root /install --no-warn-script-location -c constraints.txt .

# --- the image --------------------------------------------------------------------------------
FROM ${BASE_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /install/ /
RUN useradd --uid 1000 --user-group --no-create-home --home-dir /var/lib/highwater \
        --shell /usr/sbin/nologin highwater \
    && mkdir -p /var/lib/highwater/data \
    && chown -R highwater:highwater /var/lib/highwater

# A named volume mounted here starts with this directory's owner, so the broker can write it.
VOLUME ["/var/lib/highwater/data"]
USER highwater
WORKDIR /var/lib/highwater
EXPOSE 9092

# Healthy = this broker answers on its listener and the cluster metadata it serves lists it as a
# live broker at the address it advertises (see broker/healthcheck.py). The broker's settings are
# read from its own command line, so one check fits every broker.
HEALTHCHECK --interval=10s --timeout=10s --start-period=60s --retries=3 \
    CMD ["python", "-m", "broker.healthcheck"]

# The broker stops cleanly on SIGTERM (controlled shutdown: its leaderships move first), well
# inside compose's stop_grace_period; logs are JSON lines on stdout (stdout is not a terminal).
STOPSIGNAL SIGTERM
ENTRYPOINT ["highwater"]
CMD ["--help"]
