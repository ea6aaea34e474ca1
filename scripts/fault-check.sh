#!/usr/bin/env bash
# The multi-process fault checker (examples/fault_check): worker processes contend for locks
# and elections on a SecantusDB server the checker starts itself (its own data directory, so
# it can SIGSTOP, SIGKILL and restart it), while holders are paused and killed and
# failCommand fail points stall, drop and fail commands. Afterwards it checks what every
# process recorded and exits non-zero on any violation.
#
#   scripts/fault-check.sh            the long configuration: 6 workers x 4 tasks on 3 locks,
#                                     every fault kind 5 times, then 10 minutes of mixed faults,
#                                     then the shared kinds, arrival order and fleets of 12
#                                     (about 39 minutes on two cores)
#   scripts/fault-check.sh --short    the CI configuration: every fault kind once on its own
#                                     and once more mixed, then semaphores and
#                                     reader/writer locks side by side, then the
#                                     arrival-order scenario, then the fleets: 10
#                                     processes on one lock, in the default mode and in
#                                     arrival order, their next waiter to go paused and
#                                     killed (about 6 minutes on two cores, 45 s of it
#                                     the fleets)
#   scripts/fault-check.sh --scenario holder-stop --repeats 3 --keep   anything the example takes
#
# Needs the test server binary in .tools/ (scripts/test-server.sh --build builds it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/test-server.sh --build
args=("$@")
if [[ ${#args[@]} -eq 0 ]]; then
    args=(--long)
fi
cargo build -q --all-features --example fault_check
target_dir="${CARGO_TARGET_DIR:-target}"
exec "$target_dir/debug/examples/fault_check" "${args[@]}"
