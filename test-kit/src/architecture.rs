//! The architecture checks: a crate's module graph, read from its sources' `crate::` and
//! `super::` paths (in `use` lines and inline), with no parser and no new dependency.
//!
//! - [`ModuleGraph::circles`]: every set of modules that reach each other (a circle). A module
//!   naming its own submodules (declaring, re-exporting, delegating to them) is its structure,
//!   not an edge; a submodule naming its parent, a sibling or anything else is an edge.
//! - [`ModuleGraph::face_imports`]: every place a module under one face (`faces::<face>`)
//!   names a module under another.
//! - [`ModuleGraph::mentions`]: every module under a prefix whose code holds one of some
//!   words (a face reaching what only a service may call).
//!
//! What is not read: comments, and a test module at the end of a file (`#[cfg(test)] mod tests
//! { … }`), whose imports are the test's, not the module's. `main.rs` and `bin/` are crate
//! roots of their own.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module, by its path in the crate (`[]` is the crate root).
pub type ModulePath = Vec<String>;

/// A crate's modules and which modules each one names.
#[derive(Debug, Default)]
pub struct ModuleGraph {
    /// Each module's file, by module path.
    files: BTreeMap<ModulePath, PathBuf>,
    /// The modules each module names (itself excluded).
    edges: BTreeMap<ModulePath, BTreeSet<ModulePath>>,
    /// Each module's code, as read (comments and its trailing test module left out).
    code: BTreeMap<ModulePath, String>,
}

/// A module whose code holds a word it should not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mention {
    pub module: String,
    pub word: String,
    pub file: PathBuf,
}

/// One module naming another (a module of another face, of another room).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    pub from: String,
    pub to: String,
    pub file: PathBuf,
}

/// One module naming a module of another face.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaceImport {
    pub from: String,
    pub to: String,
    pub file: PathBuf,
}

impl ModuleGraph {
    /// Reads every `.rs` file under `src` (a crate's `src/`).
    pub fn read(src: &Path) -> std::io::Result<Self> {
        let mut sources = BTreeMap::new();
        collect(src, src, &mut sources)?;
        Ok(Self::from_sources(
            sources
                .into_iter()
                .map(|(module, (file, text))| (module, file, text)),
        ))
    }

    /// Builds the graph from `(module path, file, source)` triples.
    pub fn from_sources(sources: impl IntoIterator<Item = (ModulePath, PathBuf, String)>) -> Self {
        let sources: Vec<_> = sources.into_iter().collect();
        let mut graph = Self::default();
        for (module, file, _) in &sources {
            graph.files.insert(module.clone(), file.clone());
        }
        for (module, _, text) in &sources {
            let mut named = BTreeSet::new();
            let code = module_code(text);
            for path in named_paths(&code) {
                let Some(absolute) = absolute(module, &path) else {
                    continue;
                };
                let target = graph.resolve(&absolute);
                // A module naming its own submodules is its structure (declaring, re-exporting,
                // delegating), not a dependency that can close a circle.
                if !target.starts_with(module) {
                    named.insert(target);
                }
            }
            graph.edges.insert(module.clone(), named);
            graph.code.insert(module.clone(), code);
        }
        graph
    }

    /// Every module under `prefix` (`faces`) whose code holds one of `words`.
    pub fn mentions(&self, prefix: &str, words: &[&str]) -> Vec<Mention> {
        let mut found = Vec::new();
        for (module, code) in &self.code {
            if module.first().is_none_or(|first| first != prefix) {
                continue;
            }
            for word in words {
                if code.contains(word) {
                    found.push(Mention {
                        module: display(module),
                        word: (*word).to_owned(),
                        file: self.files[module].clone(),
                    });
                }
            }
        }
        found
    }

    /// The longest prefix of `path` that is a module of the crate.
    fn resolve(&self, path: &[String]) -> ModulePath {
        let mut end = path.len();
        while end > 0 && !self.files.contains_key(&path[..end]) {
            end -= 1;
        }
        path[..end].to_vec()
    }

    /// Every module.
    pub fn modules(&self) -> impl Iterator<Item = &ModulePath> {
        self.files.keys()
    }

    /// The modules `module` names.
    pub fn named_by(&self, module: &[String]) -> Option<&BTreeSet<ModulePath>> {
        self.edges.get(module)
    }

    /// Every circle: the modules of each strongly connected component with more than one
    /// module, each sorted, as `a::b` (`crate` for the root).
    pub fn circles(&self) -> Vec<Vec<String>> {
        let mut tarjan = Tarjan::default();
        for module in self.files.keys() {
            if !tarjan.index.contains_key(module) {
                tarjan.visit(self, module);
            }
        }
        tarjan
            .components
            .into_iter()
            .filter(|c| c.len() > 1)
            .map(|c| {
                let mut names: Vec<String> = c.iter().map(|m| display(m)).collect();
                names.sort();
                names
            })
            .collect()
    }

    /// The crate's rooms as a graph of their own: each top-level module (a folder, or a file at
    /// the top) one node, and an edge where a module of one room names a module of another.
    /// The crate root (it only declares and re-exports) and test modules (`tests`, `*_tests`)
    /// are left out. In a crate of areas (the runtime), these are its areas.
    #[must_use]
    pub fn rooms(&self) -> ModuleGraph {
        self.grouped(1)
    }

    /// The rooms inside a crate's areas: each module two levels down (`services::turns`) one
    /// node, with what lies below it. An area's own file (`services/mod.rs`) is left out: it
    /// declares its rooms and says what they may import.
    #[must_use]
    pub fn rooms_in_areas(&self) -> ModuleGraph {
        self.grouped(2)
    }

    /// The graph of the groups `depth` segments deep (see [`Self::rooms`]).
    fn grouped(&self, depth: usize) -> ModuleGraph {
        let mut groups = ModuleGraph::default();
        for (module, file) in &self.files {
            if let Some(group) = group_of(module, depth) {
                groups.files.entry(group).or_insert_with(|| file.clone());
            }
        }
        for (from, to) in self.group_edges(depth) {
            groups
                .edges
                .entry(group_of(from, depth).unwrap_or_default())
                .or_default()
                .insert(group_of(to, depth).unwrap_or_default());
        }
        groups
    }

    /// Every module of one of `groups` (`depth` segments deep, as `a::b`) that names a module
    /// of another of them.
    pub fn imports_between(&self, groups: &[String], depth: usize) -> Vec<Import> {
        let within =
            |m: &ModulePath| group_of(m, depth).is_some_and(|g| groups.contains(&display(&g)));
        self.group_edges(depth)
            .filter(|(from, to)| within(from) && within(to))
            .map(|(from, to)| Import {
                from: display(from),
                to: display(to),
                file: self.files[from].clone(),
            })
            .collect()
    }

    /// The edges from a module of one group (`depth` segments deep) to a module of another.
    fn group_edges(&self, depth: usize) -> impl Iterator<Item = (&ModulePath, &ModulePath)> {
        self.edges.iter().flat_map(move |(from, named)| {
            named
                .iter()
                .filter(move |to| {
                    let (a, b) = (group_of(from, depth), group_of(to, depth));
                    a.is_some() && b.is_some() && a != b
                })
                .map(move |to| (from, to))
        })
    }

    /// Every module under `faces::<face>` that names a module under `faces::<other face>`.
    pub fn face_imports(&self, faces: &str) -> Vec<FaceImport> {
        let face_of = |m: &ModulePath| (m.len() > 1 && m[0] == faces).then(|| m[1].clone());
        let mut found = Vec::new();
        for (from, named) in &self.edges {
            let Some(face) = face_of(from) else { continue };
            for to in named {
                if face_of(to).is_some_and(|other| other != face) {
                    found.push(FaceImport {
                        from: display(from),
                        to: display(to),
                        file: self.files[from].clone(),
                    });
                }
            }
        }
        found
    }
}

/// The room a module is in: its first segment; none for the crate root and test modules.
fn group_of(module: &ModulePath, depth: usize) -> Option<ModulePath> {
    let test = module
        .iter()
        .any(|segment| segment == "tests" || segment.ends_with("_tests"));
    if test || module.len() < depth {
        return None;
    }
    Some(module[..depth].to_vec())
}

/// `a::b`, or `crate` for the root.
fn display(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_owned()
    } else {
        module.join("::")
    }
}

/// Collects `(module path → (file, source))` for every `.rs` file under `dir`.
fn collect(
    src: &Path,
    dir: &Path,
    out: &mut BTreeMap<ModulePath, (PathBuf, String)>,
) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(std::fs::DirEntry::path);
    for entry in entries {
        let path = entry.path();
        if path.is_dir() {
            if dir == src && path.file_name().is_some_and(|n| n == "bin") {
                continue;
            }
            collect(src, &path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs")
            && let Some(module) = module_path(src, &path)
        {
            let text = std::fs::read_to_string(&path)?;
            out.insert(module, (path, text));
        }
    }
    Ok(())
}

/// The module a file holds: `lib.rs` → root, `a/mod.rs` and `a.rs` → `a`, `a/b.rs` → `a::b`.
/// `None` for `main.rs`, a crate root of its own.
pub fn module_path(src: &Path, file: &Path) -> Option<ModulePath> {
    let relative = file.strip_prefix(src).ok()?.with_extension("");
    let mut parts: ModulePath = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    match parts.as_slice() {
        [only] if only == "main" => return None,
        [only] if only == "lib" => return Some(Vec::new()),
        _ => {}
    }
    if parts.last().is_some_and(|l| l == "mod") {
        parts.pop();
    }
    Some(parts)
}

/// The source without comments and without a trailing `#[cfg(test)] mod tests { … }`.
fn module_code(text: &str) -> String {
    let mut code = String::with_capacity(text.len());
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]"
            && lines.peek().is_some_and(|next| {
                let next = next.trim();
                next.starts_with("mod ") && next.ends_with('{')
            })
        {
            break;
        }
        code.push_str(&strip_comment(line));
        code.push('\n');
    }
    code
}

/// `line` up to a `//` comment, its string literals blanked (a message naming a path names
/// no module), except a string that is a path and nothing else, as serde's `with = "…"`
/// attributes name functions. Per line: a string that spans lines is read as code after its
/// first line.
fn strip_comment(line: &str) -> String {
    let bytes = line.as_bytes();
    let mut code = String::with_capacity(line.len());
    let mut string: Option<String> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if let Some(content) = string.as_mut() {
            if b == b'\\' {
                i += 1;
                content.push(' ');
            } else if b == b'"' {
                let is_path =
                    !content.is_empty() && content.bytes().all(|c| is_ident(c) || c == b':');
                if is_path {
                    code.push_str(content);
                }
                code.push('"');
                string = None;
            } else {
                content.push(if b.is_ascii() { char::from(b) } else { ' ' });
            }
        } else if b == b'/' && bytes.get(i + 1) == Some(&b'/') {
            break;
        } else if b == b'\'' && bytes.get(i + 2) == Some(&b'\'') {
            // A character literal such as '"'.
            code.push_str("' '");
            i += 2;
        } else if b == b'\'' && bytes.get(i + 1) == Some(&b'\\') && bytes.get(i + 3) == Some(&b'\'')
        {
            code.push_str("' '");
            i += 3;
        } else {
            if b == b'"' {
                string = Some(String::new());
            }
            // Paths are ASCII; anything else is read as a space, so byte offsets stay chars.
            code.push(if b.is_ascii() { char::from(b) } else { ' ' });
        }
        i += 1;
    }
    code
}

/// A path as written: how it starts, then its segments.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Written {
    start: Start,
    segments: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// `crate::`.
    Root,
    /// `super::` this many times.
    Up(usize),
}

/// Every `crate::…` and `super::…` path in `code`, use trees expanded (`crate::a::{b, c::D}`
/// gives `crate::a::b` and `crate::a::c::D`). Paths to a module's own submodules (bare, or
/// through `self::`) are not read: they cannot close a circle.
fn named_paths(code: &str) -> Vec<Written> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts_word = i == 0 || !is_ident(bytes[i - 1]) && bytes[i - 1] != b':';
        if !starts_word || !is_ident(bytes[i]) {
            i += 1;
            continue;
        }
        let rest = &code[i..];
        let word_end = rest
            .bytes()
            .position(|b| !is_ident(b))
            .unwrap_or(rest.len());
        let word = &rest[..word_end];
        if !rest[word_end..].starts_with("::") {
            i += word_end;
            continue;
        }
        let (start, mut at) = match word {
            "crate" => (Start::Root, i + word_end + 2),
            "super" => {
                let mut ups = 0;
                let mut at = i;
                while code[at..].starts_with("super::") {
                    ups += 1;
                    at += "super::".len();
                }
                (Start::Up(ups), at)
            }
            _ => {
                i += word_end;
                continue;
            }
        };
        let mut tree = Vec::new();
        at = use_tree(code, at, &mut Vec::new(), &mut tree);
        found.extend(tree.into_iter().map(|segments| Written { start, segments }));
        i = at.max(i + 1);
    }
    found
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Reads a use tree at `at` (`a::b`, `a::{b, c::d}`, `*`), appending each full path to `out`
/// with `prefix` before it. Returns where the tree ends.
fn use_tree(
    code: &str,
    mut at: usize,
    prefix: &mut Vec<String>,
    out: &mut Vec<ModulePath>,
) -> usize {
    let bytes = code.as_bytes();
    let depth = prefix.len();
    loop {
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        if at < bytes.len() && bytes[at] == b'{' {
            at += 1;
            loop {
                while at < bytes.len() && (bytes[at].is_ascii_whitespace() || bytes[at] == b',') {
                    at += 1;
                }
                if at >= bytes.len() || bytes[at] == b'}' {
                    at += 1;
                    break;
                }
                let before = at;
                at = use_tree(code, at, prefix, out);
                if at == before {
                    at += 1;
                }
            }
            prefix.truncate(depth);
            return at;
        }
        let start = at;
        while at < bytes.len() && is_ident(bytes[at]) {
            at += 1;
        }
        if at == start {
            // `*`, or the end of a path: the prefix itself is named.
            out.push(prefix.clone());
            prefix.truncate(depth);
            return at;
        }
        let ident = &code[start..at];
        if ident != "self" {
            prefix.push(ident.to_owned());
        }
        if code[at..].starts_with("::") {
            at += 2;
        } else {
            out.push(prefix.clone());
            prefix.truncate(depth);
            return at;
        }
    }
}

/// The crate path `written` names from `module` (`super` is the parent module, whether the
/// module's file is `a.rs` or `a/mod.rs`).
fn absolute(module: &[String], written: &Written) -> Option<ModulePath> {
    let base = match written.start {
        Start::Root => Vec::new(),
        Start::Up(ups) => module[..module.len().checked_sub(ups)?].to_vec(),
    };
    Some(
        base.into_iter()
            .chain(written.segments.iter().cloned())
            .collect(),
    )
}

/// Tarjan's strongly connected components.
#[derive(Debug, Default)]
struct Tarjan {
    next: usize,
    index: BTreeMap<ModulePath, usize>,
    low: BTreeMap<ModulePath, usize>,
    stack: Vec<ModulePath>,
    on_stack: BTreeSet<ModulePath>,
    components: Vec<Vec<ModulePath>>,
}

impl Tarjan {
    fn visit(&mut self, graph: &ModuleGraph, module: &ModulePath) {
        self.index.insert(module.clone(), self.next);
        self.low.insert(module.clone(), self.next);
        self.next += 1;
        self.stack.push(module.clone());
        self.on_stack.insert(module.clone());
        for next in graph.edges.get(module).into_iter().flatten() {
            if !self.index.contains_key(next) {
                self.visit(graph, next);
                let low = self.low[module].min(self.low[next]);
                self.low.insert(module.clone(), low);
            } else if self.on_stack.contains(next) {
                let low = self.low[module].min(self.index[next]);
                self.low.insert(module.clone(), low);
            }
        }
        if self.low[module] == self.index[module] {
            let mut component = Vec::new();
            while let Some(top) = self.stack.pop() {
                self.on_stack.remove(&top);
                let done = &top == module;
                component.push(top);
                if done {
                    break;
                }
            }
            self.components.push(component);
        }
    }
}

#[cfg(test)]
#[path = "architecture_tests.rs"]
mod tests;
