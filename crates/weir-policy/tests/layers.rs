//! No circle of files importing each other inside weir-policy.
//!
//! Reads every `src/**/*.rs`, takes the module paths its code names — `use crate::…`,
//! `use super::…`, `use self::…` and `crate::…` paths in expressions; comments and
//! `mod x;` declarations (containment, not an import) do not count — resolves each to the
//! file that defines that module, and fails on any cycle, printing it. Run it alone with
//! `cargo test -p weir-policy --test layers -- --nocapture` to see the edges.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file: `src/ratelimit/layer.rs` → `["ratelimit", "layer"]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut m: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    if matches!(m.last().map(String::as_str), Some("mod" | "lib")) {
        m.pop();
    }
    m
}

/// Code without comments (line comments, doc comments, block comments).
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("//") {
            rest = r.find('\n').map_or("", |i| &r[i..]);
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.find("*/").map_or("", |i| &r[i + 2..]);
        } else if rest.starts_with('"') {
            // Skip string literals (they may contain `crate::`).
            let b = rest.as_bytes();
            let mut i = 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            rest = rest.get(i + 1..).unwrap_or("");
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// Every path that starts at `crate`, `super` or `self` (inside `use` trees too), as
/// absolute module paths (the deepest existing module is resolved later).
fn paths(code: &str, here: &[String], is_mod_file: bool) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // `use child::X` / `child::f()` of a module file: relative to the module itself.
    let mut code = code.to_string();
    if is_mod_file || here.is_empty() {
        code = code.replace("use ", "use self::");
    }
    let code = code.as_str();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let bytes: Vec<char> = code.chars().collect();
    let s: String = bytes.iter().collect();
    for root in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(i) = s[from..].find(root) {
            let at = from + i;
            from = at + root.len();
            if at > 0 && s[..at].chars().last().is_some_and(ident) {
                continue;
            }
            // `a::b::{c, d::e}`: expand one level of braces, enough for this crate.
            let tail: String = s[from..]
                .chars()
                .take_while(|&c| {
                    ident(c)
                        || c == ':'
                        || c == '{'
                        || c == '}'
                        || c == ','
                        || c == ' '
                        || c == '\n'
                })
                .collect();
            let (prefix, group) = match tail.find('{') {
                Some(b) => (&tail[..b], tail[b + 1..].split('}').next().unwrap_or("")),
                None => (tail.as_str(), ""),
            };
            let base: Vec<String> = prefix
                .split("::")
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect();
            let start: Vec<String> = match root {
                "crate::" => Vec::new(),
                // A `mod.rs` is its module; `super` of a leaf file is its folder's module.
                "super::" => here[..here.len().saturating_sub(1)].to_vec(),
                _ => here.to_vec(),
            };
            let mut abs = start.clone();
            abs.extend(base.iter().cloned());
            out.push(abs.clone());
            for item in group.split(',') {
                let mut p = abs.clone();
                p.extend(
                    item.split("::")
                        .map(str::trim)
                        .filter(|x| !x.is_empty() && x.chars().all(ident))
                        .map(String::from),
                );
                out.push(p);
            }
        }
    }
    out
}

fn edges() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let modules: BTreeMap<Vec<String>, String> = files
        .iter()
        .map(|f| {
            (
                module_of(&src, f),
                f.strip_prefix(&src).unwrap().display().to_string(),
            )
        })
        .collect();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let here = module_of(&src, f);
        let name = modules[&here].clone();
        let is_mod = f.file_name().is_some_and(|n| n == "mod.rs");
        let text = std::fs::read_to_string(f).unwrap();
        let set = g.entry(name.clone()).or_default();
        for p in paths(&code(&text), &here, is_mod) {
            // The deepest prefix that is a module file.
            let target = (0..=p.len())
                .rev()
                .find_map(|n| modules.get(&p[..n]))
                .cloned();
            if let Some(t) = target
                && t != name
                && t != "lib.rs"
            {
                set.insert(t);
            }
        }
    }
    g
}

/// A cycle through the graph, if any (depth-first search, white/grey/black).
fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let i = stack.iter().position(|x| x == m).unwrap();
                    let mut c = stack[i..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(m, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0
            && let Some(c) = visit(n, g, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

#[test]
fn no_file_imports_itself_through_others() {
    let g = edges();
    for (f, to) in &g {
        println!(
            "{f} -> {}",
            to.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    assert!(g.len() > 20, "read the sources: {g:?}");
    if let Some(c) = find_cycle(&g) {
        panic!("import cycle: {}", c.join(" -> "));
    }
}

#[test]
fn the_checker_sees_a_cycle() {
    let mut g = BTreeMap::new();
    g.insert("a.rs".to_string(), BTreeSet::from(["b.rs".to_string()]));
    g.insert("b.rs".to_string(), BTreeSet::from(["a.rs".to_string()]));
    assert!(find_cycle(&g).is_some());
    let here = vec!["ratelimit".to_string(), "service".to_string()];
    let p = paths("use super::layer::{Mode, Scope};", &here, false);
    assert!(p.contains(&vec!["ratelimit".to_string(), "layer".to_string()]));
}
