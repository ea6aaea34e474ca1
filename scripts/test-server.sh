#!/usr/bin/env bash
# A throw-away MongoDB-compatible server for the tests: SecantusDB's Rust server
# (`secantusd-rs`, crate secantus-mdb, GPL-2.0, a test-time tool only; the library never
# depends on it).
#
#   source scripts/test-server.sh   start it in the background, export MONGODB_URI (and
#                                   MONGODB_STANDALONE_URI, SECANTUS_BIN: see secantus_start),
#                                   and stop it (deleting its data) when the sourcing shell exits
#   scripts/test-server.sh          start it in the foreground and print the exports; Ctrl-C stops it
#   scripts/test-server.sh --build  only build/install the server binary
#
# The binary is built once into the git-ignored folder .tools/secantus (about 6 minutes on two
# cores; needs cmake and a C compiler, installed with apt-get when missing) and reused after.
# A copy is kept in the user's cache ($MONGOLOCK_CACHE, default ~/.cache/mongolock), so fresh
# clones on the same machine (CI) reuse it instead of building it again.

SECANTUS_VERSION="0.5.3-beta.196"

_secantus_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECANTUS_BIN="$_secantus_root/.tools/secantus/bin/secantusd-rs"

_secantus_install_build_tools() {
    local missing=()
    command -v cmake >/dev/null 2>&1 || missing+=(cmake)
    command -v cc >/dev/null 2>&1 || missing+=(build-essential)
    if ((${#missing[@]} == 0)); then
        return 0
    fi
    echo "test-server: installing ${missing[*]} (needed to build SecantusDB)" >&2
    local sudo=()
    if [[ "$(id -u)" != 0 ]]; then
        sudo=(sudo)
    fi
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}"
}

_secantus_cached="${MONGOLOCK_CACHE:-${HOME:-/tmp}/.cache/mongolock}/secantus-$SECANTUS_VERSION/secantusd-rs"

secantus_build() {
    if [[ -x "$SECANTUS_BIN" ]]; then
        return 0
    fi
    if [[ -x "$_secantus_cached" ]]; then
        mkdir -p "$(dirname "$SECANTUS_BIN")" && cp "$_secantus_cached" "$SECANTUS_BIN" && return 0
    fi
    _secantus_install_build_tools || return 1
    echo "test-server: building secantusd-rs $SECANTUS_VERSION into .tools/secantus (once; about 6 minutes)" >&2
    cargo install secantus-mdb --version "=$SECANTUS_VERSION" --ignore-rust-version \
        --root "$_secantus_root/.tools/secantus" || return 1
    [[ -x "$SECANTUS_BIN" ]] || {
        echo "test-server: cargo install finished but $SECANTUS_BIN is missing" >&2
        return 1
    }
    # Best effort: a cache that cannot be written only costs the next clone a build.
    mkdir -p "$(dirname "$_secantus_cached")" 2>/dev/null && cp "$SECANTUS_BIN" "$_secantus_cached" 2>/dev/null || true
}

# Every server this shell started: "pid data-directory" per entry.
SECANTUS_STARTED=()

secantus_stop() {
    local entry pid data
    for entry in "${SECANTUS_STARTED[@]}"; do
        read -r pid data <<<"$entry"
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        rm -rf "$data"
    done
    SECANTUS_STARTED=()
    SECANTUS_PID=""
}

# Starts one server in the background with the given extra flags and sets SECANTUS_PID and
# SECANTUS_URI; returns non-zero on failure.
_secantus_launch() {
    local data
    data="$(mktemp -d "${TMPDIR:-/tmp}/secantus-data.XXXXXX")" || return 1
    local log="$data/server.log"
    "$SECANTUS_BIN" --host 127.0.0.1 --port 0 --storage-path "$data/db" \
        --enable-test-commands "$@" >"$log" 2>&1 &
    SECANTUS_PID=$!
    SECANTUS_STARTED+=("$SECANTUS_PID $data")

    # The first line is "secantusd-rs listening on 127.0.0.1:PORT".
    local port="" i
    for ((i = 0; i < 300; i++)); do
        port="$(sed -n 's/^secantusd-rs listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$log" | head -n 1)"
        [[ -n "$port" ]] && break
        if ! kill -0 "$SECANTUS_PID" 2>/dev/null; then
            echo "test-server: secantusd-rs exited before listening:" >&2
            cat "$log" >&2
            return 1
        fi
        sleep 0.1
    done
    if [[ -z "$port" ]]; then
        echo "test-server: secantusd-rs did not report its port within 30 s:" >&2
        cat "$log" >&2
        return 1
    fi
    # Wait until it accepts connections.
    for ((i = 0; i < 100; i++)); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            break
        fi
        sleep 0.1
    done
    # The server advertises a one-node replica set under the address it bound; a direct
    # connection skips replica-set discovery, so the URI works whatever it advertises.
    SECANTUS_URI="mongodb://127.0.0.1:$port/?directConnection=true"
}

# Starts what the tests need and is not configured already, and exports it:
#   MONGODB_URI             a one-node replica set (change streams work)
#   MONGODB_STANDALONE_URI  a standalone server (`--standalone`: no change streams), for the
#                           tests of waiters without a release feed
#   SECANTUS_BIN            the server binary, for tests that run (and restart) their own
secantus_start() {
    secantus_build || return 1
    export SECANTUS_BIN
    if [[ -z "${MONGODB_URI:-}" ]]; then
        _secantus_launch || return 1
        export MONGODB_URI="$SECANTUS_URI"
        echo "test-server: secantusd-rs (pid $SECANTUS_PID) listening; MONGODB_URI=$MONGODB_URI" >&2
    fi
    if [[ -z "${MONGODB_STANDALONE_URI:-}" ]]; then
        _secantus_launch --standalone --cache-size 256M || return 1
        export MONGODB_STANDALONE_URI="$SECANTUS_URI"
        echo "test-server: standalone secantusd-rs (pid $SECANTUS_PID) listening; MONGODB_STANDALONE_URI=$MONGODB_STANDALONE_URI" >&2
    fi
}

if [[ "${BASH_SOURCE[0]}" != "$0" ]]; then
    # Sourced: start, and stop with the sourcing shell (normal exit, failure, Ctrl-C, TERM).
    trap 'secantus_stop' EXIT
    trap 'secantus_stop; exit 130' INT
    trap 'secantus_stop; exit 143' TERM
    secantus_start || return 1
else
    set -euo pipefail
    if [[ "${1:-}" == "--build" ]]; then
        secantus_build
        exit 0
    fi
    trap 'secantus_stop' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    secantus_start
    echo "export MONGODB_URI='$MONGODB_URI' MONGODB_STANDALONE_URI='$MONGODB_STANDALONE_URI' SECANTUS_BIN='$SECANTUS_BIN'"
    wait
fi
