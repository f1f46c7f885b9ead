//! The module graph: data flows one way, so no module imports one that imports it back.
//!
//! Nodes are the top-level modules of `src/` (`src/x.rs` or `src/x/`); an edge is any
//! `crate::y` path in a module's code outside its unit tests. A directory is one node, so
//! a file every module needs (the diagnostic `Code`) lives at the top, not inside `lint/`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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

/// The code of a file without its `#[cfg(test)]` module and comments.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// Every `crate::a::b...` path in `code`, as its segments.
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        let end = after.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(after.len());
        paths.push(after[..end].split("::").filter(|s| !s.is_empty()).map(str::to_owned).collect());
        rest = after;
    }
    paths
}

fn top_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.trim_end_matches(".rs");
    (name != "lib" && name != "main").then(|| name.to_owned())
}

#[test]
fn the_module_graph_has_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let Some(from) = top_module(&src, file) else { continue };
        let edges = graph.entry(from.clone()).or_default();
        for path in crate_paths(&code(file)) {
            let Some(to) = path.first() else { continue };
            if *to == from || !(src.join(format!("{to}.rs")).exists() || src.join(to).is_dir()) {
                continue; // inside the module, or an item of the crate root
            }
            edges.insert(to.clone());
        }
    }
    assert!(graph.len() > 20, "the modules were found: {graph:?}");
    // Depth-first search for a back edge.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[i..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, stack, done) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(cycle) = visit(node, &graph, &mut Vec::new(), &mut done) {
            panic!("import cycle: {}", cycle.join(" → "));
        }
    }
}

/// The sandbox level is decided in one place, `Context::enforcement`: the plan, the dry run,
/// `packs help NAME` and the MCP read-only hint all ask it, so they cannot disagree.
#[test]
fn the_sandbox_level_is_decided_by_one_function() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut callers = BTreeMap::new();
    for file in &files {
        if file.ends_with("sandbox.rs") && file.parent() == Some(src.as_path()) {
            continue; // where `decide` is defined, with its unit tests
        }
        let code = code(file);
        for needle in ["sandbox::decide", "Needs::of"] {
            let n = code.matches(needle).count();
            if n > 0 {
                *callers.entry((needle, file.strip_prefix(&src).unwrap().display().to_string())).or_insert(0) += n;
            }
        }
    }
    let decided: Vec<_> = callers.iter().collect();
    assert_eq!(
        decided,
        [(&("Needs::of", "call/context.rs".to_owned()), &1), (&("sandbox::decide", "call/context.rs".to_owned()), &1)],
        "the sandbox level is decided only in Context::enforcement: {callers:?}"
    );
    let text = std::fs::read_to_string(src.join("call/context.rs")).unwrap();
    let body = text.split("fn enforcement(").nth(1).expect("Context::enforcement exists");
    let body = &body[..body.find("\n    }\n").unwrap()];
    assert!(body.contains("sandbox::decide(") && body.contains("Needs::of("), "{body}");
}
