#!/usr/bin/env bash
# The dependency graph keeps deny.toml's policy: `cargo deny check licenses bans sources`
# (advisories need a database these machines cannot fetch: see deny.toml).
#
# cargo-deny is used from PATH when it is there; otherwise it is built once into the
# git-ignored folder .tools/cargo-deny (`cargo install --locked`: 24 minutes on two cores
# shared with other builds, load average about 11) and a copy is kept in the user's cache ($MONGOLOCK_CACHE, default ~/.cache/mongolock),
# so fresh clones on the same machine (CI) reuse it instead of building it again.
#
# usage: scripts/deny.sh [cargo-deny check arguments…]   (default: licenses bans sources)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

CARGO_DENY_VERSION="0.20.2"
local_bin="$PWD/.tools/cargo-deny/bin/cargo-deny"
cached="${MONGOLOCK_CACHE:-${HOME:-/tmp}/.cache/mongolock}/cargo-deny-$CARGO_DENY_VERSION/cargo-deny"

if command -v cargo-deny >/dev/null 2>&1; then
    deny=(cargo-deny)
elif [[ -x "$local_bin" ]]; then
    deny=("$local_bin")
elif [[ -x "$cached" ]]; then
    mkdir -p "$(dirname "$local_bin")" && cp "$cached" "$local_bin"
    deny=("$local_bin")
else
    echo "deny: building cargo-deny $CARGO_DENY_VERSION into .tools/cargo-deny (once; many minutes on two cores)" >&2
    # Its own temporary target directory, not the project's: nothing of it is shared.
    env -u CARGO_TARGET_DIR cargo install cargo-deny --version "=$CARGO_DENY_VERSION" --locked \
        --root "$PWD/.tools/cargo-deny"
    # Best effort: a cache that cannot be written only costs the next clone a build.
    mkdir -p "$(dirname "$cached")" 2>/dev/null && cp "$local_bin" "$cached" 2>/dev/null || true
    deny=("$local_bin")
fi

if (($# == 0)); then
    set -- licenses bans sources
fi
# The duplicates' inclusion trees run to hundreds of lines; their names say enough.
"${deny[@]}" deny check --hide-inclusion-graph "$@"
