# gnncore developer and user entry points. `make demo` and `make test` work on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
DATA_ROOT ?= $(CURDIR)/data
export GNNCORE_DATA_ROOT := $(DATA_ROOT)
export DAGSTER_HOME := $(CURDIR)/.dagster_home
# Reinstall when C++ sources change or when Python files are added (directory mtimes):
# the editable install maps the package files that existed when it was built.
CSRC := $(shell find gnncore/csrc -type f 2>/dev/null) $(shell find gnncore -type d -not -name __pycache__) CMakeLists.txt pyproject.toml
HOST ?= 127.0.0.1

.PHONY: install sysdeps demo lint test ui mlflow-ui clean bench-ingest

$(VENV)/.installed: $(CSRC)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# The CPU wheel of torch lies on disk; an unpinned torch would pull CUDA builds.
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet scikit-build-core nanobind
	$(PIP) install --quiet --no-build-isolation -e ".[test]"
	touch $@

install: $(VENV)/.installed

$(DAGSTER_HOME)/dagster.yaml: pipelines/dagster.yaml
	mkdir -p $(DAGSTER_HOME)
	cp pipelines/dagster.yaml $@

demo: install $(DAGSTER_HOME)/dagster.yaml
	$(PY) -m pipelines.demo

LINTED := gnncore assets resources pipelines tests benchmarks

lint: install
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/mypy

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

test: lint sysdeps
	$(PY) -m pytest -q

ui: install $(DAGSTER_HOME)/dagster.yaml
	$(VENV)/bin/dagster dev -w workspace.yaml -h $(HOST) -p 3000

mlflow-ui: install
	mkdir -p $(DATA_ROOT)/mlflow
	$(VENV)/bin/mlflow ui --backend-store-uri sqlite:///$(DATA_ROOT)/mlflow/mlflow.db \
		--default-artifact-root $(DATA_ROOT)/mlflow/artifacts --host $(HOST) --port 5000

clean:
	rm -rf build $(VENV) .dagster_home data
