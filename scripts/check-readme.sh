#!/usr/bin/env bash
# README.md's Rust snippets type-check for a new user: each ```rust block becomes a binary of a
# fresh crate whose `[dependencies]` is exactly the README's install block (only `mongolock`
# pointed at this checkout), and must pass `cargo check` there. Doc tests cannot catch a
# snippet that needs a crate or a feature the README does not list: they see all of
# mongolock's own dependencies. Running is the doc tests' part (README.md is included as doc
# tests, and those not marked `no_run` run there), so this check needs no code generation for
# the README's own feature set of the dependencies, which was two thirds of its time.
#
# The fresh crate lives in the target directory and checks into it, with the repository's
# lock file and dev profile, so dependencies already checked with the same features are
# reused.
#
# usage: scripts/check-readme.sh   (from anywhere inside the repository)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"

target_dir="$(cargo metadata --no-deps --format-version 1 --locked | python3 -c '
import json, sys
print(json.load(sys.stdin)["target_directory"])
')"
crate_dir="$target_dir/readme-check"

# Writes the crate and prints one line per snippet: "binary-name README-line".
snippets="$(python3 - "$root" "$crate_dir" <<'PY'
import os
import re
import sys

root, crate_dir = sys.argv[1], sys.argv[2]
readme = open(os.path.join(root, "README.md")).read()

def fail(message):
    sys.exit("check-readme: " + message)

blocks = []  # (info string, first line number of the code, code)
for match in re.finditer(r"^```([^\n]*)\n(.*?)^```", readme, re.S | re.M):
    line = readme.count("\n", 0, match.start(2)) + 1
    blocks.append((match.group(1).strip(), line, match.group(2)))

installs = [b for b in blocks if b[0] == "toml" and re.search(r"^\[dependencies\]", b[2], re.M)]
if len(installs) != 1:
    fail(f"README.md has {len(installs)} ```toml blocks with [dependencies]; expected exactly one")
dependencies, found = [], False
for entry in installs[0][2].splitlines():
    own = re.match(r'^(mongolock\s*=\s*)(".*?"|\{.*\})(.*)$', entry)
    if own:
        found = True
        key, value, rest = own.groups()
        path = 'path = "' + root.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if value.startswith("{"):
            value = "{ " + path + ", " + value[1:].lstrip()
        else:
            value = "{ version = " + value + ", " + path + " }"
        entry = key + value + rest
    dependencies.append(entry)
if not found:
    fail("the README's [dependencies] block has no `mongolock = …` line")

# The repository's dev profile: same settings, so the compiled dependencies can be shared.
manifest = open(os.path.join(root, "Cargo.toml")).read()
profile = "".join(re.findall(r"^\[profile\.[^\n]*\n(?:(?!\[)[^\n]*\n)*", manifest, re.M))

def write(path, text):
    """Writes only what changed: an unchanged file keeps its time, so cargo builds nothing."""
    path = os.path.join(crate_dir, path)
    if os.path.exists(path) and open(path).read() == text:
        return
    with open(path, "w") as out:
        out.write(text)

bin_dir = os.path.join(crate_dir, "src", "bin")
os.makedirs(bin_dir, exist_ok=True)
write("Cargo.toml",
      '[package]\nname = "readme-check"\nversion = "0.0.0"\nedition = "2024"\n'
      'publish = false\n\n# Its own workspace, not the repository\'s.\n[workspace]\n\n'
      + "\n".join(dependencies) + "\n\n" + profile)
write("Cargo.lock", open(os.path.join(root, "Cargo.lock")).read())
written = set()

for info, line, code in blocks:
    attributes = [a.strip() for a in info.split(",")]
    if attributes[0] != "rust":
        continue
    if "ignore" in attributes or "compile_fail" in attributes:
        print(f"check-readme: README.md line {line}: marked {info!r}, not built", file=sys.stderr)
        continue
    # rustdoc's hidden lines (`# code`) are part of the program.
    code = "\n".join(l[2:] if l.startswith("# ") else "" if l == "#" else l
                     for l in code.splitlines()) + "\n"
    if not re.search(r"\bfn\s+main\s*\(", code):
        code = "fn main() {\n" + code + "}\n"
    name = f"readme_line_{line}"
    write(os.path.join("src", "bin", name + ".rs"),
          f"// README.md, the ```rust block at line {line}.\n" + code)
    written.add(name + ".rs")
    print(name, line)
for stale in set(os.listdir(bin_dir)) - written:  # snippets since moved or removed
    os.remove(os.path.join(bin_dir, stale))
PY
)"

count=0
[[ -z "$snippets" ]] || count="$(wc -l <<<"$snippets")"
echo "check-readme: checking README.md's $count Rust snippets in a crate with only the README's dependencies" >&2
if ! CARGO_TARGET_DIR="$target_dir" cargo check --quiet --manifest-path "$crate_dir/Cargo.toml" --bins; then
    echo "check-readme: a README.md snippet does not build with only the README's [dependencies] (the binary readme_line_N above is the \`\`\`rust block at line N; its files: $crate_dir/src/bin/)" >&2
    exit 1
fi
