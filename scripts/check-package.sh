#!/usr/bin/env bash
# The published crate builds from the package alone: packages the crate as crates.io would
# receive it (Cargo.toml's `include` list, the normalised manifest, the lock file), unpacks
# it, and checks every target — library, tool, examples, tests — with all features. (The
# benches are a separate package of the workspace, `benches/Cargo.toml`, not published.)
# A file the package misses (a `#[path]` module, an example's helper) fails here. No source
# file is compiled only without a feature (no `cfg(not(feature))` module), so all features
# see every file; a target that needs a feature without declaring it is caught by the lints
# of scripts/test.sh, which check every target with no features, the defaults and all
# features. `--all-feature-sets` checks the package with all three here too. First it
# checks that README.md, which crates.io and docs.rs show, has no relative links.
#
# It shares the target directory with the other builds, so only mongolock itself is checked
# again (about 15 s on two cores once `cargo clippy --all-targets --all-features` has run).
#
# usage: scripts/check-package.sh [--all-feature-sets]   (from anywhere inside the repository)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# crates.io and docs.rs show README.md without the repository around it (Cargo.toml names no
# repository address to resolve against), so a relative link or image there is broken.
python3 - <<'PY'
import re
import sys

text = re.sub(r"^```.*?^```", "", open("README.md").read(), flags=re.S | re.M)  # code blocks
text = re.sub(r"`[^`\n]*`", "", text)  # inline code
targets = re.findall(r"\]\(\s*<?([^)\s>]+)", text)  # [text](target), ![alt](target)
targets += re.findall(r"^\s*\[[^\]]+\]:\s*<?([^\s>]+)", text, re.M)  # [id]: target
relative = [t for t in targets if not re.match(r"(https?://|mailto:|#)", t)]
if relative:
    sys.exit("check-package: README.md links to files that crates.io and docs.rs do not have: "
             + ", ".join(relative) + " (link to an absolute address, or name the file in `code`)")
PY

# --allow-dirty: check what is in the working tree, committed or not.
cargo package --quiet --locked --allow-dirty --no-verify
target_dir="$(cargo metadata --no-deps --format-version 1 --locked | python3 -c '
import json, sys
print(json.load(sys.stdin)["target_directory"])
')"
# The root package: the workspace's other member (the benches) is not published.
version="$(cargo metadata --no-deps --format-version 1 --locked | python3 -c '
import json, os, sys
root = os.path.realpath("Cargo.toml")
package = next(p for p in json.load(sys.stdin)["packages"]
               if os.path.realpath(p["manifest_path"]) == root)
print("{}-{}".format(package["name"], package["version"]))
')"
package_dir="$target_dir/package/$version"
rm -rf "$package_dir"
# -m: the package stores one fixed time for every file; files dated now make cargo check
# them again instead of trusting an earlier check of an older package.
tar -xzmf "$package_dir.crate" -C "$(dirname "$package_dir")"
feature_sets=(--all-features)
if [[ "${1:-}" == --all-feature-sets ]]; then
    feature_sets=(--no-default-features "" --all-features)
fi
for features in "${feature_sets[@]}"; do
    echo "check-package: cargo check --all-targets ${features:-(default features)} on the packaged crate" >&2
    # The repository's target directory: the dependencies the lints already compiled are
    # reused, only the packaged crate itself is checked anew.
    CARGO_TARGET_DIR="$target_dir" cargo check --quiet --locked --all-targets $features \
        --manifest-path "$package_dir/Cargo.toml"
done
