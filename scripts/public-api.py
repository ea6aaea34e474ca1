#!/usr/bin/env python3
"""The crate's public API, one line per public path, read from `cargo doc`'s output.

    scripts/public-api.py            print the listing (after `cargo doc --no-deps --all-features`)
    scripts/public-api.py --check    compare it with public-api.txt; exit 1 on any difference
    scripts/public-api.py --write    rewrite public-api.txt

Every item reachable from the crate root is listed under each path that reaches it, with
its inherent members (methods, fields, variants, associated items), the traits it
implements (Send, Sync and the like included: dropping one breaks users) and re-exports.
A change to the public API therefore shows up as a change to public-api.txt, reviewed like
code: nothing becomes public, or stops being public, by accident. Stable rustdoc's HTML is
the source because the JSON output needs a nightly toolchain.
"""

import html
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Where `cargo doc` wrote: CARGO_TARGET_DIR when set (relative to the working directory, as
# cargo reads it), else the repository's target directory.
DOC = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target").resolve() / "doc" / "mongolock"
LISTING = ROOT / "public-api.txt"

MEMBER = re.compile(
    r'id="(method|tymethod|variant|structfield|associatedconstant|associatedtype)\.([A-Za-z0-9_]+)"'
)
HEADER = re.compile(r'<h3 class="code-header">(.*?)</h3>', re.S)
TAG = re.compile(r"<[^>]+>")


def text(fragment: str) -> str:
    return " ".join(html.unescape(TAG.sub("", fragment)).split())


def section(page: str, name: str) -> str:
    """The HTML of the page's `<h2 id=name>` section, up to the next `<h2`."""
    start = page.find(f'<h2 id="{name}"')
    if start < 0:
        return ""
    end = page.find("<h2 ", start + 1)
    return page[start : end if end >= 0 else len(page)]


def sidebar(module_dir: Path) -> dict:
    script = (module_dir / "sidebar-items.js").read_text()
    return json.loads(script[script.index("{") : script.rindex("}") + 1])


def item_lines(path: str, kind: str, page: str) -> list[str]:
    lines = [f"{kind} {path}"]
    members = set()
    for name in ["implementations", "required-methods", "provided-methods", "variants",
                 "fields", "required-associated-types", "required-associated-consts",
                 "provided-associated-consts"]:
        for what, member in MEMBER.findall(section(page, name)):
            members.add(f"{what.replace('tymethod', 'method')} {path}::{member}")
    lines.extend(sorted(members))
    for name in ["trait-implementations", "synthetic-implementations"]:
        for header in HEADER.findall(section(page, name)):
            lines.append(f"impl {path}: {text(header)}")
    return lines


def module_lines(module_dir: Path, path: str) -> list[str]:
    lines = []
    index = (module_dir / "index.html").read_text()
    for reexport in re.findall(r'<code>(pub use .*?;)</code>', section(index, "reexports"), re.S):
        lines.append(f"reexport {path}: {text(reexport)}")
    for kind, names in sidebar(module_dir).items():
        for name in names:
            if kind == "mod":
                lines.append(f"mod {path}::{name}")
                lines.extend(module_lines(module_dir / name, f"{path}::{name}"))
                continue
            page = module_dir / f"{kind}.{name}.html"
            if not page.exists():
                lines.append(f"{kind} {path}::{name}")
                continue
            lines.extend(item_lines(f"{path}::{name}", kind, page.read_text()))
    return lines


def listing() -> str:
    if not (DOC / "index.html").exists():
        sys.exit("public-api.py: no docs; run `cargo doc --no-deps --all-features` first")
    return "\n".join(sorted(set(module_lines(DOC, "mongolock")))) + "\n"


def main() -> int:
    current = listing()
    if "--write" in sys.argv:
        LISTING.write_text(current)
        return 0
    if "--check" in sys.argv:
        recorded = LISTING.read_text() if LISTING.exists() else ""
        if recorded == current:
            return 0
        old, new = set(recorded.splitlines()), set(current.splitlines())
        for line in sorted(old - new):
            print(f"- {line}")
        for line in sorted(new - old):
            print(f"+ {line}")
        print(
            "public-api.py: the public API differs from public-api.txt; if the change is "
            "meant, run scripts/public-api.py --write and commit the listing",
            file=sys.stderr,
        )
        return 1
    sys.stdout.write(current)
    return 0


if __name__ == "__main__":
    sys.exit(main())
