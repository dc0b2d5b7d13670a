//! The service crate's layer order, held: `src/lib.rs`'s Layout block lists the top-level
//! modules bottom-up, and every `crate::` path in a module's files must name a module listed
//! above it (or an item of the crate root). So there is no circle between modules, and a new
//! import against the data flow (Kafka -> ingest -> state -> api) fails here, naming the file
//! and the import. The order is read from the Layout block itself: it is written once.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The module names of a Layout block, bottom-up: its bullet lines "//! - `name`: ...".
fn layout_order(lib_rs: &str) -> Vec<String> {
    let block = lib_rs
        .split("//! # Layout")
        .nth(1)
        .expect("src/lib.rs has a `# Layout` block");
    block
        .lines()
        .skip(1) // the rest of the heading's line
        .take_while(|l| l.starts_with("//!"))
        .filter_map(|l| l.strip_prefix("//! - `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect()
}

/// The source without comments (line comments, doc comments and block comments), so that a
/// path named in prose is not an import. String literals are kept: none of ours holds
/// `crate::`.
fn strip_comments(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let (mut i, mut in_str) = (0, false);
    while i < b.len() {
        let c = b[i];
        if in_str {
            out.push(c);
            if c == b'\\' && i + 1 < b.len() {
                out.push(b[i + 1]);
                i += 2;
                continue;
            }
            in_str = c != b'"';
            i += 1;
        } else if c == b'"' {
            in_str = true;
            out.push(c);
            i += 1;
        } else if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            i = src[i..].find("*/").map_or(b.len(), |e| i + e + 2);
        } else if c == b'\'' && i + 2 < b.len() && b[i + 2] == b'\'' {
            // A char literal such as '"' (not a lifetime): copy it whole.
            out.extend_from_slice(&b[i..i + 3]);
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    // Only whole comments were cut (they start and end at ASCII bytes): still UTF-8.
    String::from_utf8(out).expect("comments end at ASCII bytes")
}

/// The first segments of every `crate::` path in `src` (grouped uses `crate::{a, b::c}`
/// give a and b).
fn crate_imports(src: &str) -> BTreeSet<String> {
    let code = strip_comments(src);
    let mut found = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue; // `ravel_core::...`-like names ending in "crate", or `$crate`
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group, up to its closing brace.
            let (mut depth, mut item_start) = (0usize, true);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && !c.is_whitespace() => {
                        item_start = false;
                        let name = ident(&group[i..]);
                        if !name.is_empty() {
                            found.insert(name);
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

/// Violations of `order` by `files` (top-level module, file name, source): an import of a
/// module at or after the importer's place, or of a name that is neither a listed module nor
/// one of `root_items`.
fn violations(
    order: &[String],
    root_items: &BTreeSet<String>,
    files: &[(String, String, String)],
) -> Vec<String> {
    let place = |m: &str| order.iter().position(|o| o == m);
    let mut out = Vec::new();
    for (module, file, src) in files {
        let Some(mine) = place(module) else {
            out.push(format!(
                "{file}: module `{module}` is not in the Layout block"
            ));
            continue;
        };
        for name in crate_imports(src) {
            if name == *module || root_items.contains(&name) {
                continue;
            }
            match place(&name) {
                Some(theirs) if theirs < mine => {}
                Some(_) => out.push(format!(
                    "{file}: `{module}` imports `crate::{name}`, which the Layout block lists \
                     after it (a module imports only modules above it)"
                )),
                None => out.push(format!(
                    "{file}: imports `crate::{name}`, neither a module of the Layout block nor \
                     an item of the crate root"
                )),
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_module_imports_only_modules_above_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let order = layout_order(&lib);
    assert!(order.len() >= 10, "the Layout block lists {order:?}");

    // The Layout block lists exactly the modules lib.rs declares.
    let declared: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| {
            let l = l.trim_start_matches("pub ");
            l.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(str::to_string)
        })
        .collect();
    let listed: BTreeSet<String> = order.iter().cloned().collect();
    assert_eq!(
        declared, listed,
        "lib.rs's `mod`s and its Layout block differ"
    );

    let root_items: BTreeSet<String> = strip_comments(&lib)
        .lines()
        .filter_map(|l| l.trim().split("fn ").nth(1))
        .map(|l| l.split(['<', '(']).next().unwrap().to_string())
        .collect();
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    let files: Vec<(String, String, String)> = paths
        .iter()
        .filter(|p| !p.ends_with("lib.rs") && !p.ends_with("main.rs"))
        .map(|p| {
            let rel = p.strip_prefix(&src).unwrap();
            let first = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy();
            let module = first.trim_end_matches(".rs").to_string();
            let text = std::fs::read_to_string(p).unwrap();
            (module, format!("src/{}", rel.display()), text)
        })
        .collect();
    assert!(files.len() > 40, "read {} files", files.len());
    let bad = violations(&order, &root_items, &files);
    assert!(
        bad.is_empty(),
        "imports against the layer order:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_checker_finds_an_upward_import_an_unknown_one_and_ignores_prose() {
    let lib = "//! # Layout\n//! - `base`: below.\n//! - `mid`: middle.\n//! - `top`: above.\n\nmod base;";
    let order = layout_order(lib);
    assert_eq!(order, ["base", "mid", "top"]);
    let roots: BTreeSet<String> = ["lock".to_string()].into();
    let file = |m: &str, src: &str| (m.to_string(), format!("{m}.rs"), src.to_string());
    let files = vec![
        // Fine: downward imports, a grouped use, a root item, prose and strings.
        file(
            "top",
            "use crate::{base::X, mid::{Y, Z}};\nfn f() { crate::lock(); }\n// crate::top::q\n",
        ),
        // Upward, in a grouped use over two lines.
        file("mid", "use crate::{\n    base,\n    top::Thing,\n};\n"),
        // An import of a module not in the block.
        file("base", "/* crate::top */ fn g() { crate::elsewhere::h(); }"),
    ];
    let bad = violations(&order, &roots, &files);
    assert_eq!(bad.len(), 2, "{bad:#?}");
    assert!(bad[0].contains("`mid` imports `crate::top`"), "{}", bad[0]);
    assert!(bad[1].contains("crate::elsewhere"), "{}", bad[1]);
}
