#!/usr/bin/env bash
# The project's single test command (CI runs it through .ci/run).
#
# Without MONGODB_URI it starts a throw-away SecantusDB server (scripts/test-server.sh) for
# the MongoDB tests and stops it on exit; with MONGODB_URI set (a real replica set, Atlas…)
# it uses that server instead. Likewise a standalone server (no change streams) unless
# MONGODB_STANDALONE_URI is set, and the tests that restart a server run their own SecantusDB.
# The MongoDB tests fail, never skip, without a server.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# A real Prometheus for the metrics end-to-end test (tests/prometheus_e2e.rs).
if ! command -v prometheus >/dev/null 2>&1; then
    echo "test.sh: installing prometheus (Debian package) for the metrics end-to-end test" >&2
    sudo=()
    [[ "$(id -u)" == 0 ]] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

# A one-shot run gains nothing from incremental compilation, whose caches were a third of a
# cold run's target directory; a developer's own setting wins.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# The disk a run needs (about 4 GB cold) is the first thing to check when a build dies with
# "No space left on device", so say what there was at the start and at the end (not from an
# EXIT trap: test-server.sh owns that one).
disk_free() { df -h --output=avail "${CARGO_TARGET_DIR:-target}" 2>/dev/null | tail -n 1 | tr -d ' '; }
mkdir -p "${CARGO_TARGET_DIR:-target}"
echo "test.sh: $(disk_free) free for the target directory at the start" >&2

# Each step's time, printed as it ends and again at the end, so a run that nears CI's limit
# says where its minutes went.
timings=()
took() {
    timings+=("$(printf '%5d s  %s' $((SECONDS - $2)) "$1")")
    echo "test.sh: ${1}: $((SECONDS - $2)) s" >&2
}
timed() {
    local label="$1" started=$SECONDS rc=0
    shift
    "$@" || rc=$?
    took "$label" "$started"
    return "$rc"
}

# On a fresh machine the test server is built from source (about 6 minutes on two cores).
# That build runs beside the lints and documentation builds below: both are compilations with
# serial stretches (a large crate, a link) that leave a core idle, which the other fills.
server_build_log="${CARGO_TARGET_DIR:-target}/test-server-build.log"
scripts/test-server.sh --build >"$server_build_log" 2>&1 &
server_build=$!
# A run that stops early stops the build too (test-server.sh sets its own trap later).
trap 'pkill -P "$server_build" 2>/dev/null; kill "$server_build" 2>/dev/null || true' EXIT

timed "fmt" cargo fmt --all -- --check
# The feature matrix: the library alone (no MongoDB), the defaults, and everything. Targets
# that need a feature declare it (required-features), so each set builds what it can. The
# benches' package (benches/Cargo.toml) joins the all-features run only: it turns on the
# `mongodb` feature, which would hide what the library does without it.
for features in --no-default-features "" "--all-features --workspace"; do
    timed "clippy ${features:-(default features)}" cargo clippy --all-targets $features -- -D warnings
done
# The crate as published (cargo package) builds every target on its own; its README has no
# relative links.
timed "packaged crate" scripts/check-package.sh
# A new user's first contact: every README snippet type-checks in a fresh crate that has only
# the README's [dependencies] block (the doc tests run them).
timed "README snippets" scripts/check-readme.sh
# Licences, banned crates and sources of the dependency graph (deny.toml).
timed "cargo deny" scripts/deny.sh
python3 scripts/check-msrv.py
# Every repository path a document or a comment cites exists, and every anchor it names.
python3 scripts/check-paths.py
# Docs build without warnings (broken or private links), with and without the features.
RUSTDOCFLAGS="-D warnings" timed "docs, all features" cargo doc -q --no-deps --all-features
# The public API is what public-api.txt lists (read from the docs just built).
python3 scripts/public-api.py --check
RUSTDOCFLAGS="-D warnings" timed "docs, no features" cargo doc -q --no-deps --no-default-features

started=$SECONDS
if ! wait "$server_build"; then
    cat "$server_build_log" >&2
    echo "test.sh: building the test server failed (log above)" >&2
    exit 1
fi
took "waiting for the test server build" "$started"
# shellcheck source=scripts/test-server.sh
source scripts/test-server.sh
# Run every test target and the doc tests even when one fails, then fail if any did.
status=0
# The main job (README's first command) must run to completion and exit 0; its summary shows.
echo "test.sh: running the main job (cargo run --example leader_election --features prometheus,testing)" >&2
main_job() { cargo run -q --example leader_election --features prometheus,testing | tail -n 14; }
timed "main job" main_job || { echo "test.sh: the main job failed" >&2; status=1; }
# Every example builds (the Prometheus end-to-end test runs the contention binary).
timed "examples" cargo build -q --examples --all-features || status=$?
timed "tests, no features" cargo test --no-default-features --lib --tests --no-fail-fast || status=$?
# --workspace: with the benches, whose scenario binary runs a short smoke of every scenario.
timed "tests, all features" cargo test --all-features --workspace --all-targets --no-fail-fast || status=$?
timed "doc tests" cargo test --all-features --doc --no-fail-fast || status=$?
# The multi-process fault checker, short configuration: every fault kind at least once.
timed "fault checker" scripts/fault-check.sh --short || status=$?
echo "test.sh: $(disk_free) free for the target directory at the end" >&2
echo "test.sh: time per step ($SECONDS s in all):" >&2
printf '  %s\n' "${timings[@]}" >&2
exit "$status"
