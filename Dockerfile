# The Highwater image: a broker (`highwater broker ...`) and the `highwater` CLI.
# Built by docker-compose.yml; see docs/operations.md ("Docker Compose").
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /opt/highwater

# Only what the package needs (tests, docs and the venv stay out: see .dockerignore), with the
# exact versions CI tests (constraints.txt).
COPY pyproject.toml constraints.txt README.md ./
COPY protocol ./protocol
COPY broker ./broker
COPY controller ./controller
COPY client ./client
RUN pip install -c constraints.txt . \
    && useradd --system --uid 1000 --home-dir /var/lib/highwater highwater \
    && mkdir -p /var/lib/highwater/data \
    && chown -R highwater /var/lib/highwater

# A named volume mounted here starts with this directory's owner, so the broker can write it.
VOLUME ["/var/lib/highwater/data"]
USER highwater
EXPOSE 9092

ENTRYPOINT ["highwater"]
CMD ["--help"]
