# agent-runner. `make test` is the test command (CI runs it via .ci/run).

CARGO ?= cargo
PREFIX ?= /usr/local

.PHONY: build install test test-env test-cluster test-cluster-check test-cluster-down lint sandbox-image demo demo-pipeline demo-eval bench clean

# `make test-env` also brings up the Kubernetes test cluster (`test-cluster`; the
# first time it builds the cluster from Debian's source, 4–9 min); K8S=0 leaves it
# out, and its tests are then said as not run.
K8S ?= 1

build:
	$(CARGO) build --release --locked

install: build
	install -D -m 755 target/release/agent-runner $(DESTDIR)$(PREFIX)/bin/agent-runner

# Docker daemon + test worker images (installs and starts dockerd as root on Debian),
# the real worker image for the real-codex tests (rebuilt only when its recipe changed),
# the emulated remote Docker hosts' image (SPEC §22),
# Chromium + chromedriver for the web view's browser tests, shellcheck for lint,
# cargo-nextest for the suite, and
# the OpenAI and Anthropic Python SDKs the Meta API tests check requests against,
# podman and catatonit with the test worker image in its store (the podman tests),
# gVisor's runsc registered with the daemon (a reload, no restart), the MCP test
# image (the worker image with python3 and the `mcp` SDK), and (unless K8S=0) the
# Kubernetes test cluster.
test-env:
	bash testdata/setup-shellcheck.sh
	CARGO="$(CARGO)" bash testdata/setup-nextest.sh
	bash testdata/setup-docker.sh
	bash testdata/setup-sandbox-image.sh
	bash testdata/setup-remote-hosts.sh
	bash testdata/setup-browser.sh
	bash testdata/setup-meta-sdk.sh
	bash testdata/setup-podman.sh
	bash testdata/setup-runsc.sh
	bash testdata/setup-mcp.sh
	if [ "$(K8S)" = 1 ]; then bash testdata/setup-kubernetes.sh; fi

# The Kubernetes test cluster (SPEC §25): a node on https://127.0.0.60:6443, built
# from Debian's kubernetes source the first time (minutes; the binaries are cached in
# /var/cache/agent-runner/kubernetes/), seconds when it is up; for the tests,
# /var/lib/agent-runner-k8s/cluster.env. Needs what test-env sets up first.
test-cluster:
	bash testdata/setup-kubernetes.sh

# What the backend needs of the cluster (exec, attach, cp, labels, deadlines,
# loopback-only Pods), with its figures.
test-cluster-check: test-cluster
	bash testdata/check-kubernetes.sh

# Removes the node (its container, volume and network namespace); keeps the binaries.
test-cluster-down:
	bash testdata/setup-kubernetes.sh --down

# The shell scripts that run in containers live beside their modules (include_str!).
SCRIPTS = $(shell find crates/*/src -name '*.sh')

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --locked --all-targets -- -D warnings
	@command -v shellcheck >/dev/null || { echo "make lint: shellcheck is missing; \`make test-env\` installs it (Debian: apt-get install shellcheck)" >&2; exit 1; }
	shellcheck $(SCRIPTS)

# Tests that need root, Chromium or the sandbox image run where those are (all of
# them under CI=true); the last lines say how many were not run and why.
test: test-env lint
	K8S="$(K8S)" CARGO="$(CARGO)" bash testdata/test.sh

# A whole task, offline: scripted Meta, the test worker image, a throw-away repo.
demo: build
	bash testdata/demo.sh

# The pipeline, offline: workspace, task, scripted Task Builder and Meta, orchestrator.
demo-pipeline: build
	bash testdata/demo-pipeline.sh

# An evaluation, offline: the demo suite validated, run, and run again (docs/eval.md).
demo-eval: build
	bash testdata/demo-eval.sh

# Performance figures (docker daemon needed; not part of `make test`).
bench:
	bash bench/run.sh

# The real worker image agent-runner-codex:latest (Debian + @openai/codex), with or
# without an image registry; see sandbox/build.sh for its settings. Then the tools
# volume (the pinned agents for any image; docs/worker-image.md).
# The tools volume is filled by the release binary `build` makes (a debug build
# just for this would compile everything a second time).
sandbox-image: build
	bash sandbox/build.sh
	target/release/agent-runner tools install

clean:
	$(CARGO) clean
