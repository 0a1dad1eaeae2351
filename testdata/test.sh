#!/usr/bin/env bash
# `make test`: the whole suite under nextest (.config/nextest.toml: each test in a
# process of its own, several at once, test groups for what must not overlap), then
# what was not run and why. The emulated remote Docker hosts are started once for
# the run (crates/cli/tests/harness/mod.rs) and removed when it ends. A test that needs what
# a machine may lack (root, Chromium, the real worker image) is #[ignore = "needs …"]
# and checks it first itself (crates/cli/tests/support/prerequisite.rs). All tests
# run here, ignored ones too. Under CI (testdata/ci.sh) a missing prerequisite fails
# its test; elsewhere the test writes its name and why to the file named by
# AGENT_RUNNER_TEST_NOT_RUN and returns, and the last lines count those.
# TEST_WITHOUT="chromium root" counts those as missing, to see what a machine
# without them runs (ignored under CI).
#
# A new test file: crates/cli/tests/<fast|docker|image>/<name>.rs (what it needs
# beyond the binary: nothing, the daemon, the real worker image) and a `mod <name>;`
# line in that folder's mod.rs; nothing here.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=testdata/ci.sh
. testdata/ci.sh

CARGO=${CARGO:-cargo}
say() { printf 'make test: %s\n' "$*" >&2; }

"$CARGO" test --locked --no-run
# Every nextest call below builds the whole workspace, as this did: one of a
# single package (`-p`) unifies other features and builds every crate again.
# What is left out, as nextest filter expressions: said below, never silently.
# The micro-benchmarks (the lifeline's, the masking's) are ignored tests too, but
# figures, not checks (run by hand, see their files); harness:: is what this script
# runs first.
skip=('test(/(^|::)microbench::/)' 'test(/^harness::/)')
# Under gVisor (docker::runsc, the boundary tests again) one test sees what runsc
# does differently (docs/tools-and-runtimes.md, "Running under gVisor"): agent-runner's
# seccomp profile does not apply there, so a set-id chmod in the repository is not
# refused during a run (the sweep after each run still removes the file).
runsc_left_out=(no_file_in_the_repository_has_a_set_id_bit_while_the_worker_runs)
for name in "${runsc_left_out[@]}"; do skip+=("test(=docker::runsc::boundary::$name)"); done
if [ "${#runsc_left_out[@]}" -gt 0 ]; then
  say "left out under runsc (what gVisor does differently, docs/tools-and-runtimes.md): ${#runsc_left_out[@]} boundary test(s): ${runsc_left_out[*]}"
fi
# Where the daemon has no runsc (testdata/setup-runsc.sh says why), the tests under
# it are not run, and said; under CI they run and fail.
if ! in_ci && ! docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; then
  skip+=('test(/^docker::runsc::/)')
  say "the daemon has no runtime runsc: the boundary and egress tests under gVisor are NOT run (testdata/setup-runsc.sh)"
fi
# The Kubernetes test cluster (`make test-env` starts it unless K8S=0): its tests run
# when it was asked for (K8S=1, `make test`'s default), or, outside CI, when it is
# up here; else they are not run, and said. Asked for under CI, a cluster that is
# not there fails them.
if [ "${K8S:-1}" != 1 ] && { in_ci || [ ! -e /var/lib/agent-runner-k8s/cluster.env ]; }; then
  skip+=('test(/^k8s_cluster::/)')
  k8s_tests=$("$CARGO" nextest list --locked --run-ignored only -E 'test(/^k8s_cluster::/)' --message-format oneline 2>/dev/null | grep -c . || true)
  say "the Kubernetes test cluster was left out (K8S=0): its $k8s_tests tests are NOT run (make test-cluster)"
fi
# A cluster's probe verdicts kept by an earlier run (or by anything run by hand
# since) would speak for a node the tests have changed since (the seccomp test
# removes its profile): the suite starts with none kept.
rm -rf "${XDG_CACHE_HOME:-$HOME/.cache}/agent-runner/clusters"
filter=""
for expression in "${skip[@]}"; do filter+="${filter:+ | }$expression"; done
filter="not ($filter)"
needing=$("$CARGO" nextest list --locked --run-ignored only -E "$filter" --message-format oneline 2>/dev/null | grep -c . || true)

not_run=$(mktemp)
hosts_file=$(mktemp)
owner=$$
hosts_label=agent-runner-test.remote-host=$owner
# shellcheck disable=SC2317 # run by the EXIT trap
hosts_down() {
  rm -f "$not_run" "$hosts_file"
  docker ps -aq --filter "label=$hosts_label" | xargs -r docker rm -f >/dev/null 2>&1 || true
  docker volume ls -q --filter "label=$hosts_label" | xargs -r docker volume rm >/dev/null 2>&1 || true
  rm -rf "${TMPDIR:-/tmp}/agent-runner-shared-$owner"
  if [ -n "${registry_pid:-}" ]; then kill "$registry_pid" 2>/dev/null || true; fi
  if [ -n "${sdk_pid:-}" ]; then kill "$sdk_pid" 2>/dev/null || true; rm -f "$sdk_checks"; fi
}
trap hosts_down EXIT
if in_ci; then
  unset AGENT_RUNNER_TEST_NOT_RUN AGENT_RUNNER_TEST_WITHOUT
else
  export AGENT_RUNNER_TEST_NOT_RUN=$not_run AGENT_RUNNER_TEST_WITHOUT=${TEST_WITHOUT:-}
fi

started=$(date +%s)
# The remote hosts every test shares (SPEC §22), once for the run.
if ! AGENT_RUNNER_TEST_HOSTS_UP=$hosts_file AGENT_RUNNER_TEST_HOSTS_OWNER=$owner \
  "$CARGO" nextest run --locked --run-ignored only \
  -E 'test(=harness::remote_hosts_up)' --status-level none --final-status-level fail; then
  say "the emulated remote hosts did not start (testdata/setup-remote-hosts.sh): see above"
  exit 1
fi
export AGENT_RUNNER_TEST_HOSTS=$hosts_file
# The npm registry of the run: the pinned agents' tarballs (fetched once per
# machine from the real one by harness::npm_cache_fill, sha512-checked) served on
# the loopback, so that no test reaches the internet.
npm_cache=${AGENT_RUNNER_NPM_CACHE:-$HOME/.cache/agent-runner-test/npm}
if ! AGENT_RUNNER_TEST_NPM_CACHE=$npm_cache \
  "$CARGO" nextest run --locked --run-ignored only \
  -E 'test(=harness::npm_cache_fill)' --status-level none --final-status-level fail; then
  say "the pinned agents could not be fetched into $npm_cache: see above"
  exit 1
fi
registry_address=127.0.0.90:4873
python3 -m http.server --bind "${registry_address%:*}" --directory "$npm_cache" "${registry_address#*:}" \
  >/dev/null 2>&1 &
registry_pid=$!
for _ in $(seq 50); do
  if python3 -c "import socket; socket.create_connection(('${registry_address%:*}', ${registry_address#*:}), 1)" 2>/dev/null; then break; fi
  sleep 0.1
done
export NPM_CONFIG_REGISTRY=http://$registry_address/
# The official SDKs' checker of Meta's requests and replies (testdata/meta-sdk),
# once for the run: each test process would import the SDKs again (2-3 s of CPU).
sdk_checks=${TMPDIR:-/tmp}/agent-runner-sdk-checks-$owner.sock
rm -f "$sdk_checks"
python3 testdata/meta-sdk/check.py --serve-socket "$sdk_checks" >/dev/null 2>&1 &
sdk_pid=$!
for _ in $(seq 50); do [ -S "$sdk_checks" ] && break; sleep 0.1; done
if [ -S "$sdk_checks" ]; then
  export AGENT_RUNNER_TEST_SDK_CHECKS=$sdk_checks
else
  say "the SDKs' checker did not start (testdata/setup-meta-sdk.sh): each test starts its own"
fi
# gVisor runs a container here: proven once for the run (each runsc test process
# would start a gVisor sandbox of its own to ask, ~0.33 CPU-s each, 42 of them).
if docker run --rm --runtime runsc --network none --label agent-runner.task=runsc-probe \
  agent-runner-test-worker:latest /bin/sh -c 'echo runs' 2>/dev/null | grep -qx runs; then
  export AGENT_RUNNER_TEST_RUNSC_RUNS=1
fi
say "remote hosts up in $(($(date +%s) - started)) s: $(cut -f2 "$hosts_file" | tr '\n' ' ')"
status=0
# Tests that measure how promptly a deadline or a signal is obeyed run after the
# others, so that six busy neighbours do not make them late (a deadline of 15-20 s
# counts the sandbox's start, which took 27 s once among them). Four at a time: they
# mostly wait for their deadlines, and each took the same time as two at a time
# (the pass: 55 s -> 31 s, three runs).
timing='test(/^docker::(budget|signals)::/)'
timing="$timing | test(=image::claude_worker::a_claude_run_is_stopped_at_the_tasks_deadline)"
timing="$timing | test(=image::meta_codex::a_meta_call_is_stopped_at_the_tasks_deadline)"
timing="$timing | test(=docker::resume::a_resumed_task_has_only_the_time_left_of_its_deadline)"
# A test's timeout of 1 s and a stall of 1 s, each bounded at 8 and 15 s with the stop
# (one took 15.6 s beside a fork-chain test and two 200 MiB outputs).
timing="$timing | test(=docker::sandbox::tests_run_in_their_directory_with_a_time_limit)"
timing="$timing | test(=docker::sandbox::a_process_ignoring_sigterm_is_killed_inside_the_container)"
timing="($timing)"
"$CARGO" nextest run --locked --no-fail-fast --run-ignored all -E "($filter) & not $timing" || status=$?
# Each test's time (nextest's junit report), kept from the second pass's.
junit=${CARGO_TARGET_DIR:-target}/nextest/default/junit.xml
if [ -f "$junit" ]; then cp "$junit" "${junit%.xml}-main.xml"; fi
"$CARGO" nextest run --locked --no-fail-fast --run-ignored all -E "($filter) & $timing" \
  --test-threads 4 || status=$?
took=$(($(date +%s) - started))
if docker container inspect agent-runner-test-k8s-node >/dev/null 2>&1; then
  say "the Kubernetes test cluster's node (container agent-runner-test-k8s-node) stays up for the next run, as the test images do; make test-cluster-down removes it"
fi

# Lines "<test> TAB <prerequisite> TAB <why and what to do>".
count=$(wc -l <"$not_run")
if [ "$count" -eq 0 ]; then
  say "all $needing tests that need root, chromium or the sandbox image were run (${took} s)"
else
  say "$count of $needing tests that need a prerequisite were NOT run (${took} s):"
  # Per prerequisite: how many, why (the first test's words) and which.
  awk -F'\t' '{ n[$2]++; if (!($2 in why)) why[$2] = $3; names[$2] = names[$2] " " $1 }
    END { for (w in n) printf "  %d need %s (%s):%s\n", n[w], w, why[w], names[w] }' "$not_run" |
    while IFS= read -r line; do say "$line"; done
  say "  (under CI=true all of them run, and fail where a prerequisite is missing)"
fi
exit "$status"
