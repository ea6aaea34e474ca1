#!/usr/bin/env bash
# The edit-test loop: formatting, lints, unit tests, the conformance suite on the memory
# store (paused time), the layering check, a short deterministic simulation, the doc tests
# and the public-API listing. No server, no network; a few
# seconds once the first build is done. The full suite is scripts/test.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cargo fmt --all -- --check
cargo clippy --all-targets --all-features -- -D warnings
cargo test -q --all-features --lib --bins --test memory_store --test metrics --test layering --test helpers --test properties
# The deterministic simulation, a tenth of the schedules scripts/test.sh runs.
MONGOLOCK_SIM_SCHEDULES="${MONGOLOCK_SIM_SCHEDULES:-400}" cargo test -q --all-features --test simulation
cargo test -q --all-features --doc
# The public API is what public-api.txt lists: a change to it is a reviewed diff.
RUSTDOCFLAGS="-D warnings" cargo doc -q --no-deps --all-features
python3 scripts/public-api.py --check
