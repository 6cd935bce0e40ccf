//! `cargo xtask test --only tidy`: the repository carries no junk and its references resolve.
//!
//! A newcomer follows the links and paths the docs and comments give; each one that leads
//! nowhere costs them the trust in the rest. The checks, each reported as `FILE:LINE: what`:
//!
//! - **root**: every tracked file or directory at the repository root is in [`ROOT_ALLOWED`]
//!   (a stray `err` or `out.txt` committed by accident fails here).
//! - **links**: every relative markdown link `[x](path)` / `![x](path)` (and reference
//!   definition `[x]: path`) in a tracked `*.md` file names a tracked file or directory inside
//!   the repository; a `#anchor` must be a heading of the target (GitHub's slugs).
//! - **paths**: every repository path written in a `*.md` file, or in a comment of a `*.rs`,
//!   `*.toml`, `*.py`, `*.pyi` or `*.sh` file — a word starting with one of the tracked
//!   top-level directories, such as `crates/weir-core/src/lib.rs` or `docs/CONFIG.md` (globs
//!   `*` and `{a,b}` allowed) — exists; and no file names a document that lives outside the
//!   repository ([`OUTSIDE`]): the repository must carry its own reference. A bare
//!   document name such as `BENCHMARKS.md` must be the name of a tracked file.
//! - **headline**: the headline table of docs/BENCHMARKS.md (between its
//!   `<!-- headline:begin -->` and `<!-- headline:end -->` lines) is what
//!   `cargo xtask bench --report` renders from docs/perf-log/latest.tsv — the way
//!   `bench/tests/accuracy.rs` holds docs/ACCURACY.md to its generator.
//! - **crates**: every directory under `crates/` and `bindings/` has a row in README.md's
//!   crate table (the table whose header starts `| part |`), and every row naming a
//!   `crates/…` or `bindings/…` directory names one that exists.
//!
//! Code (as opposed to comments) is not scanned: string literals are data, and the tests of
//! this module hold counter-examples. Nor are the crates carried under `vendor/` (their
//! text is upstream's, paths in it are upstream's repository's); `vendor/README.md` is.

use crate::{Result, bench, root};
use std::collections::BTreeSet;
use std::process::Command;

/// Files and directories allowed at the repository root.
const ROOT_ALLOWED: &[&str] = &[
    ".cargo",
    ".ci",
    ".github",
    ".gitignore",
    "CHANGELOG.md",
    "Cargo.lock",
    "Cargo.toml",
    "LICENSE",
    "LICENSE-APACHE",
    "LICENSE-MIT",
    "README.md",
    "bench",
    "bindings",
    "crates",
    "docs",
    "examples",
    "fuzz",
    "rust-toolchain.toml",
    "rustfmt.toml",
    "vendor",
    "xtask",
];

/// Words naming documents that are not in the repository (matched as whole words).
const OUTSIDE: &[&str] = &["CONTRACT", "PRODUCT.md", "HOUSE_STYLE.md", "../shared"];

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Problem {
    pub(crate) file: String,
    pub(crate) line: usize,
    pub(crate) message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

/// The tracked files of the repository and a way to read them: the real one is git's
/// index plus the working tree; the tests give a map.
pub(crate) struct Tree<'a> {
    files: BTreeSet<String>,
    read: Reader<'a>,
}

/// Reads a tracked file's text (`None`: unreadable or not text).
type Reader<'a> = Box<dyn Fn(&str) -> Option<String> + 'a>;

impl<'a> Tree<'a> {
    pub(crate) fn new(
        files: impl IntoIterator<Item = String>,
        read: impl Fn(&str) -> Option<String> + 'a,
    ) -> Tree<'a> {
        Tree {
            files: files.into_iter().collect(),
            read: Box::new(read),
        }
    }

    /// A tracked file, or a directory holding one.
    fn exists(&self, path: &str) -> bool {
        let path = path.trim_end_matches('/');
        if path.is_empty() || self.files.contains(path) {
            return true;
        }
        let dir = format!("{path}/");
        self.files
            .range(dir.clone()..)
            .next()
            .is_some_and(|f| f.starts_with(&dir))
    }

    /// A path with `*` and `{a,b}` matches at least one tracked file or directory.
    fn matches(&self, pattern: &str) -> bool {
        expand_braces(pattern).iter().all(|p| {
            if p.contains('*') {
                let p = p.trim_end_matches('/');
                self.files
                    .iter()
                    .any(|f| glob(p, f) || ancestors(f).any(|d| glob(p, d)))
            } else {
                self.exists(p)
            }
        })
    }

    /// Some tracked file is called `name` (in any directory).
    fn has_file_named(&self, name: &str) -> bool {
        self.files
            .iter()
            .any(|f| f.rsplit('/').next() == Some(name))
    }

    /// The top-level directories (the prefixes that make a word a repository path).
    fn top_dirs(&self) -> BTreeSet<&str> {
        self.files
            .iter()
            .filter_map(|f| f.split_once('/').map(|(d, _)| d))
            .filter(|d| !d.starts_with('.'))
            .collect()
    }
}

/// `a/b/c` → `a/b`, `a`.
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    let mut p = path;
    std::iter::from_fn(move || {
        let i = p.rfind('/')?;
        p = &p[..i];
        Some(p)
    })
}

/// Runs every check on the repository; fails with the list of problems.
pub(crate) fn tidy() -> Result {
    let git = |args: &[&str]| -> Result<Vec<String>> {
        let out = Command::new("git")
            .args(args)
            .current_dir(root())
            .output()
            .map_err(|e| format!("cannot run git: {e}"))?;
        if !out.status.success() {
            return Err(format!("git {} failed", args.join(" ")));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .split('\0')
            .filter(|f| !f.is_empty())
            .map(str::to_owned)
            .collect())
    };
    // What a reader of this checkout sees: tracked files still in the working tree, and new
    // files not yet added (not ignored ones). The root rule looks at tracked files only.
    let tracked = git(&["ls-files", "-z"])?;
    let new = git(&["ls-files", "-z", "--others", "--exclude-standard"])?;
    let base = root();
    let present: Vec<String> = tracked
        .iter()
        .chain(&new)
        .filter(|f| base.join(f).exists())
        .cloned()
        .collect();
    let tree = Tree::new(present, move |f| std::fs::read_to_string(base.join(f)).ok());
    let mut problems = root_files(tracked.iter().map(String::as_str));
    problems.extend(check(&tree));
    if problems.is_empty() {
        return Ok(());
    }
    for p in &problems {
        eprintln!("{p}");
    }
    Err(format!("{} tidy problem(s)", problems.len()))
}

/// Every check over a tree.
pub(crate) fn check(tree: &Tree<'_>) -> Vec<Problem> {
    let mut problems = Vec::new();
    let top = tree.top_dirs();
    for f in &tree.files {
        let kind = Kind::of(f);
        if kind == Kind::Other || is_vendored(f) {
            continue;
        }
        let Some(text) = (tree.read)(f) else { continue };
        if kind == Kind::Markdown {
            problems.extend(links(tree, f, &text));
        }
        problems.extend(paths(tree, &top, f, &text, kind));
    }
    problems.extend(headline(tree));
    problems.extend(crate_table(tree));
    problems.sort();
    problems
}

/// Rule headline: the generated table of [`bench::DOC`] matches its source
/// [`bench::FIGURES`]. Checked when either file is in the tree.
fn headline(tree: &Tree<'_>) -> Vec<Problem> {
    let (doc_name, fig_name) = (bench::DOC, bench::FIGURES);
    let doc = tree
        .files
        .contains(doc_name)
        .then(|| (tree.read)(doc_name))
        .flatten();
    let figures = tree
        .files
        .contains(fig_name)
        .then(|| (tree.read)(fig_name))
        .flatten();
    let problem = |file: &str, line: usize, message: String| {
        vec![Problem {
            file: file.to_owned(),
            line,
            message,
        }]
    };
    let marked = |d: &String| d.contains(bench::BEGIN) || d.contains(bench::END);
    let (doc, figures) = match (doc, figures) {
        (Some(d), Some(f)) => (d, f),
        (None, Some(_)) => return problem(fig_name, 1, format!("{doc_name} is missing")),
        (Some(d), None) if marked(&d) => {
            return problem(
                doc_name,
                1,
                format!("the headline table's source {fig_name} is missing"),
            );
        }
        _ => return Vec::new(),
    };
    let table = match bench::headline(&figures) {
        Ok(t) => t,
        Err(e) => {
            // `docs/perf-log/latest.tsv:LINE: what` → that file and line.
            let line = e
                .strip_prefix(fig_name)
                .and_then(|r| r.strip_prefix(':'))
                .and_then(|r| r.split(':').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            return problem(fig_name, line, e);
        }
    };
    let line = doc
        .lines()
        .position(|l| l.contains(bench::BEGIN))
        .map_or(1, |i| i + 1);
    match bench::between(&doc) {
        Err(e) => problem(doc_name, line, e),
        Ok(committed) if committed != table => problem(
            doc_name,
            line,
            format!(
                "the headline table is stale (it is not what {fig_name} renders): \
                 run `cargo xtask bench --report`"
            ),
        ),
        Ok(_) => Vec::new(),
    }
}

/// Rule crates: README.md's crate table against the directories under `crates/` and
/// `bindings/`.
fn crate_table(tree: &Tree<'_>) -> Vec<Problem> {
    const README: &str = "README.md";
    const PARENTS: [&str; 2] = ["crates/", "bindings/"];
    let dirs: BTreeSet<String> = tree
        .files
        .iter()
        .filter_map(|f| {
            let parent = PARENTS.iter().find(|p| f.starts_with(*p))?;
            let (name, _) = f[parent.len()..].split_once('/')?;
            Some(format!("{parent}{name}"))
        })
        .collect();
    let Some(text) = (tree.read)(README) else {
        return Vec::new();
    };
    let problem = |line: usize, message: String| Problem {
        file: README.to_owned(),
        line,
        message,
    };
    // The table: from the header row `| part | …` to the first line not starting with `|`.
    let mut lines = text.lines().enumerate();
    let Some((header, _)) = lines
        .by_ref()
        .find(|(_, l)| l.trim_start().starts_with("| part |"))
    else {
        if dirs.is_empty() {
            return Vec::new();
        }
        return vec![problem(
            1,
            "has no crate table (a table whose header starts `| part |`)".into(),
        )];
    };
    let mut out = Vec::new();
    let mut rows = BTreeSet::new();
    for (i, line) in lines.take_while(|(_, l)| l.trim_start().starts_with('|')) {
        let cell = line
            .trim()
            .trim_start_matches('|')
            .split('|')
            .next()
            .unwrap_or("");
        let path = cell.trim().trim_matches('`').trim_end_matches('/');
        if !PARENTS.iter().any(|p| path.starts_with(p)) {
            continue;
        }
        if !dirs.contains(path) {
            out.push(problem(
                i + 1,
                format!("the crate table names {path}, which is not a directory here"),
            ));
        }
        rows.insert(path.to_owned());
    }
    for d in dirs.difference(&rows) {
        out.push(problem(
            header + 1,
            format!("{d} has no row in the crate table: add one (`{d}` | what it is)"),
        ));
    }
    out
}

/// A file of a third-party crate carried under `vendor/` (not the directory's own README).
fn is_vendored(file: &str) -> bool {
    file.strip_prefix("vendor/")
        .is_some_and(|rest| rest.contains('/'))
}

/// Rule root: tracked entries at the root not in the allow-list.
fn root_files<'a>(tracked: impl IntoIterator<Item = &'a str>) -> Vec<Problem> {
    let entries: BTreeSet<&str> = tracked
        .into_iter()
        .map(|f| f.split_once('/').map_or(f, |(d, _)| d))
        .collect();
    entries
        .into_iter()
        .filter(|e| !ROOT_ALLOWED.contains(e))
        .map(|e| Problem {
            file: e.to_owned(),
            line: 1,
            message: "tracked at the repository root but not in the allow-list \
                      (xtask/src/tidy.rs ROOT_ALLOWED): remove it or allow it"
                .into(),
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Markdown,
    /// Comments start with `//` (also `//!`, `///`, `/*` lines are not handled).
    SlashComments,
    /// Comments start with `#`.
    HashComments,
    Other,
}

impl Kind {
    fn of(file: &str) -> Kind {
        let ext = file.rsplit_once('.').map_or("", |(_, e)| e);
        match ext {
            "md" => Kind::Markdown,
            "rs" => Kind::SlashComments,
            "toml" | "py" | "pyi" | "sh" => Kind::HashComments,
            _ => Kind::Other,
        }
    }
}

/// The text of each line that is prose: the whole line in markdown, the comment of a
/// code line. For `#` files the comment starts at the first `#` outside a string on lines
/// that start with one (a trailing `# …` after code is also taken when no quote precedes it).
fn prose_lines(text: &str, kind: Kind) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter_map(move |(i, line)| {
        let t = line.trim_start();
        let prose = match kind {
            Kind::Markdown => Some(line),
            Kind::SlashComments => t.starts_with("//").then_some(t),
            Kind::HashComments => {
                if t.starts_with('#') {
                    Some(t)
                } else {
                    line.find(" #")
                        .filter(|&at| !line[..at].contains(['"', '\'']))
                        .map(|at| &line[at..])
                }
            }
            Kind::Other => None,
        };
        prose.map(|p| (i + 1, p))
    })
}

/// Rule paths: repository paths that do not exist, and documents outside the repository.
fn paths(
    tree: &Tree<'_>,
    top: &BTreeSet<&str>,
    file: &str,
    text: &str,
    kind: Kind,
) -> Vec<Problem> {
    let mut out = Vec::new();
    for (line, prose) in prose_lines(text, kind) {
        for word in OUTSIDE {
            if contains_word(prose, word) {
                out.push(Problem {
                    file: file.to_owned(),
                    line,
                    message: format!(
                        "cites {word}, which is not in the repository: cite the project's \
                         own doc (docs/CONFIG.md, docs/HTTP.md, ...)"
                    ),
                });
            }
        }
        for p in path_words(prose) {
            // A bare document name (`BENCHMARKS.md`) must be some tracked file's name.
            if !p.contains('/') && p.len() > 3 && p.ends_with(".md") && !p.contains('*') {
                // Not twice: an outside document is reported above, a link target below.
                let reported = OUTSIDE.iter().any(|w| p.starts_with(w))
                    || (kind == Kind::Markdown && prose.contains(&format!("]({p}")));
                if !reported && !tree.has_file_named(&p) {
                    out.push(Problem {
                        file: file.to_owned(),
                        line,
                        message: format!("names {p}, but no tracked file has that name"),
                    });
                }
                continue;
            }
            let first = p.split('/').next().unwrap_or("");
            if !p.contains('/') || !top.contains(first) {
                continue;
            }
            // Rooted at the repository, or at a directory holding the file (a crate's
            // own `examples/` or `src/` paths written from inside the crate).
            let found =
                tree.matches(&p) || ancestors(file).any(|d| tree.matches(&format!("{d}/{p}")));
            if !found {
                out.push(Problem {
                    file: file.to_owned(),
                    line,
                    message: format!("names {p}, which is not a tracked file or directory"),
                });
            }
        }
    }
    out
}

/// A path character (braces and commas are handled by [`path_words`]).
fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '*')
}

/// The words of a line that may be repository paths: runs of path characters (with
/// `{a,b}` groups) that start at a word boundary and do not follow `/`, `.`, `:` or `~`
/// (so `/abs/crates/x`, `../crates/x` and `https://x/docs/y` are not taken), with trailing
/// dots stripped.
fn path_words(line: &str) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let starts = (c.is_ascii_alphanumeric() || c == '_' || c == '.')
            && (i == 0
                || !(is_path_char(chars[i - 1]) || matches!(chars[i - 1], ':' | '~' | '{' | '\\')));
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        let mut word = String::new();
        while j < chars.len() {
            let c = chars[j];
            if is_path_char(c) {
                word.push(c);
                j += 1;
            } else if c == '{' {
                // A brace group: only if it closes before the word ends.
                let close = chars[j..].iter().position(|&x| x == '}');
                match close {
                    Some(k)
                        if chars[j + 1..j + k]
                            .iter()
                            .all(|&x| is_path_char(x) || x == ',') =>
                    {
                        word.extend(&chars[j..=j + k]);
                        j += k + 1;
                    }
                    _ => break,
                }
            } else {
                break;
            }
        }
        // `../x` or `./x`: a relative path (links check those); skip.
        if !word.starts_with('.') {
            let w = word.trim_end_matches('.');
            if !w.is_empty() {
                out.push(w.to_owned());
            }
        }
        i = j.max(i + 1);
    }
    out
}

/// `word` occurs in `text` not surrounded by identifier characters.
fn contains_word(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(at) = text[from..].find(word) {
        let start = from + at;
        let end = start + word.len();
        let before = text[..start].chars().next_back();
        let after = text[end..].chars().next();
        let edge_ok = |c: Option<char>, w_edge: Option<char>| {
            // Only an identifier edge of the word needs a non-identifier neighbour.
            !(c.is_some_and(ident) && w_edge.is_some_and(ident))
        };
        if edge_ok(before, word.chars().next()) && edge_ok(after, word.chars().next_back()) {
            return true;
        }
        from = start + word.len().max(1);
    }
    false
}

/// `{a,b}x{c,d}` → `ax`, … (every combination).
fn expand_braces(p: &str) -> Vec<String> {
    let Some(open) = p.find('{') else {
        return vec![p.to_owned()];
    };
    let Some(len) = p[open..].find('}') else {
        return vec![p.to_owned()];
    };
    let (head, alts, tail) = (&p[..open], &p[open + 1..open + len], &p[open + len + 1..]);
    alts.split(',')
        .flat_map(|a| expand_braces(&format!("{head}{a}{tail}")))
        .collect()
}

/// A `*` glob (no `/` inside a `*`) against a path.
fn glob(pattern: &str, path: &str) -> bool {
    let (p, s): (Vec<char>, Vec<char>) = (pattern.chars().collect(), path.chars().collect());
    fn go(p: &[char], s: &[char]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some(('*', rest)) => (0..=s.len())
                .take_while(|&k| k == 0 || s[k - 1] != '/')
                .any(|k| go(rest, &s[k..])),
            Some((c, rest)) => s.first() == Some(c) && go(rest, &s[1..]),
        }
    }
    go(&p, &s)
}

/// Rule links: relative markdown links that lead nowhere.
fn links(tree: &Tree<'_>, file: &str, text: &str) -> Vec<Problem> {
    let mut out = Vec::new();
    let dir = file.rsplit_once('/').map_or("", |(d, _)| d);
    for (line, target) in link_targets(text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let resolved = if path.is_empty() {
            Some(file.to_owned())
        } else if path.starts_with('/') {
            None
        } else {
            normalize(&format!("{dir}/{path}"))
        };
        let problem = |message: String| Problem {
            file: file.to_owned(),
            line,
            message,
        };
        let Some(resolved) = resolved else {
            out.push(problem(format!(
                "link {target} leaves the repository (or is absolute)"
            )));
            continue;
        };
        if !tree.exists(&resolved) {
            out.push(problem(format!(
                "link {target}: {resolved} is not a tracked file or directory"
            )));
            continue;
        }
        if let Some(anchor) = anchor
            && resolved.ends_with(".md")
            && let Some(target_text) = (tree.read)(&resolved)
            && !headings(&target_text).iter().any(|h| h == anchor)
        {
            out.push(problem(format!(
                "link {target}: {resolved} has no heading #{anchor}"
            )));
        }
    }
    out
}

/// `a/./b/../c` → `a/c`; `None` when it climbs above the root.
fn normalize(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(parts.join("/"))
}

/// The lines of markdown `text` outside fenced code blocks (``` or ~~~, fence lines
/// included), with their 0-based index.
fn outside_fences(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut fence: Option<&str> = None;
    text.lines().enumerate().filter(move |(_, line)| {
        let t = line.trim_start();
        if let Some(f) = fence {
            if t.starts_with(f) {
                fence = None;
            }
            return false;
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = Some(&t[..3]);
            return false;
        }
        true
    })
}

/// Fenced code blocks (``` or ~~~) are skipped; inline code spans are blanked.
fn prose_markdown(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in outside_fences(text) {
        // Blank out `code spans` (a backtick run closes on the same run length).
        let mut s = String::with_capacity(line.len());
        let mut rest = line;
        while let Some(at) = rest.find('`') {
            s.push_str(&rest[..at]);
            let run = rest[at..].chars().take_while(|&c| c == '`').count();
            let ticks = &rest[at..at + run];
            match rest[at + run..].find(ticks) {
                Some(end) => {
                    s.extend(std::iter::repeat_n(' ', run * 2 + end));
                    rest = &rest[at + run + end + run..];
                }
                None => {
                    s.push_str(&rest[at..]);
                    rest = "";
                }
            }
        }
        s.push_str(rest);
        out.push((i + 1, s));
    }
    out
}

/// `(line, target)` of every inline link, image and reference definition.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (line, s) in prose_markdown(text) {
        let t = s.trim_start();
        // Reference definition: `[x]: target`.
        if t.starts_with('[')
            && let Some(close) = t.find("]:")
            && !t[..close].contains("](")
        {
            if let Some(target) = t[close + 2..].split_whitespace().next() {
                out.push((line, target.trim_matches(['<', '>']).to_owned()));
            }
            continue;
        }
        let mut rest = s.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            // The target ends at the matching `)` (one level of parentheses inside).
            let mut depth = 0usize;
            let mut end = None;
            for (k, c) in after.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' if depth == 0 => {
                        end = Some(k);
                        break;
                    }
                    ')' => depth -= 1,
                    _ => {}
                }
            }
            let Some(end) = end else { break };
            let inner = after[..end].trim();
            let target = if let Some(x) = inner.strip_prefix('<') {
                x.split('>').next().unwrap_or("")
            } else {
                inner.split_whitespace().next().unwrap_or("")
            };
            if !target.is_empty() {
                out.push((line, target.to_owned()));
            }
            rest = &after[end..];
        }
    }
    out
}

/// The anchors GitHub gives a file's headings: lower case, punctuation dropped, spaces
/// as `-`, repeats numbered `-1`, `-2`, ….
fn headings(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (_, line) in outside_fences(text) {
        let t = line.trim_start();
        let hashes = t.chars().take_while(|&c| c == '#').count();
        if hashes == 0 || hashes > 6 || !t[hashes..].starts_with(' ') {
            continue;
        }
        let title = t[hashes..].trim().trim_end_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter_map(|c| {
                if c == ' ' {
                    Some('-')
                } else if c.is_alphanumeric() || c == '-' || c == '_' {
                    Some(c)
                } else {
                    None
                }
            })
            .collect();
        let n = out
            .iter()
            .filter(|h| {
                **h == slug
                    || h.strip_prefix(&format!("{slug}-"))
                        .is_some_and(|r| r.parse::<u32>().is_ok())
            })
            .count();
        out.push(if n == 0 { slug } else { format!("{slug}-{n}") });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn tree(files: &[(&str, &str)]) -> (BTreeMap<String, String>, Vec<String>) {
        let map: BTreeMap<String, String> = files
            .iter()
            .map(|(f, t)| (f.to_string(), t.to_string()))
            .collect();
        let names = map.keys().cloned().collect();
        (map, names)
    }

    /// Exactly these problems, in this order (each given by its start).
    fn expect(p: &[String], want: &[&str]) {
        assert_eq!(p.len(), want.len(), "{p:?}");
        for (got, w) in p.iter().zip(want) {
            assert!(got.starts_with(w), "{got} vs {w}");
        }
    }

    fn run(files: &[(&str, &str)]) -> Vec<String> {
        let (map, names) = tree(files);
        let mut problems = root_files(names.iter().map(String::as_str));
        let t = Tree::new(names.clone(), |f| map.get(f).cloned());
        problems.extend(check(&t));
        problems.iter().map(ToString::to_string).collect()
    }

    const BASE: &[(&str, &str)] = &[
        ("Cargo.toml", "[workspace]\n"),
        (
            "README.md",
            "# weir\n\nSee [config](docs/CONFIG.md).\n\n| part | what |\n|---|---|\n| `crates/a` | a |\n| `bench/` | b |\n",
        ),
        (
            "docs/CONFIG.md",
            "# Config\n\n## The `[server]` table\n\n## Keys\n\n## Keys\n",
        ),
        (
            "crates/a/src/lib.rs",
            "//! Read `docs/CONFIG.md`.\nfn f() {}\n",
        ),
        ("crates/a/src/b.rs", "\n"),
        ("bench/http/run.sh", "#!/bin/sh\n# see bench/http/run.sh\n"),
    ];

    fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
        let mut v: Vec<_> = BASE.to_vec();
        for e in extra {
            v.retain(|(f, _)| f != &e.0);
            v.push(*e);
        }
        v
    }

    #[test]
    fn a_clean_tree_passes() {
        assert_eq!(run(BASE), Vec::<String>::new());
    }

    #[test]
    fn junk_at_the_root_fails() {
        let p = run(&with(&[("err", "oops\n"), ("notes/x.txt", "x")]));
        expect(&p, &["err:1: tracked at the repository root", "notes:1: "]);
    }

    #[test]
    fn vendored_crates_are_not_checked_but_their_readme_is() {
        let p = run(&with(&[
            ("vendor/x/src/lib.rs", "//! See docs/none.md.\n"),
            ("vendor/x/README.md", "# x\n[gone](MISSING.md)\n"),
            (
                "vendor/README.md",
                "# vendor\n[x](x/README.md) [gone](NONE.md)\n",
            ),
        ]));
        expect(&p, &["vendor/README.md:2: link NONE.md"]);
    }

    #[test]
    fn broken_links_fail_with_file_and_line() {
        let p = run(&with(&[(
            "docs/A.md",
            "# A\n\n[ok](CONFIG.md) [up](../README.md) ![img](img/x.png)\n\
             [gone](MISSING.md)\n[out](../../etc/passwd)\n[abs](/etc/passwd)\n\
             [web](https://example.com/docs/none.md) [self](#a)\n",
        )]));
        expect(
            &p,
            &[
                "docs/A.md:3: link img/x.png",
                "docs/A.md:4: link MISSING.md",
                "docs/A.md:5: link ../../etc/passwd leaves",
                "docs/A.md:6: link /etc/passwd leaves",
            ],
        );
    }

    #[test]
    fn links_in_code_are_not_links() {
        let p = run(&with(&[(
            "docs/A.md",
            "# A\n`[x](nowhere.md)`\n```\n[y](nowhere.md)\n```\n[def]: docs/none.md\n",
        )]));
        // Only the reference definition is a link (and it is relative to docs/).
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].contains("docs/A.md:6: link docs/none.md"), "{p:?}");
        // The path rule also sees the missing file on that line.
        assert!(p[1].contains("docs/A.md:6: names docs/none.md"), "{p:?}");
    }

    #[test]
    fn anchors_are_checked_against_headings() {
        let p = run(&with(&[(
            "docs/A.md",
            "# A b\n[1](CONFIG.md#the-server-table) [2](CONFIG.md#keys-1) [3](#a-b)\n\
             [4](CONFIG.md#nope) [5](#keys)\n",
        )]));
        expect(
            &p,
            &[
                "docs/A.md:3: link #keys",
                "docs/A.md:3: link CONFIG.md#nope",
            ],
        );
    }

    #[test]
    fn missing_repository_paths_fail_in_docs_and_comments() {
        let p = run(&with(&[
            (
                "docs/B.md",
                "# B\nSee `crates/a/src/b.rs`, crates/a/src/{lib.rs,b.rs}, crates/a/src/*.rs and bench/http/.\n\
                 Not `crates/a/src/gone.rs` nor docs/GONE.md.\n",
            ),
            (
                "crates/a/src/lib.rs",
                "//! Read docs/NOPE.md.\nfn f() { let _ = \"docs/NOT_CHECKED.md\"; }\n// crates/a/src/{lib.rs,x.rs}\n",
            ),
            (
                "bench/http/run.sh",
                "#!/bin/sh\necho bench/nothing.sh # bench/gone.sh\n",
            ),
            (
                "Cargo.toml",
                "[workspace] # see crates/zzz\nx = \"crates/not-a-comment\"\n",
            ),
        ]));
        let want = [
            "Cargo.toml:1: names crates/zzz",
            "bench/http/run.sh:2: names bench/gone.sh",
            "crates/a/src/lib.rs:1: names docs/NOPE.md",
            "crates/a/src/lib.rs:3: names crates/a/src/{lib.rs,x.rs}",
            "docs/B.md:3: names crates/a/src/gone.rs",
            "docs/B.md:3: names docs/GONE.md",
        ];
        expect(&p, &want);
    }

    /// What a case shows, its tree (`(path, text)`), the problems it must report.
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a [&'a str]);

    #[test]
    fn path_rules_by_example() {
        let cases: [Case<'_>; 3] = [
            (
                "paths may be relative to an enclosing directory",
                &[
                    ("examples/gateway.toml", "\n"),
                    ("crates/a/examples/embed.rs", "\n"),
                    (
                        "crates/a/src/b.rs",
                        "//! See `examples/embed.rs` and examples/gateway.toml, not examples/gone.rs.\n",
                    ),
                ],
                &["crates/a/src/b.rs:1: names examples/gone.rs"],
            ),
            (
                "bare document names must exist somewhere",
                &[(
                    "crates/a/src/b.rs",
                    "//! As CONFIG.md and README.md say, not as PLANS.md does.\n",
                )],
                &["crates/a/src/b.rs:1: names PLANS.md, but no tracked"],
            ),
            (
                "paths not rooted in the repository are ignored",
                &[(
                    "docs/C.md",
                    "# C\n/tmp/crates/x.rs, https://github.com/x/crates/y, target/criterion/x, \
                     ~/docs/z.md, src/lib.rs, crate::docs/x, weir-core/docs/x.md.\n",
                )],
                &[],
            ),
        ];
        for (what, files, want) in cases {
            let p = run(&with(files));
            assert_eq!(p.len(), want.len(), "{what}: {p:?}");
            expect(&p, want);
        }
    }

    #[test]
    fn documents_outside_the_repository_fail() {
        let p = run(&with(&[
            (
                "docs/D.md",
                "# D\nAs CONTRACT §3 says; see ../shared/docs.\nCONTRACTS and MYCONTRACT are words.\n",
            ),
            (
                "crates/a/src/b.rs",
                "/// The seeds of PRODUCT.md.\nconst X: &str = \"CONTRACT.md\";\n",
            ),
        ]));
        let want = [
            "crates/a/src/b.rs:1: cites PRODUCT.md",
            "docs/D.md:2: cites ../shared",
            "docs/D.md:2: cites CONTRACT",
        ];
        expect(&p, &want);
    }

    #[test]
    fn the_crate_table_lists_every_crate_directory() {
        let p = run(&with(&[
            ("crates/b/Cargo.toml", "[package]\n"),
            ("bindings/py/Cargo.toml", "[package]\n"),
            (
                "README.md",
                "# weir\n\n| part | what |\n|---|---|\n| `crates/a` | a |\n| `crates/gone` | g |\n\
                 | `bindings/py` | p |\n\nafter | the table\n",
            ),
        ]));
        expect(
            &p,
            &[
                "README.md:3: crates/b has no row in the crate table",
                // The path rule sees the missing directory too.
                "README.md:6: names crates/gone, which is not a tracked",
                "README.md:6: the crate table names crates/gone, which is not a directory",
            ],
        );
        let p = run(&with(&[("README.md", "# weir\n")]));
        expect(&p, &["README.md:1: has no crate table"]);
    }

    const FIGURES: &str =
        "core\tbucket\t≤ 1.1×\t1.13×\tmissed\t`abc`\t2026-11-30\t2026-11-30-core\n";

    fn benchmarks_doc(table: &str) -> String {
        format!("# Benchmarks\n\n{}\n{table}{}\n", bench::BEGIN, bench::END)
    }

    #[test]
    fn the_headline_table_must_be_current() {
        let table = bench::headline(FIGURES).unwrap();
        let current = benchmarks_doc(&table);
        let stale = benchmarks_doc(&table.replace("1.13×", "1.12×"));
        let run_with = |doc: &str, figures: Option<&str>| {
            let mut files: Vec<(&str, &str)> = BASE.to_vec();
            files.push(("docs/BENCHMARKS.md", doc));
            files.push(("docs/perf-log/2026-11-30-core.md", "# c\n"));
            if let Some(f) = figures {
                files.push(("docs/perf-log/latest.tsv", f));
            }
            run(&files)
        };
        assert_eq!(run_with(&current, Some(FIGURES)), Vec::<String>::new());
        expect(
            &run_with(&stale, Some(FIGURES)),
            &["docs/BENCHMARKS.md:3: the headline table is stale"],
        );
        expect(
            &run_with(&current, Some("# x\nbad line\n")),
            &["docs/perf-log/latest.tsv:2: docs/perf-log/latest.tsv:2: 1 tab-separated"],
        );
        // The path rule also sees the generated comment name the missing source.
        let p = run_with(&current, None);
        assert!(
            p.iter()
                .any(|x| x.starts_with("docs/BENCHMARKS.md:1: the headline table's source")),
            "{p:?}"
        );
        expect(&run_with("# Benchmarks\n", None), &[]);
    }

    #[test]
    fn helpers() {
        assert!(glob("a/*.rs", "a/b.rs"));
        assert!(!glob("a/*.rs", "a/b/c.rs"));
        assert!(glob("crates/*", "crates/x"));
        assert_eq!(expand_braces("a/{b,c}.rs"), ["a/b.rs", "a/c.rs"]);
        assert_eq!(normalize("docs/../README.md").as_deref(), Some("README.md"));
        assert_eq!(normalize("docs/../../x"), None);
        assert_eq!(
            headings("# A `b` c!\n## A b c\n```\n# not\n```\n### Ünï\n"),
            ["a-b-c", "a-b-c-1", "ünï"]
        );
        assert_eq!(
            path_words("see `docs/X.md`: ok."),
            ["see", "docs/X.md", "ok"]
        );
    }
}
