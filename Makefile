# Two commands: `make run` and `make test`. Everything else is what they need.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
JARS := .jars/streams
KAFKA_JARS := .jars/kafka
SPARK_JARS := .jars/spark
STAMP := $(VENV)/.installed
# mypy gets its own virtualenv (mypy 2.x needs a newer pathspec than the pinned dbt accepts);
# it checks every package against the project venv's packages through --python-executable.
LINT_VENV := .venv-lint
MYPY_VERSION := 2.4.1
# import-linter checks the layers of pyproject.toml's [tool.importlinter] contracts
IMPORT_LINTER_VERSION := 2.17
# kustomize renders the Kubernetes manifests (platform/kubernetes) and kubeconform checks
# them against the Kubernetes schemas (bundled by the pinned kubernetes-validate package, see
# tests/platform/test_kubernetes.py): both built from the Go module proxy into .tools/bin.
TOOLS_BIN := .tools/bin
KUSTOMIZE_VERSION := v5.8.1
KUBECONFORM_VERSION := v0.8.0
K8S_TOOLS := $(TOOLS_BIN)/.kustomize-$(KUSTOMIZE_VERSION) $(TOOLS_BIN)/.kubeconform-$(KUBECONFORM_VERSION)
# The schema registry streaming.testing.LocalSchemaRegistry starts (rivven-schema, Confluent's
# REST API), built with cargo from crates.io once into a cache outside the checkout (like
# WHEELS below: a fresh clone copies it instead of compiling it again) and copied to .tools/bin.
# A debug build: 2.5 CPU minutes to compile where a release build takes 6.5, and a registry
# serving tests and a local platform has no load that needs the optimizer.
RIVVEN_SCHEMA_VERSION := 0.0.22
SCHEMA_REGISTRY_CACHE ?= $(HOME)/.cache/streamplatform/rivven-schema-$(RIVVEN_SCHEMA_VERSION)-debug
SCHEMA_REGISTRY := $(TOOLS_BIN)/.rivven-schema-$(RIVVEN_SCHEMA_VERSION)
CARGO ?= $(or $(shell command -v cargo 2>/dev/null),$(HOME)/.cargo/bin/cargo)
GO ?= $(or $(shell command -v go 2>/dev/null),/usr/local/go/bin/go)

.PHONY: setup test test-fast test-chaos lint format run bench docs clean

# what `make run` needs (the virtualenv, the broker's and Spark's jars, the schema registry);
# `make test` also needs Kafka Streams' reference jars and the Kubernetes tools (built with Go)
RUN_SETUP := $(STAMP) $(KAFKA_JARS)/.copied $(SPARK_JARS)/.copied $(SCHEMA_REGISTRY)
setup: $(RUN_SETUP) $(JARS)/.copied $(K8S_TOOLS)

# uv installs the same versions pip resolves, in about half the time (59 s against 94 s
# on a fresh virtualenv here). pyspark is published as a source distribution only, which the
# package index serves without a cache validator: uv would download and build it again on
# every fresh virtualenv (30 of the 48 s). It is built once into WHEELS, a cache outside the
# checkout like uv's own, where uv finds it (6 s in all).
WHEELS ?= $(HOME)/.cache/streamplatform/wheels
PYSPARK_PIN := $(shell grep -o '"pyspark==[^"]*"' pyproject.toml | tr -d '"')
$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "Python 3.11+ is required ($(PYTHON) not found)"; exit 1; }
	test -x $(PIP) || $(PYTHON) -m venv --clear $(VENV)
	$(PIP) install -q --upgrade pip uv
	ls $(WHEELS)/$(subst ==,-,$(PYSPARK_PIN))-*.whl >/dev/null 2>&1 || $(PIP) wheel -q --no-deps '$(PYSPARK_PIN)' -w $(WHEELS)
	$(VENV)/bin/uv pip install -q --python $(PY) --find-links $(WHEELS) -e '.[dev,platform]'
	touch $(STAMP)

# Kafka Streams' reference jars for the differential conformance harness.
$(JARS)/.copied: tests/conformance/java/pom.xml
	@command -v mvn >/dev/null || { echo "Maven is required to fetch the Kafka jars"; exit 1; }
	@command -v java >/dev/null || { echo "Java 17+ is required"; exit 1; }
	mvn -q -B -f tests/conformance/java/pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(JARS)
	touch $@

# The Apache Kafka broker (KRaft) that streaming.testing.LocalKafkaCluster starts for the
# integration tests and `make run`. Emptied first so a version change leaves no stale jars.
$(KAFKA_JARS)/.copied: platform/kafka/pom.xml
	@command -v mvn >/dev/null || { echo "Maven is required to fetch the Kafka jars"; exit 1; }
	@command -v java >/dev/null || { echo "Java 17+ is required"; exit 1; }
	rm -rf $(KAFKA_JARS)
	mvn -q -B -f platform/kafka/pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(KAFKA_JARS)
	touch $@

# Spark's Kafka source (spark-sql-kafka-0-10) for the batch recompute, without the jars
# pyspark already ships; settings.xml routes Spark's unreachable GCS mirror to Central.
$(SPARK_JARS)/.copied: platform/spark/pom.xml
	@command -v mvn >/dev/null || { echo "Maven is required to fetch the Spark jars"; exit 1; }
	rm -rf $(SPARK_JARS)
	mvn -q -B -s platform/spark/settings.xml -f platform/spark/pom.xml dependency:copy-dependencies -DincludeScope=runtime -DexcludeArtifactIds=scala-library,slf4j-api,lz4-java,snappy-java,spark-tags_2.13,jsr305,scala-parallel-collections_2.13 -DoutputDirectory=$(CURDIR)/$(SPARK_JARS)
	touch $@

$(SCHEMA_REGISTRY):
	@test -x $(CARGO) || { echo "Rust's cargo is required to build the schema registry (rivven-schema)"; exit 1; }
	test -x $(SCHEMA_REGISTRY_CACHE)/bin/rivven-schema || $(CARGO) install --quiet --debug --locked rivven-schema --version $(RIVVEN_SCHEMA_VERSION) --root $(SCHEMA_REGISTRY_CACHE)
	mkdir -p $(TOOLS_BIN)
	cp $(SCHEMA_REGISTRY_CACHE)/bin/rivven-schema $(TOOLS_BIN)/rivven-schema
	touch $@

$(TOOLS_BIN)/.kustomize-$(KUSTOMIZE_VERSION):
	@test -x $(GO) || { echo "Go is required to build kustomize and kubeconform"; exit 1; }
	GOBIN=$(CURDIR)/$(TOOLS_BIN) $(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	touch $@

$(TOOLS_BIN)/.kubeconform-$(KUBECONFORM_VERSION):
	@test -x $(GO) || { echo "Go is required to build kustomize and kubeconform"; exit 1; }
	GOBIN=$(CURDIR)/$(TOOLS_BIN) $(GO) install github.com/yannh/kubeconform/cmd/kubeconform@$(KUBECONFORM_VERSION)
	touch $@

# The long fault-injection variants (marker `chaos`) only run under `make test-chaos`;
# `make test` runs the small variant of each chaos family, on three workers for two cores
# (most tests wait on brokers, Spark and Dagster; each module stays on one worker, the
# longest first), and prints the 40 slowest tests. Three workers ran it in 1,370 s, two in
# 1,469 s.
TEST_WORKERS ?= 3
test: setup
	$(PY) -m pytest -q -p no:cacheprovider --durations=40 -n $(TEST_WORKERS) --dist loadgroup -m "not chaos"

# Kafka's streams system tests ported to tests/chaos (broker bounces, EOS under rebalances
# and kill -9, standby replicas, broker outages) at full size, plus the soak test.
test-chaos: setup
	CHAOS_SCALE=full $(PY) -m pytest -q -p no:cacheprovider -m chaos tests/chaos

test-fast: setup
	$(PY) -m pytest -q -p no:cacheprovider tests/unit

$(LINT_VENV)/.installed: pyproject.toml $(STAMP)
	test -x $(LINT_VENV)/bin/python || $(PYTHON) -m venv --without-pip $(LINT_VENV)
	$(VENV)/bin/uv pip install -q --python $(LINT_VENV)/bin/python mypy==$(MYPY_VERSION) \
		import-linter==$(IMPORT_LINTER_VERSION)
	touch $@

lint: $(STAMP) $(LINT_VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(LINT_VENV)/bin/mypy --python-executable $(PY)
	$(LINT_VENV)/bin/lint-imports --no-cache

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# The docs site (mkdocs.yml, docs/) into site/; --strict fails on a broken link, a missing
# page or a docstring the API reference cannot read. The Performance page's charts are drawn
# again first from the benchmarks' results in docs/performance/data (bench.charts).
docs: $(STAMP)
	$(PY) -m bench.charts
	$(VENV)/bin/mkdocs build --strict --site-dir site

# The platform: local Kafka broker (unless KAFKA_BOOTSTRAP_SERVERS is set), topics, the
# generator, the stream applications and the Dagster UI on http://127.0.0.1:3000.
# Ctrl-C stops everything.
run: $(RUN_SETUP)
	$(PY) -m pipelines.run

# Quix Streams (the benchmark's peer) pins confluent-kafka < 2.13 and pydantic < 2.14, which
# clash with this project's pins: it gets its own virtualenv, used only by bench/wa_quix.py.
QUIX_VENV := .venv-quix
$(QUIX_VENV)/.installed: bench/requirements-quix.txt
	test -x $(QUIX_VENV)/bin/python || $(PYTHON) -m venv $(QUIX_VENV)
	$(QUIX_VENV)/bin/pip install -q --upgrade pip
	$(QUIX_VENV)/bin/pip install -q -r bench/requirements-quix.txt
	touch $@

# Engine hot path without a broker, then ours vs Quix Streams vs raw confluent-kafka vs Kafka
# Streams on one local broker at 200,000 records and at 1,000,000 under exactly-once (prints
# the `windowed-agg eos: ...` / `windowed-agg-2 eos: ...` lines), then the changelog restore
# rate, query latency under interactive-query load, then the Nexmark queries (ours beside
# Flink's published figures). The 200,000-record run and the Nexmark run write their results
# to docs/performance/data, and the Performance page's charts are drawn from them.
BENCH_DATA := docs/performance/data
bench: setup $(QUIX_VENV)/.installed
	$(PY) -m bench.engine
	$(PY) -m bench.windowed_agg --json $(BENCH_DATA)/windowed-agg.json
	$(PY) -m bench.windowed_agg --records 1000000 --modes eos
	$(PY) -m bench.restore
	$(PY) -m bench.query_load
	$(PY) -m bench.nexmark --json $(BENCH_DATA)/nexmark.json
	$(PY) -m bench.charts --data $(BENCH_DATA)

clean:
	rm -rf $(VENV) $(QUIX_VENV) $(LINT_VENV) .jars .pytest_cache .mypy_cache .tools site
