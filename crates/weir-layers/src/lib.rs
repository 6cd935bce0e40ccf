//! The layering check: each crate's `tests/layers.rs` writes down the floors of its
//! modules, and this crate reads the crate's sources and fails on every import that runs
//! upward (and on any circle of files importing each other).
//!
//! Why floors and not only "no cycles": a cycle check passes as long as nothing closes a
//! loop, so a leaf that starts importing the engine goes unnoticed until something else
//! makes the loop — and then the error names the innocent edge. Floors say where a type
//! belongs before the loop exists: when a low module needs something a higher one
//! defines, the type moves down. One copy of the scanner serves every crate (weir-policy,
//! weir-gateway and the Python bindings each run it from their own `tests/layers.rs`).
//!
//! ## The rule
//!
//! A crate's modules (the top-level `mod`s of `lib.rs` / `main.rs`; a folder's files
//! belong to its module) are put on [`Floor`]s, lowest first. An import from module `a`
//! to module `b` is allowed when
//! - `a` and `b` are the same module (a folder's files may import each other), or
//! - `b`'s floor is below `a`'s, or
//! - both are on the same floor and that floor is [`Floor::open`] (leaves may import
//!   leaves; a closed floor — e.g. the policies — keeps its modules independent).
//!
//! The crate root (`lib.rs` / `main.rs`) declares and re-exports everything: it is above
//! every floor, and imports of it (`crate::__block_on`) are not counted. Every other import
//! is an [`Allowed`] exception, with its reason, or a failure naming `file:line: from →
//! to`. An exception that no longer happens fails too, so the list only shrinks.
//!
//! ## What counts as an import
//!
//! Every path that starts at `crate::`, `super::` or `self::` in code (inside `use` trees
//! too, one level of braces), and a bare `use child::…` of a module's own child, resolved
//! to the file that defines the deepest module it names. Comments, string and character
//! literals do not count, nor do `mod x;` declarations (containment, not an import). Test
//! code is left out: a `#[cfg(test)] mod x { … }` block, and the file of a
//! `#[cfg(test)] mod x;` with everything under it. A unit test may build a whole config
//! to test a leaf; the floors are about the code that ships.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One floor: its name (for messages) and the top-level modules on it.
#[derive(Debug, Clone, Copy)]
pub struct Floor {
    /// What the floor is, in a word or two.
    pub name: &'static str,
    /// The top-level modules on it (`"ratelimit"` covers `ratelimit/*.rs`).
    pub modules: &'static [&'static str],
    /// Whether modules on this floor may import each other (cycles are still refused).
    pub open: bool,
}

impl Floor {
    /// A floor whose modules may import each other (the leaves).
    pub const fn open(name: &'static str, modules: &'static [&'static str]) -> Floor {
        Floor {
            name,
            modules,
            open: true,
        }
    }

    /// A floor whose modules may not import each other.
    pub const fn closed(name: &'static str, modules: &'static [&'static str]) -> Floor {
        Floor {
            name,
            modules,
            open: false,
        }
    }
}

/// An upward import tolerated for now, with why (files relative to `src/`).
#[derive(Debug, Clone, Copy)]
pub struct Allowed {
    /// The importing file, e.g. `quota/service.rs`.
    pub from: &'static str,
    /// The imported file, e.g. `policy.rs`.
    pub to: &'static str,
    /// Why it is tolerated and when it goes.
    pub why: &'static str,
}

/// One import: the file (relative to `src/`), its line, the file it reaches.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Import {
    /// The importing file.
    pub file: String,
    /// 1-based line of the path in it.
    pub line: usize,
    /// The file that defines the module the path names.
    pub to: String,
}

/// [`check`] on the `src/` folder of the crate whose manifest folder is `manifest_dir`
/// (`env!("CARGO_MANIFEST_DIR")` in that crate's `tests/layers.rs`).
pub fn check_crate(manifest_dir: &str, floors: &[Floor], allowed: &[Allowed]) {
    check(&Path::new(manifest_dir).join("src"), floors, allowed);
}

/// Checks the crate whose sources are `src`: every top-level module is on exactly one
/// floor, no import runs upward unless allowed (and every allowance is used), no files
/// import each other in a circle. Panics listing every problem.
pub fn check(src: &Path, floors: &[Floor], allowed: &[Allowed]) {
    let imports = imports(src);
    assert!(
        imports.len() > 5,
        "read the sources under {}: {imports:?}",
        src.display()
    );
    let mut problems = floor_problems(&imports, &modules(src), floors, allowed);
    if let Some(c) = cycle(&graph(&imports)) {
        problems.push(format!("import cycle: {}", c.join(" -> ")));
    }
    if !problems.is_empty() {
        panic!(
            "{} layering problem(s) in {} (floors are in this crate's tests/layers.rs):\n{}",
            problems.len(),
            src.display(),
            problems.join("\n")
        );
    }
}

/// The top-level modules that have a file under `src`.
fn modules(src: &Path) -> BTreeSet<String> {
    files(src)
        .iter()
        .filter_map(|f| module_of(src, f).first().cloned())
        .collect()
}

/// The problems of `imports` against `floors` and `allowed` (no cycle check).
pub fn floor_problems(
    imports: &[Import],
    modules: &BTreeSet<String>,
    floors: &[Floor],
    allowed: &[Allowed],
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut floor_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, f) in floors.iter().enumerate() {
        for m in f.modules {
            if floor_of.insert(m, i).is_some() {
                problems.push(format!("module {m} is on two floors"));
            }
            if !modules.contains(*m) {
                problems.push(format!(
                    "floor {:?} names {m}, which is not a module",
                    f.name
                ));
            }
        }
    }
    for m in modules {
        if !floor_of.contains_key(m.as_str()) {
            problems.push(format!("module {m} is on no floor: add it to one"));
        }
    }
    let mut used = vec![false; allowed.len()];
    for i in imports {
        let (Some(a), Some(b)) = (top(&i.file), top(&i.to)) else {
            continue; // the crate root, or an import of it
        };
        if a == b {
            continue;
        }
        let (Some(&fa), Some(&fb)) = (floor_of.get(a), floor_of.get(b)) else {
            continue; // reported above
        };
        if fb < fa || (fb == fa && floors[fa].open) {
            continue;
        }
        if let Some(k) = allowed
            .iter()
            .position(|x| x.from == i.file && x.to == i.to)
        {
            used[k] = true;
            continue;
        }
        let how = if fa == fb {
            format!(
                "both on floor {:?}, whose modules stay independent",
                floors[fa].name
            )
        } else {
            format!(
                "floor {:?} imports floor {:?} above it",
                floors[fa].name, floors[fb].name
            )
        };
        problems.push(format!(
            "{}:{}: {} → {} ({how})",
            i.file, i.line, i.file, i.to
        ));
    }
    for (x, u) in allowed.iter().zip(used) {
        if !u {
            problems.push(format!(
                "allowed import {} → {} no longer happens (or is no longer upward): remove it from the list",
                x.from, x.to
            ));
        }
    }
    problems
}

/// The top-level module of a file (`None` for the crate root).
fn top(file: &str) -> Option<&str> {
    if matches!(file, "lib.rs" | "main.rs") {
        return None;
    }
    let first = file.split('/').next()?;
    Some(first.strip_suffix(".rs").unwrap_or(first))
}

fn files(src: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
            .map(|e| e.expect("directory entry").path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(src, &mut out);
    out
}

/// The module path of a file: `src/ratelimit/layer.rs` → `["ratelimit", "layer"]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file
        .strip_prefix(src)
        .expect("under src")
        .with_extension("");
    let mut m: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    let root = m.len() == 1 && matches!(m[0].as_str(), "lib" | "main");
    if root || m.last().is_some_and(|l| l == "mod") {
        m.pop();
    }
    m
}

/// Every import of the crate under `src`, test code left out (see the crate docs).
pub fn imports(src: &Path) -> Vec<Import> {
    let files = files(src);
    let modules: BTreeMap<Vec<String>, String> = files
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(src).expect("under src");
            (module_of(src, f), rel.to_string_lossy().replace('\\', "/"))
        })
        .collect();
    let mut texts = BTreeMap::new();
    let mut test_only: Vec<Vec<String>> = Vec::new();
    for f in &files {
        let here = module_of(src, f);
        let text = std::fs::read_to_string(f)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", f.display()));
        let (code, tests) = without_tests(&code(&text));
        test_only.extend(tests.into_iter().map(|t| {
            let mut p = here.clone();
            p.push(t);
            p
        }));
        texts.insert(here, code);
    }
    let mut out = Vec::new();
    for (here, code) in &texts {
        if test_only.iter().any(|t| here.starts_with(t)) {
            continue;
        }
        let name = &modules[here];
        for (line, p) in paths(code, here) {
            let target = (0..=p.len()).rev().find_map(|n| modules.get(&p[..n]));
            if let Some(t) = target
                && t != name
                && !matches!(t.as_str(), "lib.rs" | "main.rs")
            {
                out.push(Import {
                    file: name.clone(),
                    line,
                    to: t.clone(),
                });
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Code without comments, string and character literals (each replaced by nothing or an
/// empty literal); line breaks are kept, so offsets still give line numbers.
pub fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    // Keeps the line breaks of a skipped span.
    let skip = |out: &mut String, from: usize, to: usize| {
        out.extend(text[from..to].chars().filter(|&c| c == '\n'));
    };
    while i < b.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').map_or(b.len(), |n| i + n);
            i = end;
        } else if rest.starts_with("/*") {
            // Block comments nest in Rust.
            let (mut depth, mut j) = (0usize, i);
            while j < b.len() {
                if text[j..].starts_with("/*") {
                    depth += 1;
                    j += 2;
                } else if text[j..].starts_with("*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            skip(&mut out, i, j.min(b.len()));
            i = j.min(b.len());
        } else if let Some(hashes) = raw_string_at(text, i) {
            // r"…", r#"…"#, br#"…"#: up to the quote and the same number of hashes.
            let open = i + rest.find('"').expect("raw string quote") + 1;
            let close = format!("\"{}", "#".repeat(hashes));
            let end = text[open..]
                .find(&close)
                .map_or(b.len(), |n| open + n + close.len());
            out.push_str("\"\"");
            skip(&mut out, i, end);
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            skip(&mut out, i, j.min(b.len()));
            i = (j + 1).min(b.len());
        } else if b[i] == b'\'' {
            // A character literal (`'"'`, `'\''`, `'\u{7f}'`), or a lifetime / label.
            let end = if b.get(i + 1) == Some(&b'\\') {
                text[i + 3..].find('\'').map(|n| i + 3 + n + 1)
            } else {
                let c = rest[1..].chars().next().map_or(0, char::len_utf8);
                (b.get(i + 1 + c) == Some(&b'\'')).then_some(i + 2 + c)
            };
            match end {
                Some(e) => {
                    out.push_str("' '");
                    i = e;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let c = rest.chars().next().expect("not empty");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// At a raw string literal (`r"`, `r#"`, `br"`...): its number of hashes.
fn raw_string_at(text: &str, i: usize) -> Option<usize> {
    let b = text.as_bytes();
    if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') {
        return None;
    }
    let rest = text[i..].strip_prefix('b').unwrap_or(&text[i..]);
    let rest = rest.strip_prefix('r')?;
    let hashes = rest.len() - rest.trim_start_matches('#').len();
    rest[hashes..].starts_with('"').then_some(hashes)
}

/// Code without its `#[cfg(test)] mod x { … }` blocks (line breaks kept), and the names
/// of its `#[cfg(test)] mod x;` children (test-only files).
pub fn without_tests(code: &str) -> (String, Vec<String>) {
    const ATTR: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut children = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(ATTR) {
        out.push_str(&rest[..at]);
        let after = &rest[at + ATTR.len()..];
        // Further attributes (`#[allow(...)]`) between the cfg and the item.
        let mut item = after.trim_start();
        while item.starts_with("#[") {
            match item.find(']') {
                Some(e) => item = item[e + 1..].trim_start(),
                None => break,
            }
        }
        let item_body = item
            .strip_prefix("pub(crate) ")
            .or_else(|| item.strip_prefix("pub "))
            .unwrap_or(item);
        let Some(m) = item_body.strip_prefix("mod ") else {
            out.push_str(ATTR);
            rest = after;
            continue;
        };
        let name: String = m
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let tail = m.trim_start()[name.len()..].trim_start();
        let consumed = code.len() - tail.len();
        if let Some(after_semi) = tail.strip_prefix(';') {
            children.push(name);
            out.extend(
                code[code.len() - rest.len() + at..consumed]
                    .chars()
                    .filter(|&c| c == '\n'),
            );
            rest = after_semi;
        } else if tail.starts_with('{') {
            let mut depth = 0usize;
            let mut end = tail.len();
            for (k, c) in tail.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = k + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let start = code.len() - rest.len() + at;
            out.extend(code[start..consumed + end].chars().filter(|&c| c == '\n'));
            rest = &tail[end..];
        } else {
            out.push_str(ATTR);
            rest = after;
        }
    }
    out.push_str(rest);
    (out, children)
}

/// Every path in `code` that starts at `crate`, `super` or `self`, or a bare `use x::`
/// (relative to the module itself, 2018 paths), as `(line, absolute module path)`; the
/// deepest existing module is resolved by the caller.
pub fn paths(code: &str, here: &[String]) -> Vec<(usize, Vec<String>)> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut roots: Vec<(usize, &str)> = Vec::new();
    for root in ["crate::", "super::", "self::"] {
        roots.extend(code.match_indices(root).map(|(i, _)| (i, root)));
    }
    // `use x::…`: a child of this module (anything else resolves to nothing deeper).
    for (i, _) in code.match_indices("use ") {
        let at = i + 4;
        if !code[..i].chars().last().is_some_and(ident)
            && !["crate::", "super::", "self::", "::"]
                .iter()
                .any(|r| code[at..].trim_start().starts_with(r))
        {
            roots.push((at, ""));
        }
    }
    roots.sort();
    for (at, root) in roots {
        if !root.is_empty() && code[..at].chars().last().is_some_and(ident) {
            continue;
        }
        let line = code[..at].matches('\n').count() + 1;
        let from = at + root.len();
        // `a::b::{c, d::e}`: one level of braces, enough for these crates.
        let tail: String = code[from..]
            .chars()
            .take_while(|&c| ident(c) || ":{}, \n\t\r".contains(c))
            .collect();
        let (prefix, group) = match tail.find('{') {
            Some(b) => (&tail[..b], tail[b + 1..].split('}').next().unwrap_or("")),
            None => (tail.split(',').next().unwrap_or(""), ""),
        };
        let mut abs: Vec<String> = match root {
            "crate::" => Vec::new(),
            "super::" => here[..here.len().saturating_sub(1)].to_vec(),
            _ => here.to_vec(),
        };
        for seg in prefix.split("::").map(str::trim) {
            if seg.is_empty() || !seg.chars().all(ident) {
                break;
            }
            match seg {
                "super" => {
                    abs.pop();
                }
                "self" => {}
                s => abs.push(s.to_string()),
            }
        }
        out.push((line, abs.clone()));
        for item in group.split(',') {
            let mut p = abs.clone();
            p.extend(
                item.split("::")
                    .map(str::trim)
                    .filter(|x| !x.is_empty() && x.chars().all(ident))
                    .map(String::from),
            );
            if p != abs {
                out.push((line, p));
            }
        }
    }
    out
}

/// The file graph of some imports.
pub fn graph(imports: &[Import]) -> BTreeMap<String, BTreeSet<String>> {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for i in imports {
        g.entry(i.file.clone()).or_default().insert(i.to.clone());
    }
    g
}

/// A cycle through the graph, if any (depth-first search, white/grey/black).
pub fn cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
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
                    let i = stack.iter().position(|x| x == m).expect("on the stack");
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

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn paths_resolve_crate_super_self_and_groups() {
        let here = s(&["ratelimit", "service"]);
        let p = paths(
            "use super::layer::{Mode, Scope};\nfn f() { crate::store::x(); }",
            &here,
        );
        assert!(p.contains(&(1, s(&["ratelimit", "layer"]))));
        assert!(p.contains(&(1, s(&["ratelimit", "layer", "Mode"]))));
        assert!(p.contains(&(2, s(&["store", "x"]))));
        let p = paths("use super::super::a::B;", &s(&["x", "y", "z"]));
        assert!(p.contains(&(1, s(&["x", "a", "B"]))));
        let p = paths("pub use layer::KeyPart;\nuse std::fmt;", &s(&["ratelimit"]));
        assert!(p.contains(&(1, s(&["ratelimit", "layer", "KeyPart"]))));
    }

    #[test]
    fn comments_strings_and_chars_are_not_code() {
        let c = code(
            "// crate::a\nlet x = \"crate::b\"; /* crate::c\n */ let q = b'\"'; crate::d::f();\nlet r = r#\"crate::e \"quoted\" \"#; 'a: loop {}\n",
        );
        assert!(!c.contains("crate::a") && !c.contains("crate::b") && !c.contains("crate::c"));
        assert!(!c.contains("crate::e"), "{c}");
        assert!(c.contains("crate::d::f()"), "{c}");
        assert_eq!(c.matches('\n').count(), 4, "line breaks kept: {c}");
        assert!(c.contains("'a: loop"), "a label is code: {c}");
    }

    #[test]
    fn test_code_is_left_out() {
        let (c, kids) = without_tests(
            "use crate::a;\n#[cfg(test)]\nmod tests {\n use crate::b;\n fn f() { {} }\n}\n#[cfg(test)]\nmod more;\nuse crate::c;\n",
        );
        assert!(c.contains("crate::a") && c.contains("crate::c") && !c.contains("crate::b"));
        assert_eq!(kids, s(&["more"]));
        assert_eq!(c.matches('\n').count(), 9, "line breaks kept: {c:?}");
    }

    #[test]
    fn upward_imports_and_stale_allowances_are_named() {
        const FLOORS: &[Floor] = &[
            Floor {
                name: "leaves",
                modules: &["a", "b"],
                open: true,
            },
            Floor {
                name: "policies",
                modules: &["p", "q"],
                open: false,
            },
            Floor {
                name: "top",
                modules: &["t"],
                open: false,
            },
        ];
        let imp = |file: &str, line, to: &str| Import {
            file: file.into(),
            line,
            to: to.into(),
        };
        let modules: BTreeSet<String> = s(&["a", "b", "p", "q", "t"]).into_iter().collect();
        let ok = [
            imp("a.rs", 1, "b.rs"),
            imp("p/x.rs", 2, "p/y.rs"),
            imp("t.rs", 3, "p/mod.rs"),
        ];
        assert!(floor_problems(&ok, &modules, FLOORS, &[]).is_empty());
        let bad = [imp("a.rs", 7, "t.rs"), imp("p/x.rs", 9, "q/mod.rs")];
        let p = floor_problems(&bad, &modules, FLOORS, &[]);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].starts_with("a.rs:7: a.rs → t.rs"), "{p:?}");
        assert!(p[1].starts_with("p/x.rs:9: p/x.rs → q/mod.rs"), "{p:?}");
        let allow = [
            Allowed {
                from: "a.rs",
                to: "t.rs",
                why: "test",
            },
            Allowed {
                from: "b.rs",
                to: "t.rs",
                why: "stale",
            },
        ];
        let p = floor_problems(&bad[..1], &modules, FLOORS, &allow);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("b.rs → t.rs no longer happens"), "{p:?}");
        let p = floor_problems(&[], &modules, &FLOORS[..2], &[]);
        assert!(
            p.iter().any(|x| x.contains("module t is on no floor")),
            "{p:?}"
        );
    }

    #[test]
    fn cycles_are_found() {
        let mut g = BTreeMap::new();
        g.insert("a.rs".to_string(), BTreeSet::from(["b.rs".to_string()]));
        g.insert("b.rs".to_string(), BTreeSet::from(["a.rs".to_string()]));
        assert!(cycle(&g).is_some());
        g.remove("b.rs");
        assert!(cycle(&g).is_none());
    }
}
