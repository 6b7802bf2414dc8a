//! The engine's modules form layers: no module imports one that imports it back.
//!
//! A cycle is how a concept ends up with two homes (temporary names once lived in the write
//! phase and were needed by the resolver below it, which is how the resolver came to import
//! the transaction). This test reads every source file of the library, collects the top-level
//! modules each one names through `crate::` paths and `super::` paths that climb out of its own
//! module (in `use` lines and inline alike, grouped imports included), and fails on a cycle,
//! printing it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The library's top-level modules and, for each, the others it names.
type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn no_module_of_the_library_imports_one_that_imports_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src);
    assert!(graph.len() > 10, "too few modules found in {}: {graph:?}", src.display());
    if let Some(cycle) = find_cycle(&graph) {
        panic!("modules import each other in a circle: {}", cycle.join(" -> "));
    }
}

#[test]
fn the_scanner_sees_grouped_inline_and_super_paths() {
    let file = "use crate::{root::Root, durability::{Directory, TempFile}};\n\
                fn f() { crate::journal::x(); let _ = super::super::deb::y; }\n\
                // crate::report in a comment is not a use\n";
    let modules: BTreeSet<String> =
        ["root", "durability", "journal", "deb", "report", "extract"].map(String::from).into();
    let named = names_in(file, &["durability".into(), "fsync".into()], &modules);
    assert_eq!(named, ["deb", "durability", "journal", "root"].map(String::from).into());
    let mut graph = Graph::new();
    graph.insert("a".into(), ["b".into()].into());
    graph.insert("b".into(), ["c".into()].into());
    graph.insert("c".into(), ["a".into()].into());
    assert_eq!(find_cycle(&graph), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    graph.get_mut("c").unwrap().clear();
    assert_eq!(find_cycle(&graph), None);
}

fn module_graph(src: &Path) -> Graph {
    let files = rust_files(src);
    let modules: BTreeSet<String> =
        files.iter().filter_map(|(path, _)| path.first().cloned()).collect();
    let mut graph = Graph::new();
    for (path, file) in &files {
        let Some(top) = path.first() else { continue };
        let text =
            std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let named = names_in(&text, path, &modules);
        graph.entry(top.clone()).or_default().extend(named.into_iter().filter(|m| m != top));
    }
    graph
}

/// Every .rs file below `src` but the crate root and the programs, with its module path
/// (`durability/fsync.rs` is `[durability, fsync]`, `durability/mod.rs` is `[durability]`).
fn rust_files(src: &Path) -> Vec<(Vec<String>, PathBuf)> {
    let mut out = Vec::new();
    let mut todo = vec![src.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(src).unwrap().to_path_buf();
            if path.is_dir() {
                if rel != Path::new("bin") {
                    todo.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs")
                || rel == Path::new("lib.rs")
                || rel == Path::new("main.rs")
            {
                continue;
            }
            let mut module: Vec<String> =
                rel.with_extension("").iter().map(|c| c.to_string_lossy().into_owned()).collect();
            if module.last().is_some_and(|m| m == "mod") {
                module.pop();
            }
            out.push((module, path));
        }
    }
    out
}

/// The top-level modules (of `modules`) that a file of module `path` names.
fn names_in(text: &str, path: &[String], modules: &BTreeSet<String>) -> BTreeSet<String> {
    let code: String =
        text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let mut named = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::").into_iter().chain(rest.find("super::")).min() {
        let after = &rest[i..];
        let (climbed, tail) = if let Some(t) = after.strip_prefix("crate::") {
            (None, t)
        } else {
            let mut t = after;
            let mut supers = 0;
            while let Some(next) = t.strip_prefix("super::") {
                supers += 1;
                t = next;
            }
            (Some(supers), t)
        };
        // `super::` that stays inside the file's own top-level module names nothing new.
        let leaves_module = climbed.is_none_or(|supers| supers >= path.len());
        if leaves_module {
            for name in first_names(tail) {
                if modules.contains(&name) {
                    named.insert(name);
                }
            }
        }
        rest = &after[after.find("::").unwrap() + 2..];
    }
    named
}

/// The first path segment after `crate::`: one identifier, or each of a `{...}` group's.
fn first_names(tail: &str) -> Vec<String> {
    let ident =
        |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    if let Some(group) = tail.strip_prefix('{') {
        let mut depth = 0;
        let mut names = Vec::new();
        let mut start = true;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => start = true,
                c if c.is_whitespace() => {}
                _ if start && depth == 0 => {
                    names.push(ident(&group[i..]));
                    start = false;
                }
                _ => {}
            }
        }
        names
    } else {
        vec![ident(tail)]
    }
}

/// A cycle in `graph`, as the modules on it with the first repeated at the end.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    // Depth-first with an explicit stack; `on_path` holds the modules of the current path.
    let mut done: BTreeSet<&str> = BTreeSet::new();
    for start in graph.keys() {
        if done.contains(start.as_str()) {
            continue;
        }
        let mut path: Vec<&str> = vec![start];
        let mut iters = vec![graph[start].iter()];
        while let Some(it) = iters.last_mut() {
            match it.next() {
                Some(next) if path.contains(&next.as_str()) => {
                    let at = path.iter().position(|m| *m == next).unwrap();
                    let mut cycle: Vec<String> = path[at..].iter().map(|m| m.to_string()).collect();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(next) if !done.contains(next.as_str()) && graph.contains_key(next) => {
                    path.push(next);
                    iters.push(graph[next].iter());
                }
                Some(_) => {}
                None => {
                    done.insert(path.pop().unwrap());
                    iters.pop();
                }
            }
        }
    }
    None
}
