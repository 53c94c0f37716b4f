# gnncore developer and user entry points. `make demo` and `make test` work on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
DATA_ROOT ?= $(CURDIR)/data
export GNNCORE_DATA_ROOT := $(DATA_ROOT)
# Storage profile (README.md "Production storage (PostgreSQL)"). sqlite, the default: Dagster's
# storage under .dagster_home, MLflow's in <data root>/mlflow/mlflow.db. postgres: Dagster's
# run, event-log and schedule storage and MLflow's backend store in PostgreSQL at
# GNNCORE_PG_* (defaults below: the server `make postgres` starts), artifacts still on disk
# under the data root (GNNCORE_MLFLOW_ARTIFACTS: any path or URI). Each profile has its own
# DAGSTER_HOME, so switching profiles switches instances.
PROFILE ?= sqlite
export GNNCORE_PG_HOST ?= 127.0.0.1
export GNNCORE_PG_PORT ?= 5432
export GNNCORE_PG_USER ?= gnncore
export GNNCORE_PG_PASSWORD ?= gnncore
export GNNCORE_PG_DB ?= dagster
export GNNCORE_PG_MLFLOW_DB ?= mlflow
ifeq ($(PROFILE),sqlite)
export DAGSTER_HOME := $(CURDIR)/.dagster_home
DAGSTER_YAML := pipelines/dagster.yaml
else ifeq ($(PROFILE),postgres)
export DAGSTER_HOME := $(CURDIR)/.dagster_home/postgres
DAGSTER_YAML := pipelines/dagster.postgres.yaml
export GNNCORE_MLFLOW_URI ?= postgresql+psycopg2://$(GNNCORE_PG_USER):$(GNNCORE_PG_PASSWORD)@$(GNNCORE_PG_HOST):$(GNNCORE_PG_PORT)/$(GNNCORE_PG_MLFLOW_DB)
else
$(error PROFILE=$(PROFILE): use sqlite (the default) or postgres)
endif
MLFLOW_ARTIFACTS := $(or $(GNNCORE_MLFLOW_ARTIFACTS),$(DATA_ROOT)/mlflow/artifacts)
# Reinstall when C++ sources change or when Python files are added (directory mtimes):
# the editable install maps the package files that existed when it was built.
CSRC := $(shell find gnncore/csrc -type f 2>/dev/null) $(shell find gnncore -type d -not -name __pycache__) CMakeLists.txt pyproject.toml
HOST ?= 127.0.0.1
MLFLOW_PORT ?= 5000
# Run links in asset metadata open the MLflow UI that `make mlflow-ui` starts.
export GNNCORE_MLFLOW_UI_URL ?= http://$(HOST):$(MLFLOW_PORT)

.PHONY: install sysdeps demo lint test ui mlflow-ui postgres postgres-stop clean bench-ingest

$(VENV)/.installed: $(CSRC)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# The CPU wheel of torch lies on disk; an unpinned torch would pull CUDA builds.
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet scikit-build-core nanobind
	$(PIP) install --quiet --no-build-isolation -e ".[test,postgres]"
	touch $@

install: $(VENV)/.installed

$(DAGSTER_HOME)/dagster.yaml: $(DAGSTER_YAML)
	mkdir -p $(DAGSTER_HOME)
	cp $(DAGSTER_YAML) $@

demo: install $(DAGSTER_HOME)/dagster.yaml
	$(PY) -m pipelines.demo

LINTED := gnncore gnncore_bench assets resources pipelines tests benchmarks

lint: install
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports    # the floors of gnncore: .importlinter

# Debian packages the tests drive for real: Chromium and its driver (browser tests of the
# Dagster and MLflow UIs) and the PostgreSQL server (the postgres storage profile).
# Installed only when missing and only as root with apt-get; otherwise those tests skip
# and say why.
sysdeps:
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium chromium-driver"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "sysdeps: installing$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	else \
		echo "sysdeps: missing$$missing (apt-get install them as root); the tests that need them skip"; \
	fi

# The whole suite, `slow` included, on 2 workers (pytest-xdist): each test file stays on one
# worker (module fixtures, browser tests in file order); line coverage of the packages the
# pytest processes import, and of the Python subprocesses (torchrun ranks, bench children) of
# the files in tests/conftest.py's SUBPROCESS_COVERAGE_FILES. docs/TESTING.md.
PYTEST_WORKERS ?= 2
PYTEST_COV := --cov=gnncore --cov=gnncore_bench --cov=assets --cov=resources --cov=pipelines

test: lint sysdeps
	$(PY) -m pytest -q -m 'slow or not slow' -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		--durations=25 $(PYTEST_COV) --cov-report=term

ui: install $(DAGSTER_HOME)/dagster.yaml
	$(VENV)/bin/dagster dev -w workspace.yaml -h $(HOST) -p 3000

# The store the pipeline writes: $$GNNCORE_MLFLOW_URI when set (PROFILE=postgres sets it),
# else the sqlite file under the data root. It travels in the environment, so a password
# shows neither in the echoed command nor in ps.
mlflow-ui: install
	mkdir -p $(DATA_ROOT)/mlflow
	MLFLOW_BACKEND_STORE_URI="$${GNNCORE_MLFLOW_URI:-sqlite:///$(DATA_ROOT)/mlflow/mlflow.db}" \
		$(VENV)/bin/mlflow ui --default-artifact-root '$(MLFLOW_ARTIFACTS)' --host $(HOST) --port $(MLFLOW_PORT)

# A throwaway PostgreSQL for PROFILE=postgres: initdb in $(DATA_ROOT)/postgres, listening on
# 127.0.0.1:$(GNNCORE_PG_PORT) only, databases $(GNNCORE_PG_DB) and $(GNNCORE_PG_MLFLOW_DB);
# prints the variables the profile reads. `make postgres-stop` stops it.
postgres: install
	$(PY) -m resources.postgres_server start $(DATA_ROOT)/postgres

postgres-stop: install
	$(PY) -m resources.postgres_server stop $(DATA_ROOT)/postgres

clean:
	rm -rf build $(VENV) .dagster_home data
