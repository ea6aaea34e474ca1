#!/usr/bin/env python3
"""Fails if a document or a comment cites a repository path that does not exist.

Read: every Markdown file, and the comments of Rust, shell, Python, TOML and YAML files
(doc comments included; string literals and other code are the compiler's to check). A
citation is checked when it names a path from the repository's root (`src/lock/mod.rs`,
`benches/`, `scripts/*.sh`), or a file below a source folder by its tail
(`store/mongo/pipeline.rs`, `engine/holds.rs`): some file must end that way. A citation of
a Markdown file with a fragment (`benches/RESULTS.md#p3`) must name a heading or an
explicit `<a id>` of that file. Paths written as `<commit>:<path>` (a file as it was at a
commit) are checked against that commit when git has it. The relative links of Markdown
files that rustdoc does not render (`[entry](HISTORY.md#p3)`, `[top](#s1)`) must lead to a
file and an anchor that exist; rustdoc checks the links of those it renders. URLs, build
output (`target/`) and templates (`results-<mode>.md`) are not repository paths and are
left alone.

usage: scripts/check-paths.py   (from anywhere inside the repository; under a second)"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Folders a citation may start from. `target/` is build output, never cited as source.
ROOTED = {"src", "tests", "benches", "examples", "scripts", ".ci", ".github", "docs", "fuzz"}
SKIP_DIRS = {"target", ".git", "node_modules", "mutants.out", "mutants.out.old"}
# Extensions a tail citation (`lock/guard.rs`) must end in; without one, `read/write` and
# `p50/p99` would count as paths.
FILE_EXTENSIONS = {"rs", "md", "sh", "py", "toml", "json", "yml", "yaml", "txt", "png", "svg"}
HASH_COMMENTS = {".sh", ".py", ".toml", ".yml", ".yaml"}
MARKDOWN_LINK = re.compile(r"\]\(<?([^)\s>]+)>?[^)]*\)|^\s*\[[^\]]+\]:\s*<?([^\s>]+)")
INCLUDED = re.compile(r'include_str!\(\s*"([^"]+\.md)"\s*\)')

CITATION = re.compile(
    r"(?<![\w./:~$@%+=-])"  # not the middle of a URL, a longer path or a word
    r"(?:(?P<rev>[0-9a-f]{7,40}):)?"
    r"(?P<path>(?:\.\.?/)*[\w.*-]+/[\w.*/-]*)"
    r"(?P<frag>#[\w-]+)?"
)


def source_files():
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS
                         and (not d.startswith(".") or d in ROOTED))
        for name in sorted(files):
            yield os.path.join(folder, name)


RUST_START = re.compile(r"//|/\*|[\"']")
RAW_PREFIX = re.compile(r"(?:^|[^\w])b?r(#*)$")
STRING_REST = re.compile(r'(?:\\.|[^"\\])*"', re.S)
CHAR_LITERAL = re.compile(r"'(?:\\(?:u\{[^}]*\}|x..|.)|[^\\'\n])'")
NESTING = re.compile(r"/\*|\*/")


def rust_comments(text):
    """The comments of Rust source, each with the line it starts on."""
    out, pos, n = [], 0, len(text)
    while (m := RUST_START.search(text, pos)):
        at, token = m.start(), m.group()
        if token == "//":
            end = text.find("\n", at)
            pos = n if end < 0 else end
            out.append((at, text[at:pos]))
        elif token == "/*":
            depth, pos = 1, m.end()
            while depth and (inner := NESTING.search(text, pos)):
                depth += 1 if inner.group() == "/*" else -1
                pos = inner.end()
            pos = n if depth else pos
            out.append((at, text[at:pos]))
        elif token == '"':
            raw = RAW_PREFIX.search(text, max(0, at - 80), at)
            if raw:  # r"…", r#"…"#, br"…": no escapes, closed by the quote and its hashes
                close = '"' + raw.group(1)
                end = text.find(close, m.end())
                pos = n if end < 0 else end + len(close)
            else:
                rest = STRING_REST.match(text, m.end())
                pos = rest.end() if rest else n
        else:  # a char literal, or a lifetime or a label, which are code
            char = CHAR_LITERAL.match(text, at)
            pos = char.end() if char else m.end()
    numbered, line, counted = [], 1, 0
    for at, comment in out:
        line += text.count("\n", counted, at)
        counted = at
        numbered.append((line, comment))
    return numbered


def hash_comments(text):
    """`#` comments of shell, Python, TOML and YAML: a `#` outside quotes that starts the
    line or follows a blank (so `$#` and `${#list}` are code)."""
    out = []
    for number, raw in enumerate(text.splitlines(), 1):
        quote = None
        for k, c in enumerate(raw):
            if quote:
                if c == "\\" and quote == '"':
                    continue
                if c == quote:
                    quote = None
            elif c in "'\"":
                quote = c
            elif c == "#" and (k == 0 or raw[k - 1] in " \t"):
                out.append((number, raw[k:]))
                break
    return out


def texts(path):
    """(line, text) pieces of a file in which citations count."""
    ext = os.path.splitext(path)[1]
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (UnicodeDecodeError, OSError):
        return []
    if ext == ".md":
        return list(enumerate(text.splitlines(), 1))
    if ext == ".rs":
        return rust_comments(text)
    if ext in HASH_COMMENTS or (not ext and re.match(r"#!.*\b(ba)?sh\b|#!.*python", text)):
        return hash_comments(text)
    return []


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, blanks to hyphens."""
    heading = re.sub(r"<[^>]*>", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", heading).replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        found, seen, fence = set(), {}, False
        with open(path, encoding="utf-8") as f:
            for raw in f:
                if raw.lstrip().startswith("```"):
                    fence = not fence
                found.update(re.findall(r'<a\s+(?:id|name)="([^"]+)"', raw))
                heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", raw)
                if heading and not fence:
                    base = slug(heading.group(1))
                    count = seen.get(base, 0)
                    seen[base] = count + 1
                    found.add(base if count == 0 else f"{base}-{count}")
        _anchors[path] = found
    return _anchors[path]


def main():
    os.chdir(ROOT)
    files, dirs = set(), set()
    for full in source_files():
        rel = os.path.relpath(full, ROOT)
        files.add(rel)
        parts = rel.split(os.sep)
        for k in range(1, len(parts)):
            dirs.add("/".join(parts[:k]))
    # Folder names below the roots: the first part of a tail citation must be one of them.
    folder_names = {d.split("/")[-1] for d in dirs if d.split("/")[0] in ROOTED and "/" in d}
    tails = {"/".join(p.split("/")[k:]) for p in files | dirs for k in range(len(p.split("/")))}
    pinned, problems = [], []
    rendered = set()  # Markdown that rustdoc renders (include_str!), whose links it checks
    for rel in files:
        if rel.endswith(".rs"):
            with open(rel, encoding="utf-8", errors="replace") as f:
                for included in INCLUDED.findall(f.read()):
                    rendered.add(os.path.normpath(os.path.join(os.path.dirname(rel), included)))

    def check_anchor(where, target, frag, cited):
        if frag not in anchors(target):
            problems.append(f"{where}: `{cited}`: no heading or <a id> \"{frag}\" in {target}")

    for rel in sorted(files):
        for line, text in texts(rel):
            for m in CITATION.finditer(text):
                path, frag, rev = m.group("path"), m.group("frag"), m.group("rev")
                after = text[m.end():m.end() + 1]
                if after and after in "<{$(":  # a template or a call, not a path
                    continue
                path = re.sub(r"^(\.\.?/)+", "", path).rstrip(".")
                first = path.split("/")[0]
                where = f"{rel}:{line}"
                if rev:
                    pinned.append((where, rev, path))
                    continue
                if first in ROOTED:
                    if any(ch in path for ch in "*?"):
                        ok = bool(glob.glob(path, recursive=True))
                    else:
                        ok = os.path.exists(path)
                    target = path
                elif first in folder_names and (
                        path.endswith("/") or path.rsplit(".", 1)[-1] in FILE_EXTENSIONS):
                    ok = path.rstrip("/") in tails
                    target = next((f for f in sorted(files) if f.endswith("/" + path)), None)
                else:
                    continue
                if not ok:
                    problems.append(f"{where}: `{path}` does not exist")
                elif frag and target and target.endswith(".md") and os.path.isfile(target):
                    check_anchor(where, target, frag[1:], path + frag)
            if rel.endswith(".md") and rel not in rendered:
                for m in MARKDOWN_LINK.finditer(text):
                    link = m.group(1) or m.group(2)
                    if re.match(r"[A-Za-z][\w+.-]*:", link):  # https:, mailto:
                        continue
                    path, _, frag = link.partition("#")
                    target = os.path.normpath(os.path.join(os.path.dirname(rel), path)) \
                        if path else rel
                    if not os.path.exists(target):
                        problems.append(f"{where}: link `{link}` leads to no file")
                    elif frag and target.endswith(".md"):
                        check_anchor(where, target, frag, link)

    if pinned:
        # One git process for every pinned citation; a commit git lacks (a shallow clone)
        # cannot be checked and is let through.
        query = "".join(f"{rev}^{{commit}}\n{rev}:{path.rstrip('/')}\n" for _, rev, path in pinned)
        try:
            answer = subprocess.run(["git", "cat-file", "--batch-check"], input=query,
                                    capture_output=True, text=True, check=True).stdout
            lines = answer.splitlines()
            for k, (where, rev, path) in enumerate(pinned):
                has_commit = not lines[2 * k].endswith("missing")
                if has_commit and lines[2 * k + 1].endswith("missing"):
                    problems.append(f"{where}: `{rev}:{path}` does not exist at {rev}")
        except (OSError, subprocess.CalledProcessError):
            pass

    if problems:
        print("check-paths: cited paths that do not exist (fix the citation, or pin a path "
              "that was removed to a commit that had it, as `<commit>:<path>`):",
              file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        sys.exit(1)
    print(f"check-paths: every path cited in {len(files)} files exists")


main()
