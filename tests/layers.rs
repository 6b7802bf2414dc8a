//! Both packages' modules form layers: no file imports one that imports it back, and no module
//! imports its own crate root.
//!
//! A cycle is how a concept ends up with two homes (temporary names once lived in the write
//! phase and were needed by the resolver below it, which is how the resolver came to import
//! the transaction). This test reads every source file of the engine (src/) and of the lab
//! (lab/src/), the programs aside, and collects the files each one names: through `crate::`
//! paths, `super::` and `self::` paths, and paths that start at a child module, in `use` lines
//! and inline alike, grouped imports included. A path leads to the deepest file it names, so a
//! `mod.rs` that re-exports what its children define is a file like any other: a child that
//! imports such a re-export from its parent, while the parent imports the child, is a cycle.
//! A path that ends at the crate root (`crate::Options`, a re-export of lib.rs) is refused as
//! well: the crate root only declares and re-exports, and a module that imports it imports
//! everything.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path in its crate: `durability/fsync.rs` is `[durability, fsync]`,
/// `durability/mod.rs` is `[durability]`.
type Module = Vec<String>;

/// Every module of a crate and, for each, the modules it names.
type Graph = BTreeMap<Module, BTreeSet<Module>>;

#[test]
fn no_file_of_the_engine_imports_one_that_imports_it_back() {
    let src = common::repo().join("src");
    check_crate(&src, 40);
}

#[test]
fn no_file_of_the_lab_imports_one_that_imports_it_back() {
    let src = common::repo().join("lab/src");
    check_crate(&src, 40);
}

/// Fails on a cycle or an import of the crate root in the crate whose sources are in `src`,
/// which must have at least `min` modules (so that a scanner that finds nothing fails too).
fn check_crate(src: &Path, min: usize) {
    let (graph, root_imports) = module_graph(src);
    assert!(graph.len() >= min, "too few modules found in {}: {graph:?}", src.display());
    assert!(
        root_imports.is_empty(),
        "modules of {} import the crate root: {}",
        src.display(),
        root_imports.join("; ")
    );
    if let Some(cycle) = find_cycle(&graph) {
        let names: Vec<String> = cycle.iter().map(display).collect();
        panic!("files of {} import each other in a circle: {}", src.display(), names.join(" -> "));
    }
}

#[test]
fn a_cycle_between_files_of_one_folder_or_through_a_mod_rs_is_found() {
    let tmp = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let path = tmp.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "pub mod a;\npub mod b;\npub use a::A;\n");
    write("a/mod.rs", "mod x;\nmod y;\npub use x::X;\n");
    write("a/x.rs", "use super::y::Y;\npub struct X;\n");
    write("a/y.rs", "pub struct Y;\nfn f() { let _ = crate::b::B; }\n");
    write("b.rs", "pub struct B;\n");
    let (graph, root) = module_graph(tmp.path());
    assert!(root.is_empty(), "{root:?}");
    assert_eq!(find_cycle(&graph), None, "{graph:?}");

    // A cycle between two files of one folder, through an inline path.
    write("a/y.rs", "pub struct Y;\nfn f() { crate::a::x::g(); }\n");
    let cycle = find_cycle(&module_graph(tmp.path()).0).expect("the cycle x -> y -> x");
    assert_eq!(cycle.iter().map(display).collect::<Vec<_>>(), ["a/x", "a/y", "a/x"]);

    // A child that imports its parent's re-export, while the parent imports the child.
    write("a/y.rs", "pub struct Y;\n");
    write("a/x.rs", "use super::{y::Y, Z};\npub struct X;\n");
    write("a/mod.rs", "mod x;\nmod y;\npub use x::X;\npub struct Z;\n");
    let cycle = find_cycle(&module_graph(tmp.path()).0).expect("the cycle a -> a/x -> a");
    assert_eq!(cycle.iter().map(display).collect::<Vec<_>>(), ["a", "a/x", "a"]);

    // An import of the crate root.
    write("a/x.rs", "use crate::{b::B, A};\npub struct X;\n");
    let (_, root) = module_graph(tmp.path());
    assert_eq!(root, ["a/x names crate::A"]);
}

#[test]
fn the_scanner_sees_grouped_inline_relative_and_super_paths() {
    let modules: BTreeSet<Module> =
        ["fs", "fs/root", "durability", "durability/fsync", "durability/flush", "txn/journal"]
            .iter()
            .map(|m| m.split('/').map(String::from).collect())
            .collect();
    let text = "use crate::{fs::root::Root, durability::{Directory, TempFile}};\n\
                use super::flush::{self, dirs};\n\
                fn f() { crate::txn::journal::x(); let _ = super::super::fs::y; }\n\
                // crate::report in a comment is not a use\n\
                /* nor crate::txn::journal in a block comment */\n\
                const S: &str = \"crate::fs in a string is not one either\";\n";
    let own: Module = vec!["durability".into(), "fsync".into()];
    let (named, root) = names_in(text, &own, &modules);
    let named: Vec<String> = named.iter().map(display).collect();
    assert_eq!(named, ["durability", "durability/flush", "fs", "fs/root", "txn/journal"]);
    assert!(root.is_empty(), "{root:?}");
    let (named, _) =
        names_in("pub use fsync::Fsync;\nuse flush::x;\n", &["durability".into()], &modules);
    let named: Vec<String> = named.iter().map(display).collect();
    assert_eq!(named, ["durability/flush", "durability/fsync"]);
    let (_, root) =
        names_in("use crate::Result;\nfn f() { crate::stderr!(\"x\"); }\n", &own, &modules);
    assert_eq!(root, ["crate::Result"], "a macro is called at the root, not imported from it");
}

fn display(module: &Module) -> String {
    if module.is_empty() {
        "the crate root".to_string()
    } else {
        module.join("/")
    }
}

/// The graph of the crate in `src` and the imports of its root (`file names crate::X`).
fn module_graph(src: &Path) -> (Graph, Vec<String>) {
    let files = rust_files(src);
    let modules: BTreeSet<Module> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut graph = Graph::new();
    let mut root_imports = Vec::new();
    for (module, file) in &files {
        let text =
            std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let (named, root) = names_in(&text, module, &modules);
        root_imports.extend(root.into_iter().map(|r| format!("{} names {r}", display(module))));
        graph.insert(module.clone(), named.into_iter().filter(|m| m != module).collect());
    }
    (graph, root_imports)
}

/// Every .rs file below `src` but the crate root and the programs, with its module path.
fn rust_files(src: &Path) -> Vec<(Module, PathBuf)> {
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
            let mut module: Module =
                rel.with_extension("").iter().map(|c| c.to_string_lossy().into_owned()).collect();
            if module.last().is_some_and(|m| m == "mod") {
                module.pop();
            }
            out.push((module, path));
        }
    }
    out
}

/// The modules (of `modules`) that the file of module `own` names, and the paths by which it
/// names the crate root itself.
fn names_in(
    text: &str,
    own: &[String],
    modules: &BTreeSet<Module>,
) -> (BTreeSet<Module>, Vec<String>) {
    let code = without_comments_and_strings(text);
    let mut named = BTreeSet::new();
    let mut root = Vec::new();
    let mut resolve = |base: Module, path: &[String], spelled: String| {
        let mut full = base;
        full.extend(path.iter().cloned());
        // The deepest module the path names; what follows is an item of it.
        let depth = (0..=full.len()).rev().find(|&n| n == 0 || modules.contains(&full[..n]));
        match depth {
            Some(0) | None => root.push(spelled),
            Some(n) => {
                named.insert(full[..n].to_vec());
            }
        }
    };
    let bytes = code.as_bytes();
    // The brace depths at which the inline modules (`mod tests { ... }`) around the scan
    // opened: a `super::` in one of them climbs to the file's own module first.
    let mut inline: Vec<usize> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < code.len() {
        // Only at the start of a path: not in the middle of `a::crate`, an identifier or `$crate`.
        let boundary =
            i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || b"_:$".contains(&bytes[i - 1]));
        let rest = &code[i..];
        match bytes[i] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if inline.last() == Some(&depth) {
                    inline.pop();
                }
            }
            _ => {}
        }
        if boundary {
            if let Some(tail) = rest.strip_prefix("mod ") {
                let name = tail.trim_start();
                let after = name.trim_start_matches(|c: char| c.is_alphanumeric() || c == '_');
                if after.trim_start().starts_with('{') {
                    inline.push(depth);
                }
            } else if let Some(tail) = rest.strip_prefix("crate::") {
                // A `#[macro_export]` macro has no home but the crate root: `crate::stderr!` is
                // a call of one, not an import.
                let ident = tail.trim_start_matches(|c: char| c.is_alphanumeric() || c == '_');
                if ident.starts_with('!') {
                    i += "crate::".len();
                    continue;
                }
                for path in use_paths(tail) {
                    let spelled = format!("crate::{}", path.join("::"));
                    resolve(Vec::new(), &path, spelled);
                }
            } else if rest.starts_with("super::") || rest.starts_with("self::") {
                let mut base: Module = own.to_vec();
                let mut t = rest;
                if let Some(next) = t.strip_prefix("self::") {
                    t = next;
                }
                let mut inside = inline.len();
                while let Some(next) = t.strip_prefix("super::") {
                    if inside > 0 {
                        inside -= 1;
                    } else {
                        base.pop();
                    }
                    t = next;
                }
                for path in use_paths(t) {
                    let spelled = format!("{}::{}", display(&base), path.join("::"));
                    resolve(base.clone(), &path, spelled);
                }
            } else if let Some(tail) = rest.strip_prefix("use ") {
                // `use child::Item;` in a module with children.
                let tail = tail.trim_start();
                let first: String =
                    tail.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                let mut child = own.to_vec();
                child.push(first);
                if modules.contains(&child) {
                    for path in use_paths(tail) {
                        resolve(own.to_vec(), &path, String::new());
                    }
                }
            }
        }
        i += rest.chars().next().map_or(1, char::len_utf8);
    }
    (named, root)
}

/// The paths of a use tree (`a::{b::c, d}::e` is not Rust; `a::{b::c, d}` gives `a::b::c` and
/// `a::d`), each as its segments, up to where the tree ends.
fn use_paths(tail: &str) -> Vec<Vec<String>> {
    let ident = |s: &str| -> String {
        s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
    };
    let mut prefix = Vec::new();
    let mut t = tail.trim_start();
    loop {
        if let Some(group) = t.strip_prefix('{') {
            let mut out = Vec::new();
            for item in split_group(group) {
                for mut path in use_paths(item) {
                    let mut full = prefix.clone();
                    full.append(&mut path);
                    out.push(full);
                }
            }
            return out;
        }
        let name = ident(t);
        if name.is_empty() || name == "self" {
            return vec![prefix];
        }
        t = &t[name.len()..];
        prefix.push(name);
        match t.strip_prefix("::") {
            Some(next) => t = next.trim_start(),
            None => return vec![prefix],
        }
    }
}

/// The top-level items of a `{...}` group whose opening brace is already consumed.
fn split_group(group: &str) -> Vec<&str> {
    let mut depth = 0;
    let mut items = Vec::new();
    let mut start = 0;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items
}

/// `text` with its comments and the contents of its string and character literals blanked,
/// so that only code is scanned.
fn without_comments_and_strings(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        match (chars[i], at(i + 1)) {
            ('/', '/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            ('/', '*') => {
                i += 2;
                while i < chars.len() && !(chars[i - 1] == '*' && chars[i] == '/') {
                    i += 1;
                }
            }
            // A raw string: `r"..."`, `r#"..."#`.
            ('r', '"' | '#') if !at(i.wrapping_sub(1)).is_alphanumeric() => {
                let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
                if at(i + 1 + hashes) != '"' {
                    out.push('r');
                    i += 1;
                    continue;
                }
                i += 2 + hashes;
                while i < chars.len()
                    && !(chars[i] == '"' && (1..=hashes).all(|h| at(i + h) == '#'))
                {
                    i += 1;
                }
                i += hashes;
            }
            ('"', _) => {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
            }
            // A character literal (`'"'`, `'\''`), not a lifetime (`'a`).
            ('\'', '\\') => {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
            }
            ('\'', _) if at(i + 2) == '\'' => i += 2,
            (c, _) => {
                out.push(c);
                i += 1;
                continue;
            }
        }
        out.push(' ');
        i += 1;
    }
    out
}

/// A cycle in `graph`, as the modules on it with the first repeated at the end.
fn find_cycle(graph: &Graph) -> Option<Vec<Module>> {
    // Depth-first with an explicit stack; `path` holds the modules of the current path.
    let mut done: BTreeSet<&Module> = BTreeSet::new();
    for start in graph.keys() {
        if done.contains(start) {
            continue;
        }
        let mut path: Vec<&Module> = vec![start];
        let mut iters = vec![graph[start].iter()];
        while let Some(it) = iters.last_mut() {
            match it.next() {
                Some(next) if path.contains(&next) => {
                    let at = path.iter().position(|m| *m == next).unwrap();
                    let mut cycle: Vec<Module> = path[at..].iter().map(|m| m.to_vec()).collect();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(next) if !done.contains(next) && graph.contains_key(next) => {
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
