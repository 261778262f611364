//! The source tree's import graph has no circle: among the top-level modules of `src/` (a folder or a file right
//! under it), and among the sibling files of each folder. A circle is where the next defect hides (issue 35): a
//! lower floor that reaches back up cannot be read, tested or moved on its own.
//!
//! Every `crate::…`, `super::…` and `self::…` path of every file under `src/` is read with `syn` (use trees, paths
//! in code, macros' paths where syn sees them) and resolved to the module it names; the strongly connected
//! components of each graph (petgraph) must all be single modules.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use petgraph::algo::tarjan_scc;
use petgraph::graph::DiGraph;
use syn::visit::Visit;

/// One source file: its module path (`["api", "bills"]` for `src/api/bills.rs`, `["api"]` for `src/api/mod.rs`)
/// and whether it is a folder's `mod.rs`.
struct SourceFile {
    module: Vec<String>,
    is_folder_root: bool,
    path: PathBuf,
}

fn source_files(dir: &Path, prefix: &[String], out: &mut Vec<SourceFile>) {
    let mut entries: Vec<_> = fs::read_dir(dir).expect("src/ is readable").map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            let mut next = prefix.to_vec();
            next.push(name);
            source_files(&path, &next, out);
        } else if let Some(stem) = name.strip_suffix(".rs") {
            let (module, is_folder_root) = match stem {
                "mod" => (prefix.to_vec(), true),
                "lib" | "main" if prefix.is_empty() => (Vec::new(), true),
                _ => {
                    let mut m = prefix.to_vec();
                    m.push(stem.to_string());
                    (m, false)
                }
            };
            out.push(SourceFile { module, is_folder_root, path });
        }
    }
}

/// Every path a file names, as absolute module paths (`crate::` stripped, `super::`/`self::` resolved).
struct PathCollector<'a> {
    /// The module the file's code is in (inline `mod` blocks deepen it).
    here: Vec<String>,
    paths: &'a mut BTreeSet<Vec<String>>,
}

impl PathCollector<'_> {
    fn resolve(&self, segments: &[String]) -> Option<Vec<String>> {
        let (first, rest) = segments.split_first()?;
        let mut base = match first.as_str() {
            "crate" => Vec::new(),
            "self" => self.here.clone(),
            "super" => {
                let mut b = self.here.clone();
                b.pop()?;
                b
            }
            _ => return None,
        };
        let mut rest = rest;
        while let Some(("super", tail)) = rest.split_first().map(|(h, t)| (h.as_str(), t)) {
            base.pop()?;
            rest = tail;
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut full = prefix.clone();
                if n.ident != "self" {
                    full.push(n.ident.to_string());
                }
                self.record(&full);
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                full.push(r.ident.to_string());
                self.record(&full);
            }
            syn::UseTree::Glob(_) => self.record(prefix),
            syn::UseTree::Group(g) => {
                for item in &g.items {
                    self.use_tree(prefix, item);
                }
            }
        }
    }

    fn record(&mut self, segments: &[String]) {
        if let Some(resolved) = self.resolve(segments) {
            self.paths.insert(resolved);
        }
    }
}

impl<'ast> Visit<'ast> for PathCollector<'_> {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.record(&segments);
        syn::visit::visit_path(self, path);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        // A test module is the file's own business: what it imports does not make the file depend on it.
        let is_test = item
            .attrs
            .iter()
            .any(|a| a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test"));
        if is_test || item.content.is_none() {
            return;
        }
        self.here.push(item.ident.to_string());
        syn::visit::visit_item_mod(self, item);
        self.here.pop();
    }
}

fn paths_named_by(file: &SourceFile) -> BTreeSet<Vec<String>> {
    let text = fs::read_to_string(&file.path).unwrap();
    let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.path.display()));
    let mut paths = BTreeSet::new();
    // `super` in a folder's mod.rs is the folder's parent, in a plain file the file's folder.
    let here = file.module.clone();
    PathCollector { here, paths: &mut paths }.visit_file(&ast);
    paths
}

/// The strongly connected components of more than one node, each sorted.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let mut graph = DiGraph::<String, ()>::new();
    let mut index = BTreeMap::new();
    for (from, tos) in edges {
        for node in std::iter::once(from).chain(tos) {
            index.entry(node.clone()).or_insert_with(|| graph.add_node(node.clone()));
        }
    }
    for (from, tos) in edges {
        for to in tos {
            graph.add_edge(index[from], index[to], ());
        }
    }
    let mut found: Vec<Vec<String>> = tarjan_scc(&graph)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            let mut names: Vec<String> = c.into_iter().map(|i| graph[i].clone()).collect();
            names.sort();
            names
        })
        .collect();
    found.sort();
    found
}

struct Graphs {
    /// Top-level module → the top-level modules it names.
    modules: BTreeMap<String, BTreeSet<String>>,
    /// Folder → (sibling file → the sibling files it names); a folder's mod.rs is left out (it declares its
    /// children, and a child naming what its folder re-exports is the module's front door, not a circle).
    siblings: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
    /// For a failure message: which file named which path, per module edge.
    witnesses: BTreeMap<(String, String), Vec<String>>,
}

fn graphs() -> Graphs {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    source_files(&root, &[], &mut files);
    assert!(files.len() > 100, "the walk found {} files under src/", files.len());
    let known: BTreeSet<Vec<String>> = files.iter().map(|f| f.module.clone()).collect();

    let mut g = Graphs { modules: BTreeMap::new(), siblings: BTreeMap::new(), witnesses: BTreeMap::new() };
    for file in &files {
        let Some(top) = file.module.first().cloned() else { continue };
        g.modules.entry(top.clone()).or_default();
        for path in paths_named_by(file) {
            let Some(target_top) = path.first() else { continue };
            if !known.iter().any(|m| m.first() == Some(target_top)) {
                continue; // a crate-root item (`crate::SomeType`) or a macro-made name
            }
            if *target_top != top {
                g.modules.entry(top.clone()).or_default().insert(target_top.clone());
                g.witnesses.entry((top.clone(), target_top.clone())).or_default().push(format!(
                    "{} names {}",
                    file.path.strip_prefix(&root).unwrap().display(),
                    path.join("::")
                ));
            }
            // sibling edge: same folder, both plain files
            if file.is_folder_root || file.module.len() < 2 {
                continue;
            }
            let folder = &file.module[..file.module.len() - 1];
            // the longest known module that prefixes the path
            let target = (1..=path.len()).rev().map(|n| path[..n].to_vec()).find(|m| known.contains(m));
            let Some(target) = target else { continue };
            if target.len() == file.module.len() && target[..folder.len()] == *folder && target != file.module {
                g.siblings
                    .entry(folder.join("/"))
                    .or_default()
                    .entry(file.module.last().unwrap().clone())
                    .or_default()
                    .insert(target.last().unwrap().clone());
            }
        }
    }
    g
}

#[test]
fn no_top_level_module_reaches_back_into_a_module_that_reaches_it() {
    let g = graphs();
    assert!(g.modules.len() > 20, "top-level modules found: {:?}", g.modules.keys());
    assert!(g.modules["api"].contains("usecase"), "the walk must see api's use of usecase: {:?}", g.modules["api"]);
    let found = circles(&g.modules);
    let mut explain = String::new();
    for circle in &found {
        explain.push_str(&format!("circle: {}\n", circle.join(", ")));
        for from in circle {
            for to in circle {
                if let Some(w) = g.witnesses.get(&(from.clone(), to.clone())) {
                    explain.push_str(&format!(
                        "  {from} -> {to}: {}\n",
                        w.iter().take(3).cloned().collect::<Vec<_>>().join("; ")
                    ));
                }
            }
        }
    }
    assert!(found.is_empty(), "module import circles:\n{explain}");
}

#[test]
fn no_file_reaches_back_into_a_sibling_that_reaches_it() {
    let g = graphs();
    assert!(!g.siblings.is_empty());
    let mut found = Vec::new();
    for (folder, edges) in &g.siblings {
        for circle in circles(edges) {
            found.push(format!("src/{folder}/: {}", circle.join(" <-> ")));
        }
    }
    assert!(found.is_empty(), "file circles inside a folder:\n{}", found.join("\n"));
}

#[test]
fn a_circle_is_found_where_there_is_one() {
    let edges: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["c".to_string()])),
        ("c".to_string(), BTreeSet::from(["a".to_string()])),
        ("d".to_string(), BTreeSet::from(["a".to_string()])),
    ]
    .into();
    assert_eq!(circles(&edges), vec![vec!["a".to_string(), "b".to_string(), "c".to_string()]]);
}

#[test]
fn paths_resolve_from_where_the_file_sits() {
    let mut paths = BTreeSet::new();
    let collector = PathCollector { here: vec!["api".into(), "bills".into()], paths: &mut paths };
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(collector.resolve(&s(&["super", "doc", "X"])), Some(s(&["api", "doc", "X"])));
    assert_eq!(collector.resolve(&s(&["crate", "db", "bills"])), Some(s(&["db", "bills"])));
    assert_eq!(collector.resolve(&s(&["self", "inner"])), Some(s(&["api", "bills", "inner"])));
    assert_eq!(collector.resolve(&s(&["std", "fmt"])), None);
}
