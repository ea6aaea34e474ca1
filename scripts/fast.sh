#!/usr/bin/env bash
# The edit-test loop: the paths docs and comments cite, formatting, lints, unit tests, the
# conformance suite on the memory store (paused time), the layering check, a short
# deterministic simulation and the public-API listing. No server, no network. At most about 20 s once the first build is done
# (measured warm on two cores busy with other builds: 18.6 s and 21.9 s at load average 10,
# 8.4 s and 14.1 s at 7); the full suite is scripts/test.sh.
#
# The doc tests are left to scripts/test.sh: rustdoc compiles all of them again on every run,
# warm or not (16 s to 47 s here, by the load). `scripts/fast.sh --doc` runs them too.
#
# usage: scripts/fast.sh [--doc]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

doc=false
case "${1:-}" in
    "") ;;
    --doc) doc=true ;;
    *)
        echo "usage: scripts/fast.sh [--doc]" >&2
        exit 64
        ;;
esac

# Every repository path a document or a comment cites exists (under a second).
python3 scripts/check-paths.py
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --all-features -- -D warnings
cargo test -q --all-features --lib --bins --test memory_store --test metrics --test layering --test run_locked --test properties
# The deterministic simulation, a fortieth of the schedules scripts/test.sh runs.
MONGOLOCK_SIM_SCHEDULES="${MONGOLOCK_SIM_SCHEDULES:-100}" cargo test -q --all-features --test simulation
if "$doc"; then
    cargo test -q --all-features --doc
fi
# The public API is what public-api.txt lists: a change to it is a reviewed diff.
RUSTDOCFLAGS="-D warnings" cargo doc -q --no-deps --all-features
python3 scripts/public-api.py --check
