# Highwater developer commands. `make up` and `make test` each do all their own set-up.
# `make up` installs what a cluster and the CLI need; `make test` (and the other developer
# targets) also the dev and spark extras. Ports: make up PORT=19092 ZK_PORT=12181 [ARGS=...].
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-all
BENCH_STAMP := $(VENV)/.installed-bench
BASE_STAMP := $(VENV)/.installed-base
COMPOSE_STAMP := $(VENV)/.installed-compose
ZK_JAR := /usr/share/java/zookeeper.jar
PORT ?=
ZK_PORT ?=
ARGS ?=
DEV_UP_ARGS := $(if $(PORT),--base-port $(PORT)) $(if $(ZK_PORT),--zk-port $(ZK_PORT)) $(ARGS)
# setuptools' notices on every install of this project (pyproject's ext-modules table is
# "experimental"; the editable-install banner), silenced by their exact text: any other warning,
# and every error, still shows.
QUIET_SETUPTOOLS := PYTHONWARNINGS='ignore:`[tool.setuptools.ext-modules]`,ignore:Editable installation'
# Every apt install below (in a recipe that has set SUDO) adds what is missing and upgrades
# nothing it does not have to: --no-upgrade leaves a named package that is already installed as
# it is, and Upgrade-By-Source-Package=false stops apt from upgrading installed packages only
# because a new one comes from the same source (podman's libsubid4 would upgrade login and
# passwd). A dependency that needs a newer version still gets it. README.md lists what each
# target installs.
APT_INSTALL = DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-upgrade -o APT::Get::Upgrade-By-Source-Package=false

.PHONY: up down status test lint typecheck imports unit integration sim chaos soak fuzz bench bench-replication bench-latency bench-compare bench-requests bench-metrics bench-security bench-spark bench-spark-kafka bench-groups bench-peers bench-curves peer-servers kafka-jars kcat zookeeper openssl nftables faketime containers browser compose-up compose-status compose-down venv base-venv clean

# The cluster and the CLI only: no Spark, no test tools.
$(BASE_STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python >= 3.11 is required"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(QUIET_SETUPTOOLS) $(BIN)/pip install -q -c constraints.txt -e .
	touch $(BASE_STAMP)

# Everything: the dev and spark extras too.
$(STAMP): $(BASE_STAMP)
	$(QUIET_SETUPTOOLS) $(BIN)/pip install -q -c constraints.txt -e '.[dev,spark]'
	touch $(STAMP)

# The peer benchmark's clients (redis, hiredis, nats-py): only `make bench-peers` needs them.
$(BENCH_STAMP): $(STAMP)
	$(QUIET_SETUPTOOLS) $(BIN)/pip install -q -c constraints.txt -e '.[dev,spark,bench]'
	touch $(BENCH_STAMP)

# podman-compose (and its two dependencies) for `make compose-up` without the dev extra.
$(COMPOSE_STAMP): $(BASE_STAMP)
	$(BIN)/pip install -q -c constraints.txt podman-compose
	touch $(COMPOSE_STAMP)

base-venv: $(BASE_STAMP)

venv: $(STAMP)

# ZooKeeper comes from Debian's package (which brings a Java runtime, also what Spark needs);
# installed only where missing.
zookeeper:
	@if [ ! -f $(ZK_JAR) ] || ! command -v java >/dev/null 2>&1; then \
		echo "installing ZooKeeper and a Java runtime from apt"; \
		SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
		$$SUDO apt-get update -q && $(APT_INSTALL) --no-install-recommends zookeeper default-jre-headless; \
	fi

# `highwater dev up --secure` makes its CA and certificates with the openssl command (tests too);
# from apt, installed only where missing.
openssl:
	@if ! command -v openssl >/dev/null 2>&1; then \
		echo "installing openssl from apt"; \
		SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
		$$SUDO apt-get update -q && $(APT_INSTALL) openssl; \
	fi

# The asymmetric partition tests (tests/integration/test_asymmetric_partitions.py) cut single
# paths with nftables rules inside the brokers' network namespaces; from apt, installed only
# where missing.
nftables:
	@if ! command -v nft >/dev/null 2>&1; then \
		echo "installing nftables from apt"; \
		SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
		$$SUDO apt-get update -q && $(APT_INSTALL) nftables; \
	fi

# The clock-fault test (tests/integration/test_clock_faults.py) preloads libfaketime into a
# broker to step its wall clock; from apt, installed only where missing.
faketime:
	@if ! dpkg -s faketime >/dev/null 2>&1; then \
		echo "installing faketime from apt"; \
		SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
		$$SUDO apt-get update -q && $(APT_INSTALL) faketime; \
	fi

# The Kafka listener's tests (tests/integration/test_kafka_clients.py) drive Debian's kcat
# (librdkafka's command-line client); installed only where missing.
kcat:
	@if ! command -v kcat >/dev/null 2>&1; then \
		echo "installing kcat from apt"; \
		SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
		$$SUDO apt-get update -q && $(APT_INSTALL) kcat; \
	fi

# The peer benchmark's servers (tests/benchmarks/peers): Debian's redis-server and nats-server,
# installed only where missing. Neither is started as a service: the benchmark starts its own.
peer-servers:
	@if ! command -v redis-server >/dev/null 2>&1 || ! PATH="$$PATH:/usr/sbin" command -v nats-server >/dev/null 2>&1; then \
		echo "installing redis-server and nats-server from apt"; \
		SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
		$$SUDO apt-get update -q && $(APT_INSTALL) redis-server nats-server; \
	fi

# Apache Kafka 3.9's broker and tools jars (the peer benchmark, its setup test, the Java tools
# against the Kafka listener: tests/benchmarks/kafka/pom.xml) into ~/.cache/highwater/kafka-3.9
# (105 jars), and Spark's Kafka connector (spark-kafka-pom.xml) into ~/.cache/highwater/spark-kafka
# (7 jars): about a minute the first time on a machine with an empty ~/.m2, seconds from a warm
# one, and after that a check of two stamp files. Maven from apt where missing.
kafka-jars: venv
	@if ! command -v mvn >/dev/null 2>&1; then \
		echo "installing maven from apt"; \
		SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
		$$SUDO apt-get update -q && $(APT_INSTALL) --no-install-recommends maven; \
	fi
	$(BIN)/python -m tests.benchmarks.kafka.jars

# The compose test's container engine: podman with runc (no Docker daemon needed) and debootstrap,
# from apt, installed only where missing. Without recommends (buildah, criu, slirp4netns, uidmap,
# fuse-overlayfs: the buildah CLI, checkpoints, rootless), but with netavark and aardvark-dns (the
# compose network and its names), iptables (netavark's published ports and NAT) and catatonit
# (podman's init). Then the local stand-ins for the compose file's base images
# (tests/compose/images.py: about two minutes the first time on a machine, kept in podman's
# storage after that). Where the engine cannot run, this says so and the test skips.
containers: venv
	@if ! command -v podman >/dev/null 2>&1 || [ ! -x /usr/sbin/runc ] || [ ! -x /usr/sbin/debootstrap ]; then \
		echo "installing podman, runc, debootstrap and podman's network stack from apt"; \
		SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
		$$SUDO apt-get update -q && $(APT_INSTALL) --no-install-recommends podman runc debootstrap netavark aardvark-dns iptables catatonit; \
	fi
	$(BIN)/python -m tests.compose.images --if-engine-works

# The status page's browser test (tests/integration/test_status_page.py) drives Debian's
# headless Chromium through its chromedriver; installed only where missing.
browser:
	@if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then \
		echo "installing chromium and chromium-driver from apt"; \
		SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
		$$SUDO apt-get update -q && $(APT_INSTALL) --no-install-recommends chromium chromium-driver; \
	fi

# docker-compose.yml as a user runs it (tests/compose/run.py; docs/operations.md, "Docker
# Compose"): Docker Compose where a Docker daemon answers, else podman-compose with the compose
# test's engine settings, local base images and CA bundle. Installs nothing from apt (`make
# containers` does). compose-up waits until every health check passes and prints the addresses;
# compose-status runs the health checks now (podman without systemd runs none by itself);
# compose-down keeps the data (ARGS=--volumes deletes it).
compose-up: $(COMPOSE_STAMP)
	$(BIN)/python -m tests.compose.run up

compose-status: $(COMPOSE_STAMP)
	$(BIN)/python -m tests.compose.run status

compose-down: $(COMPOSE_STAMP)
	$(BIN)/python -m tests.compose.run down $(ARGS)

up: base-venv zookeeper openssl
	$(BIN)/highwater dev up $(DEV_UP_ARGS)

down: base-venv
	$(BIN)/highwater dev down

status: base-venv
	$(BIN)/highwater dev status

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy

imports: venv
	$(BIN)/lint-imports

unit: venv
	$(BIN)/pytest tests/unit

# The integration tests start real clusters (ZooKeeper, brokers, Spark, containers), each on
# ports it asks the OS for (the compose file's host ports are the one fixed set, and one test
# uses them): two test files at a time, each file's tests in one worker (they share
# module-scoped clusters), fit the 2-core machine, mostly waiting on timeouts and processes.
# On 2026-11-28: 935 s against about 1,700 s one at a time. INTEGRATION_WORKERS=0: one at a time.
INTEGRATION_WORKERS ?= 2
INTEGRATION_ARGS = $(if $(filter 0,$(INTEGRATION_WORKERS)),,-n $(INTEGRATION_WORKERS) --dist loadfile)

integration: venv zookeeper openssl nftables faketime containers browser kcat kafka-jars
	$(BIN)/pytest $(INTEGRATION_ARGS) tests/integration

# Unit tests and the simulation are CPU-bound and share nothing: one worker per core.
test: venv zookeeper openssl nftables faketime containers browser kcat kafka-jars lint typecheck imports
	$(BIN)/pytest -n auto tests/unit tests/simulation tests/fuzz
	$(BIN)/pytest $(INTEGRATION_ARGS) tests/integration

bench: venv zookeeper
	$(BIN)/python -m tests.benchmarks.run
	$(BIN)/python -m tests.benchmarks.compaction

sim: venv
	$(BIN)/pytest -q -n auto tests/simulation

# One chaos run by hand, e.g. make chaos ARGS="--seed 7 --duration-s 300 --nemeses kill,lose-acks"
chaos: venv zookeeper
	$(BIN)/python -m tests.chaos.run $(ARGS)

# The hour-long soak: overlapping faults, every nemesis, periodic checks (docs/reliability.md
# "Soak"); as root add ARGS="--netns" for the partition nemesis, e.g. ARGS="--netns --seed 7"
soak: venv zookeeper
	$(BIN)/python -m tests.chaos.run --soak $(ARGS)

# Every request decoder and handler, a million inputs in all (about an hour on 2 cores), e.g.
# make fuzz ARGS="--inputs 100000 --api produce"; `make test` runs a short pass of the same.
fuzz: venv
	$(BIN)/python -m tests.fuzz.run --inputs 1000000 --jobs 2 $(ARGS)
	$(BIN)/python -m tests.fuzz.kafka_wire --inputs 1000000

bench-replication: venv zookeeper
	$(BIN)/python -m tests.benchmarks.replication

# Latency and brokers' CPU at 10,000 records/s, fetch sessions on vs off (docs/performance.md).
bench-latency: venv zookeeper
	$(BIN)/python -m tests.benchmarks.fetch_cost
	$(BIN)/python -m tests.benchmarks.latency $(ARGS)

# Before and after: perf produce/consume/end-to-end on REF's build and this tree, alternating.
bench-compare: venv zookeeper
	$(BIN)/python -m tests.benchmarks.compare $(ARGS)

# Broker CPU per request (a small Produce, a replica Fetch of one batch, a long-poll Fetch);
# ARGS="--profile DIR" adds py-spy profiles (docs/performance.md).
bench-requests: venv zookeeper
	$(BIN)/python -m tests.benchmarks.requests $(ARGS)

bench-security: venv zookeeper openssl
	$(BIN)/python -m tests.benchmarks.security

# Produce throughput and brokers' CPU with the metrics listener on vs off, alternating.
bench-metrics: venv zookeeper
	$(BIN)/python -m tests.benchmarks.metrics_cost

bench-spark: venv zookeeper
	$(BIN)/python -m tests.benchmarks.spark

# format("highwater") against Spark's own format("kafka") reading Apache Kafka 3.9, the same
# records, one system at a time (docs/spark.md). make bench-spark-kafka ARGS="--runs 2".
bench-spark-kafka: venv zookeeper kafka-jars
	$(BIN)/python -m tests.benchmarks.spark_kafka_anchor $(ARGS)

bench-groups: venv zookeeper
	$(BIN)/python -m tests.benchmarks.groups

# Highwater (its own clients, then confluent-kafka's on its Kafka listener) beside Apache Kafka
# 3.9, NATS JetStream and Redis Streams, 3 nodes each, one system at a time, e.g.
# make bench-peers ARGS="--runs 1" or ARGS="--quick --json" or ARGS="--systems highwater,kafka".
bench-peers: venv zookeeper peer-servers kafka-jars $(BENCH_STAMP)
	$(BIN)/python -m tests.benchmarks.peers $(ARGS)

# Cost as the work grows: idle CPU/RSS, controller failover and controlled shutdown vs 10 to
# 3,000 partitions (Kafka 3.9 beside Highwater where it fits), throughput vs partitions and
# producers, a broker's restart vs 1/5/20 GiB on its disk (RF=3: 3x the largest must be free,
# else e.g. ARGS="--restart-gib 1 5"); tables on stdout, PNGs into docs/ (docs/performance.md,
# "Cost as the work grows").
bench-curves: venv zookeeper kafka-jars $(BENCH_STAMP)
	$(BIN)/python -m tests.benchmarks.curves $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
