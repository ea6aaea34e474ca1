#!/usr/bin/env bash
# Mutation testing of the safety paths: cargo-mutants (crates.io) plants one bug at a time in
# src/lock and src/store/memory (a `>` turned `>=`, a check's body replaced by `true`, a
# function returning its default) and runs the oracle against each. A mutant that survives
# in a grant, release, hand-over, renewal or loss path is a check the tests do not need: add
# the schedule or test that kills it, or say in a comment beside the code why it is
# equivalent (it changes nothing observable).
#
# The oracle is what pins those paths without a server: the crate's unit tests, the
# conformance suite on the memory store (paused time), the metrics test (the gauges a hold
# moves must come back), the fleet tests (how often waiting processes ask, and whom a
# release wakes) and the deterministic simulator (MONGOLOCK_SIM_SCHEDULES schedules
# per mutant, 400 by default; scripts/test.sh runs 4,000).
#
#   scripts/mutants.sh                        every mutant of src/lock and src/store/memory
#   scripts/mutants.sh --list                 list them (about 1,000), run nothing
#   scripts/mutants.sh -f src/store/memory/shared.rs    one file (any cargo-mutants option
#                                             after the script's own: -F REGEX, --shard 1/8…)
#   scripts/mutants.sh --in-place …           in this checkout, reusing its build (quickest;
#                                             leave the tree alone while it runs)
#   scripts/mutants.sh --timeout 50 …         a fixed test timeout in seconds instead of three
#                                             times the baseline's (a baseline slowed by other
#                                             work makes every hanging mutant wait that long)
#
# Time: only the oracle's test targets are built, without debug info (a mutant's link
# is most of its build otherwise). The scratch copy's first build is a full build of those
# targets; then a mutant costs one incremental build (about 5 s on two quiet cores, 40 s
# when every test target was built with debug info) and the oracle's run (10-20 s; up to its
# timeout for a mutant that hangs it). The whole set (about 900 mutants) is a few hours, so
# run it by file, by function (`-F REGEX`) or by shard (`--shard k/n`) and gather the results.
# Not part of scripts/test.sh or CI.
#
# Results: mutants.out/ (caught.txt, missed.txt, timeout.txt, unviable.txt), git-ignored;
# the score per file is printed at the end (scripts/mutants-score.py, which also merges
# the outcomes.json of runs made apart: shards, or files run one session at a time).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! cargo mutants --version >/dev/null 2>&1; then
    echo "mutants.sh: installing cargo-mutants from crates.io (once, a few minutes)" >&2
    cargo install cargo-mutants --locked
fi

# Whether the caller passed an argument matching the pattern (a whole argument).
args=("$@")
asked() {
    printf '%s\n' "${args[@]}" | grep -qx -- "$1"
}

files=()
# Only when the caller names no file of their own.
if ! asked '-f\|--file'; then
    files=(--file 'src/lock/**' --file 'src/store/memory/**')
fi

# --copy-target: each scratch tree starts from this tree's build, not a cold one. With
# --in-place (mutants written into this checkout and restored after each; its target
# directory and incremental state reused, so no scratch build at all) there is no copy.
copy=(--copy-target=true)
if asked '--in-place'; then
    copy=()
fi

# A test timeout of three times the baseline's, unless the caller sets one (`--timeout S`:
# a baseline run beside other work would otherwise make every hanging mutant wait long).
timeout=(--timeout-multiplier 3)
if asked '--timeout\(=.*\)\?'; then
    timeout=()
fi

export MONGOLOCK_SIM_SCHEDULES="${MONGOLOCK_SIM_SCHEDULES:-400}"
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-0}"
# --baseline=skip would save one run, but a red baseline would call every mutant caught.
status=0
started=$(mktemp)
cargo mutants --all-features "${copy[@]}" "${timeout[@]}" \
    --cargo-arg=--lib --cargo-arg=--test=memory_store --cargo-arg=--test=metrics \
    --cargo-arg=--test=simulation --cargo-arg=--test=fleet \
    "${files[@]}" "$@" || status=$?
# cargo-mutants exits 2 when a mutant was missed, 3 when one timed out: still a score. An
# outcomes.json older than this run (refused arguments, --list) is a previous run's.
if [[ mutants.out/outcomes.json -nt "$started" ]]; then
    python3 scripts/mutants-score.py mutants.out/outcomes.json
fi
rm -f "$started"
exit "$status"
