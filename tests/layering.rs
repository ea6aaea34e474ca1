//! The crate's folders depend on each other one way only, and code inside the crate names
//! what it uses by the defining module's path, never through the crate root's re-exports.
//!
//! Layers, lowest first (a module may use only modules of a strictly lower layer, except
//! that the vocabulary of layer 0 — the name type and the errors that name it — is one
//! layer whose modules may use each other):
//!
//! | layer | modules |
//! |---|---|
//! | 0 | `error`, `name`, `kind`, `random`, `history` |
//! | 2 | `options` |
//! | 3 | `store`, `metrics` |
//! | 4 | `watch` |
//! | 5 | `lock`, `fence` |
//! | 6 | `campaign` |
//! | 7 | `election` |
//! | 8 | `manager` |
//! | 9 | `testing` |
//!
//! `lib.rs` only declares and re-exports, `guide` is documentation only; the `mongolock`
//! binary uses the public API.
//!
//! And the map stays true: every file is named in `guide::architecture`, and in its folder's
//! file table where there is one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const LAYERS: &[(&str, u8)] = &[
    ("error", 0),
    ("random", 0),
    ("name", 0),
    ("kind", 0),
    ("history", 0),
    ("options", 2),
    ("store", 3),
    ("metrics", 3),
    ("watch", 4),
    ("lock", 5),
    ("fence", 5),
    ("campaign", 6),
    ("election", 7),
    ("manager", 8),
    ("testing", 9),
    ("guide", 10),
];

fn layer(module: &str) -> Option<u8> {
    LAYERS
        .iter()
        .find(|(name, _)| *name == module)
        .map(|(_, layer)| *layer)
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// Every `crate::first_segment` named in code (comments and doc comments are skipped: they
/// may link to anything).
fn crate_references(source: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in source.lines() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                names.push(name);
            }
            rest = after;
        }
        // `use crate::{a::X, b::Y}` groups.
        if let Some(group) = code.trim_start().strip_prefix("use crate::{") {
            for item in group.split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    names.push(name);
                }
            }
        }
    }
    names
}

#[test]
fn lower_layers_never_import_higher_ones() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut violations = BTreeMap::new();
    let mut checked = 0;
    for file in &files {
        let relative = file.strip_prefix(&src).expect("under src/");
        let first = relative
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .unwrap_or_default();
        let module = first.trim_end_matches(".rs");
        if module == "lib" || module == "bin" {
            continue;
        }
        let Some(own) = layer(module) else {
            violations.insert(
                relative.display().to_string(),
                format!("module `{module}` has no layer; add it to LAYERS"),
            );
            continue;
        };
        let source = std::fs::read_to_string(file).expect("a readable source file");
        if source.contains("super::super::") {
            violations.insert(
                relative.display().to_string(),
                "reaches two folders up with `super::super::`; name the module by its crate path"
                    .to_owned(),
            );
        }
        for name in crate_references(&source) {
            checked += 1;
            let problem = match layer(&name) {
                None => Some(format!(
                    "uses `crate::{name}`, a crate-root re-export; import it from its defining module"
                )),
                Some(_) if name == module => None,
                Some(0) if own == 0 => None,
                Some(theirs) if theirs >= own => Some(format!(
                    "module `{module}` (layer {own}) uses `crate::{name}` (layer {theirs})"
                )),
                Some(_) => None,
            };
            if let Some(problem) = problem {
                violations.insert(format!("{}: {name}", relative.display()), problem);
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} crate paths found: is the scan broken?"
    );
    assert!(
        violations.is_empty(),
        "layering violations:\n{}",
        violations
            .iter()
            .map(|(place, problem)| format!("  {place}: {problem}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_scan_sees_what_it_must_reject() {
    let refs = crate_references(
        "use crate::lock::Lock;\nuse crate::{LockName, store::X};\n/// [`A`](crate::manager::A)\n",
    );
    assert_eq!(refs, ["lock", "LockName", "store"]);
}

/// A newcomer finds every file from the docs: each source file is named in
/// `guide::architecture`, and in its folder's file table where the folder's `mod.rs` keeps
/// one (`| file | holds |`).
#[test]
fn every_file_is_named_in_the_architecture_guide_and_its_folders_table() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let read = |path: &Path| std::fs::read_to_string(path).expect("a source file is readable");
    let guide = read(&src.join("guide/architecture.md"));
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut missing = Vec::new();
    for path in &files {
        let relative = path.strip_prefix(&src).expect("found under src/");
        let file = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let name = format!("`{file}`");
        if relative.starts_with("guide") || relative == Path::new("lib.rs") {
            continue;
        }
        // By itself, or under its folder (`cli/args.rs`).
        if !guide.contains(&name) && !guide.contains(&format!("/{file}`")) {
            missing.push(format!(
                "guide::architecture does not name {}",
                relative.display()
            ));
        }
        let table = path.with_file_name("mod.rs");
        if name != "`mod.rs`" && table.exists() {
            let table_text = read(&table);
            if table_text.contains("| file | holds |") && !table_text.contains(&name) {
                missing.push(format!(
                    "{} does not name {name} in its file table",
                    table.strip_prefix(&src).unwrap_or(&table).display()
                ));
            }
        }
    }
    assert!(
        !files.is_empty(),
        "no source file found under {}",
        src.display()
    );
    assert!(missing.is_empty(), "{missing:#?}");
}
