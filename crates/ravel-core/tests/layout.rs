//! The layer order of lib.rs's `# Layout` block, checked against the code: every `crate::<top>`
//! path a module's files use (in `use` lines, grouped `use crate::{a, b::c}` included, and
//! inline `crate::x::...` paths; comments, doc lines and `#[cfg(test)]` modules left out) must
//! name a module listed above it, so the order is written once (in lib.rs) and kept true here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The module names of the `# Layout` block's bullets (`- [`name`]: ...` or `- `name`...`),
/// bottom-up.
fn layout_order(lib_rs: &str) -> Vec<String> {
    let mut order = Vec::new();
    let mut inside = false;
    for line in lib_rs.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            if inside {
                break;
            }
            continue;
        };
        let doc = doc.trim();
        if doc.starts_with('#') {
            inside = doc == "# Layout";
            continue;
        }
        if !inside {
            continue;
        }
        if let Some(rest) = doc.strip_prefix("- ") {
            let rest = rest.trim_start_matches('[');
            if let Some(name) = rest.strip_prefix('`').and_then(|r| r.split('`').next()) {
                order.push(name.to_string());
            }
        }
    }
    order
}

/// The names lib.rs re-exports at the crate root (`pub use stats::{RunningStats, Stats};`), each
/// with the module it comes from: `crate::Task` is a path into `task`.
fn root_reexports(lib_rs: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for line in code_of(lib_rs).lines() {
        let Some(path) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let path = path.trim_end_matches(';');
        let Some((module, names)) = path.split_once("::") else {
            continue;
        };
        let names = names.trim_start_matches('{').trim_end_matches('}');
        for name in names.split(',') {
            let name = name.rsplit("::").next().unwrap_or("").trim();
            if !name.is_empty() {
                map.insert(name.to_string(), module.to_string());
            }
        }
    }
    map
}

/// The code of a file without comments, doc lines and `#[cfg(test)]` modules.
fn code_of(source: &str) -> String {
    let mut code = String::new();
    for line in source.lines() {
        let line = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        code.push_str(line);
        code.push('\n');
    }
    // Drop each `#[cfg(test)] mod name { ... }` (balanced braces).
    while let Some(at) = code.find("#[cfg(test)]") {
        let after = &code[at + "#[cfg(test)]".len()..];
        let is_mod = after.trim_start().starts_with("mod ");
        let Some(open) = after.find(['{', ';']) else {
            break;
        };
        if !is_mod || after.as_bytes()[open] == b';' {
            // Not a test module: keep the item, drop only the attribute.
            code.replace_range(at..at + "#[cfg(test)]".len(), "");
            continue;
        }
        let start = at + "#[cfg(test)]".len() + open;
        let mut depth = 0usize;
        let mut end = code.len();
        for (i, c) in code[start..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = start + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        code.replace_range(at..end, "");
    }
    code
}

fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The top-level modules a file's code names through `crate::`, with the path as written.
fn crate_paths(code: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        // `crate` must be a whole word (not `ravel_crate::` or `$crate::`).
        let before = rest[..at].chars().next_back();
        let tail = &rest[at + "crate::".len()..];
        rest = tail;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let tail = tail.trim_start();
        if let Some(group) = tail.strip_prefix('{') {
            // use crate::{a, b::c, d::{e, f}}: the first name of each top-level entry.
            let mut depth = 0usize;
            let mut entry_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => entry_start = true,
                    c if c.is_whitespace() => {}
                    _ if entry_start && depth == 0 => {
                        entry_start = false;
                        let name = ident(&group[i..]);
                        if !name.is_empty() {
                            found.push((name.to_string(), format!("crate::{{{name}, ..}}")));
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident(tail);
            if !name.is_empty() {
                let shown: String = tail
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                found.push((name.to_string(), format!("crate::{shown}")));
            }
        }
    }
    found
}

/// Every violation: a file whose module imports one listed later (or not listed), and every
/// cycle among the modules. `files` maps a path under src to its source.
fn check(
    order: &[String],
    reexports: &BTreeMap<String, String>,
    files: &BTreeMap<String, String>,
) -> Vec<String> {
    let rank: BTreeMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let mut errors = Vec::new();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, source) in files {
        let top = path
            .split('/')
            .next()
            .unwrap_or(path)
            .trim_end_matches(".rs");
        if top == "lib" {
            continue;
        }
        let Some(&mine) = rank.get(top) else {
            errors.push(format!(
                "{path}: module `{top}` is not in lib.rs's Layout list"
            ));
            continue;
        };
        for (used, shown) in crate_paths(&code_of(source)) {
            let used = reexports.get(&used).cloned().unwrap_or(used);
            if used == top {
                continue;
            }
            edges
                .entry(top.to_string())
                .or_default()
                .insert(used.clone());
            match rank.get(used.as_str()) {
                None => errors.push(format!(
                    "{path}: imports `{shown}`, and `{used}` is not in lib.rs's Layout list"
                )),
                Some(&theirs) if theirs > mine => errors.push(format!(
                    "{path}: `{top}` imports `{shown}`, but `{used}` comes after `{top}` in \
                     lib.rs's Layout list"
                )),
                Some(_) => {}
            }
        }
    }
    // Cycles, by depth-first search (white / grey / black).
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
        errors: &mut Vec<String>,
    ) {
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            match state.get(next.as_str()).copied().unwrap_or(0) {
                0 => visit(next, edges, state, stack, errors),
                1 => {
                    let from = stack.iter().position(|n| n == next).unwrap_or(0);
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(next.clone());
                    errors.push(format!("import cycle: {}", cycle.join(" -> ")));
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(node.to_string(), 2);
    }
    let mut state = BTreeMap::new();
    for node in edges.keys() {
        if !state.contains_key(node) {
            visit(node, &edges, &mut state, &mut Vec::new(), &mut errors);
        }
    }
    errors
}

fn sources(dir: &Path, under: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, under, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(under).unwrap();
            let rel = rel.to_string_lossy().replace('\\', "/");
            out.insert(rel, std::fs::read_to_string(&path).unwrap());
        }
    }
}

#[test]
fn every_module_imports_only_modules_above_it_in_the_layout_list() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let order = layout_order(&lib);
    let mut files = BTreeMap::new();
    sources(&src, &src, &mut files);
    // Every top-level module is listed, once.
    let tops: BTreeSet<String> = files
        .keys()
        .map(|p| {
            p.split('/')
                .next()
                .unwrap()
                .trim_end_matches(".rs")
                .to_string()
        })
        .filter(|t| t != "lib")
        .collect();
    let listed: BTreeSet<String> = order.iter().cloned().collect();
    assert_eq!(
        listed.len(),
        order.len(),
        "a module listed twice: {order:?}"
    );
    assert_eq!(tops, listed, "the Layout list and src/ differ");
    let errors = check(&order, &root_reexports(&lib), &files);
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn the_checker_finds_a_later_import_and_a_cycle() {
    let lib = "//! Intro.\n//!\n//! # Layout\n//! Bottom-up.\n//! - [`low`]: below.\n\
               //!   continued.\n//! - `high` (feature `x`): above.\n//! # Other\n//! - `no`\n";
    let order = layout_order(lib);
    assert_eq!(order, ["low", "high"]);
    let file = |p: &str, s: &str| (p.to_string(), s.to_string());
    let none = BTreeMap::new();
    // Fine: high imports low, in a group, and comments or tests naming high do not count.
    let good: BTreeMap<_, _> = [
        file(
            "high/mod.rs",
            "use crate::{low::X, high::Y};\nfn f() { crate::low::g(); }\n",
        ),
        file(
            "low.rs",
            "//! crate::high::Z\n// use crate::high;\nfn g() {}\n\
             #[cfg(test)]\nmod tests {\n    use crate::high::Z;\n    fn t() { { } }\n}\n",
        ),
    ]
    .into_iter()
    .collect();
    assert_eq!(check(&order, &none, &good), Vec::<String>::new());
    // low imports high, inline inside a grouped use: a violation naming the file and path.
    let bad: BTreeMap<_, _> = [
        file("high/mod.rs", "use crate::low::X;\n"),
        file(
            "low.rs",
            "use std::fmt;\nuse crate::{\n    task,\n    high::deep::Z,\n};\n",
        ),
    ]
    .into_iter()
    .collect();
    let errors = check(&order, &none, &bad);
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("low.rs:") && e.contains("crate::{high, ..}")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("`task` is not in")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("import cycle")),
        "{errors:?}"
    );
    // An inline path is found too, and a name re-exported at the root counts as its module.
    let reexported = root_reexports("pub use high::{T, U};\npub use low::V;\n");
    assert_eq!(reexported["U"], "high");
    let inline: BTreeMap<_, _> = [file("low.rs", "fn f() -> crate::high::T { crate::U }\n")]
        .into_iter()
        .collect();
    let errors = check(&order, &reexported, &inline);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("crate::high::T"), "{errors:?}");
    assert!(errors[1].contains("`crate::U`"), "{errors:?}");
}
