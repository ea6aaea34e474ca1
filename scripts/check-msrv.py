#!/usr/bin/env python3
"""Fails if Cargo.toml's rust-version is lower than the highest rust-version among the locked
normal (non-dev, non-build-only) dependencies on the platforms users build for.

usage: scripts/check-msrv.py   (from anywhere inside the repository)"""
import json
import subprocess
import sys

TARGETS = ["x86_64-unknown-linux-gnu", "aarch64-apple-darwin", "x86_64-pc-windows-msvc"]


def version(text):
    parts = [int(part) for part in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


metadata = json.loads(run("cargo", "metadata", "--format-version", "1", "--locked"))
# The root package (the workspace's other member, the benches, is not published).
ours = next(p for p in metadata["packages"] if p["id"] == metadata["resolve"]["root"])
declared = ours.get("rust_version")
if not declared:
    sys.exit("check-msrv: Cargo.toml declares no rust-version")

normal = set()
for target in TARGETS:
    tree = run("cargo", "tree", "--locked", "-e", "normal", "--all-features", "--target", target,
               "--prefix", "none", "--format", "{p}")
    for line in tree.splitlines():
        name, _, rest = line.partition(" v")
        normal.add((name, rest.split(" ")[0]))

needed = [(p["rust_version"], p["name"], p["version"]) for p in metadata["packages"]
          if p.get("rust_version") and (p["name"], p["version"]) in normal and p["id"] != ours["id"]]
highest = max(needed, key=lambda item: version(item[0]))
if version(declared) < version(highest[0]):
    sys.exit(f"check-msrv: rust-version {declared} is lower than {highest[1]} {highest[2]}'s "
             f"{highest[0]}; raise rust-version in Cargo.toml")
print(f"check-msrv: rust-version {declared} >= {highest[0]} ({highest[1]} {highest[2]}), "
      f"the highest among {len(normal)} normal dependencies")
