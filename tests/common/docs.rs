//! The documentation as the tests read it: a section by heading, its code blocks and their
//! shell commands, the README's examples.

use std::path::Path;

/// The section of the repository's Markdown file `rel` under the heading line `heading`
/// (`"## Routes"`), without that line, up to the next heading of the same or a higher level
/// (lines starting with '#' inside code blocks are comments, not headings).
pub fn doc_section(rel: &str, heading: &str) -> String {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"));
    let level = heading.len() - heading.trim_start_matches('#').len();
    let mut lines = text.lines();
    assert!(
        lines.any(|l| l == heading),
        "{rel} has no heading {heading:?}"
    );
    let mut out = String::new();
    let mut fence = false;
    for line in lines {
        if line.starts_with("```") {
            fence = !fence;
        }
        let hashes = line.len() - line.trim_start_matches('#').len();
        if !fence && (1..=level).contains(&hashes) && line[hashes..].starts_with(' ') {
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The fenced code blocks of a Markdown text, in order: (language, content).
pub fn code_blocks(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in text.lines() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(lang)) => open = Some((lang.trim().to_string(), String::new())),
            (Some(_), Some(_)) => out.push(open.take().unwrap()),
            (Some((_, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

/// The commands of a shell code block as a user pastes them: lines continued with a trailing
/// backslash joined, empty and comment-only lines left out (a comment after a command stays:
/// the shell ignores it).
pub fn shell_commands(block: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        if current.is_empty() && (line.trim().is_empty() || line.trim_start().starts_with('#')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current).trim().to_string());
            }
        }
    }
    assert!(
        current.is_empty(),
        "a command continued past its block: {current}"
    );
    out
}

/// The `toml` code blocks of the guide's "TLS and SASL" section (docs/operations.md), in
/// order (the secured tests run the documented configurations).
pub fn readme_examples() -> Vec<String> {
    code_blocks(&doc_section("docs/operations.md", "## TLS and SASL"))
        .into_iter()
        .filter(|(lang, _)| lang == "toml")
        .map(|(_, body)| body)
        .collect()
}
