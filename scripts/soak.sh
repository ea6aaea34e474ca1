#!/usr/bin/env bash
# Soak test (not run in CI): 10 minutes of mixed load on two managers against a throw-away
# test server (or MONGODB_URI), a report line every 30 s with live lock actors, alive Tokio
# tasks and resident memory, then a check that they stayed flat and drained once the load
# stopped. Extra arguments go to the example (e.g. --minutes 2, --every 10).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ -z "${MONGODB_URI:-}" ]]; then
    # shellcheck source=scripts/test-server.sh
    source scripts/test-server.sh
fi
cargo build -q --all-features --example soak
target_dir="${CARGO_TARGET_DIR:-target}"
"$target_dir/debug/examples/soak" --mongodb-uri "$MONGODB_URI" "$@"
