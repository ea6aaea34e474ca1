#!/usr/bin/env bash
# The project's single test command (CI runs it through .ci/run).
#
# Without MONGODB_URI it starts a throw-away SecantusDB server (scripts/test-server.sh) for
# the MongoDB tests and stops it on exit; with MONGODB_URI set (a real replica set, Atlas…)
# it uses that server instead. The MongoDB tests fail, never skip, without a server.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ -z "${MONGODB_URI:-}" ]]; then
    # shellcheck source=scripts/test-server.sh
    source scripts/test-server.sh
fi

cargo fmt --all -- --check
cargo clippy --all-targets -- -D warnings
# Run every test target and the doc tests even when one fails, then fail if any did.
status=0
cargo test --all-targets --no-fail-fast || status=$?
cargo test --doc --no-fail-fast || status=$?
exit "$status"
