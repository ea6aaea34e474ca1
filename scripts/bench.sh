#!/usr/bin/env bash
# The performance benches (scenarios S1–S6 with their baselines, issue 17's rows P1–P4 on
# the semaphore, reader/writer lock and multi-lock, each judged against the mutex measured in
# the same run, and issue 56's fleets S7–S9: P = 2, 8, 32, 64 processes on one lock, on a name
# per pair, and waiting for one holder) against a throw-away SecantusDB server, started the
# same way scripts/test.sh does (scripts/test-server.sh); with MONGODB_URI set it uses that
# server instead. The benches are the workspace's package `mongolock-benches`
# (benches/Cargo.toml).
#
#   scripts/bench.sh                full run: criterion benches, then every scenario with at
#                                   least 3 repetitions, the fleets once (about 32 minutes on 2
#                                   cores, plus the release build)
#   scripts/bench.sh --quick        smoke test: short criterion runs and one short repetition
#                                   of each scenario (about 5 minutes plus the build)
#   scripts/bench.sh --only=s3,s5   only these scenario groups (s1 s2 s3 s4 s5 s6 p1 p2 p3 p4
#                                   explain feeds s7 s8 s9); implies --no-criterion. The fleets alone,
#                                   --only=s7,s8,s9, take about 7 minutes (quick: 2)
#   scripts/bench.sh --no-criterion skip the criterion benches
#
# Writes target/bench/results-<mode>.md (machine, commit, the scenarios' markdown tables),
# target/bench/criterion-<mode>.txt, and target/bench/fleet.svg (the S7–S9 figures against the
# number of processes) when a fleet ran; criterion's own reports are under target/criterion.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=full
criterion=1
scenario_args=()
for arg in "$@"; do
    case "$arg" in
        --quick) mode=quick; scenario_args+=(--quick) ;;
        --no-criterion) criterion=0 ;;
        --only=*) criterion=0; scenario_args+=("$arg") ;;
        -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
        *) echo "bench.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
    esac
done
[[ "$mode" == full ]] && scenario_args+=(--full)

if [[ -z "${MONGODB_URI:-}" ]]; then
    # shellcheck source=scripts/test-server.sh
    source scripts/test-server.sh
    # The server MONGODB_URI names (the first one started): S1 reads its CPU time.
    export MONGOLOCK_BENCH_SERVER_PID="${SECANTUS_STARTED[0]%% *}"
fi

target="${CARGO_TARGET_DIR:-target}"
# Absolute: cargo runs a bench in its package's folder (benches/), not here.
[[ "$target" == /* ]] || target="$PWD/$target"
out_dir="$target/bench"
mkdir -p "$out_dir"
results="$out_dir/results-$mode.md"
criterion_log="$out_dir/criterion-$mode.txt"

# Build first, so no measurement's time cap includes compiling.
echo "bench.sh: building the benches (release profile)" >&2
cargo bench -p mongolock-benches --no-run -q
SECONDS=0

if ((criterion)); then
    criterion_args=()
    if [[ "$mode" == quick ]]; then
        criterion_args=(--warm-up-time 0.5 --measurement-time 1 --sample-size 10)
    fi
    echo "bench.sh: criterion benches (S1, S2, S4); log in $criterion_log" >&2
    cargo bench -q -p mongolock-benches --bench acquire_release --bench mongo_ops -- \
        "${criterion_args[@]}" 2>&1 | tee "$criterion_log"
fi

echo "bench.sh: scenarios (S1–S6 and P1–P4 with baselines, fleets S7–S9)" >&2
{
    echo "# mongolock benches ($mode run, $(date -u +%Y-%m-%dT%H:%MZ))"
    echo
    echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "- machine: $(nproc) cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo) memory, $(uname -sr)"
    echo "- toolchain: $(rustc --version)"
    echo "- server: ${SECANTUS_VERSION:+secantusd-rs $SECANTUS_VERSION at }${MONGODB_URI}"
    echo "- load average before the scenarios (1, 5, 15 min): $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$results"
table="$out_dir/scenarios-$mode.md"
# A measurement that errored makes the run fail, after the table is written.
status=0
cargo bench -q -p mongolock-benches --bench scenarios -- "${scenario_args[@]}" --out="$table" \
    --charts="$out_dir" >/dev/null ||
    status=$?
{
    echo "- load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    cat "$table"
} >>"$results"
cat "$results"
echo "bench.sh: written to $results; measuring took ${SECONDS} s (the build not counted)" >&2
exit "$status"
