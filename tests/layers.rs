//! The layers hold: no file of `src/` imports a layer above its own, and
//! none names the crate root's re-exports (`crate::begin`) instead of the
//! module it uses (`crate::par::begin`). The layers are read from the
//! table in ARCHITECTURE.md ("The layer table"), so the page and the
//! check cannot drift apart. Also: ARCHITECTURE.md has a line per file
//! of `src/` ("Every file"), and every file opens with `//!` lines
//! saying what it holds.

use std::collections::HashMap;
use std::path::Path;

/// The table's rows: top-level module -> level.
fn layer_table() -> HashMap<String, usize> {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
            .expect("ARCHITECTURE.md is readable");
    let start = page
        .find("<!-- layers: begin -->")
        .expect("ARCHITECTURE.md has the layer table");
    let end = page.find("<!-- layers: end -->").expect("the table ends");
    let mut table = HashMap::new();
    for row in page[start..end].lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        // | level | layer | modules |
        let Ok(level) = cells[1].parse::<usize>() else {
            continue; // the header and its rule
        };
        for module in cells[3].split(',') {
            let module = module.trim().trim_matches('`');
            assert!(!module.is_empty(), "an empty module in row {row:?}");
            table.insert(module.to_string(), level);
        }
    }
    assert!(table.len() > 10, "the table lists the layers: {table:?}");
    table
}

/// What is wrong with one source line of a file of top-level module
/// `top`, against `table`.
fn check_line(table: &HashMap<String, usize>, top: &str, line: &str) -> Vec<String> {
    let code = line.trim_start();
    if code.starts_with("//") {
        return Vec::new(); // comments and docs may point anywhere
    }
    let own = table[top];
    let mut wrong = Vec::new();
    let bytes = code.as_bytes();
    let mut at = 0;
    while let Some(found) = code[at..].find("crate::") {
        let i = at + found;
        at = i + "crate::".len();
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c == '$' || c == '_' || c.is_alphanumeric()) {
            continue; // `$crate::` in a macro, or a longer name
        }
        if bytes.get(at) == Some(&b'{') {
            wrong.push(format!(
                "`{}`: a group of the crate root's names",
                code.trim()
            ));
            continue;
        }
        let name: String = code[at..]
            .chars()
            .take_while(|c| *c == '_' || c.is_alphanumeric())
            .collect();
        let after = code[at + name.len()..].trim_start();
        if after.starts_with('!') {
            continue; // an exported macro lives at the root
        }
        match table.get(&name) {
            Some(&level) if level > own => wrong.push(format!(
                "`crate::{name}` (level {level}) from a file of `{top}` (level {own})"
            )),
            Some(_) => {}
            None => wrong.push(format!(
                "`crate::{name}`: a re-export of the crate root; name the module it comes from"
            )),
        }
    }
    wrong
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_file_imports_a_layer_above_its_own() {
    let table = layer_table();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let top = first.trim_end_matches(".rs");
        if top == "lib" {
            continue; // the root declares and re-exports every layer
        }
        assert!(
            table.contains_key(top),
            "src/{} belongs to no layer of ARCHITECTURE.md's table",
            rel.display()
        );
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for w in check_line(&table, top, line) {
                wrong.push(format!("src/{}:{}: {w}", rel.display(), n + 1));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers (ARCHITECTURE.md, \"The layer table\"):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_check_finds_a_planted_upward_import_and_a_root_re_export() {
    let table = layer_table();
    // A scheduler file reaching up to the composition root.
    let up = check_line(&table, "sched", "use crate::runtime::Runtime;");
    assert_eq!(up.len(), 1, "{up:?}");
    assert!(up[0].contains("crate::runtime"), "{up:?}");
    // A file of `par` naming the root's re-export of its own `begin`.
    let root = check_line(&table, "par", "    crate::begin(|| ());");
    assert_eq!(root.len(), 1, "{root:?}");
    assert!(root[0].contains("re-export"), "{root:?}");
    // What is allowed: downward, the same layer, macros, `$crate`, docs.
    for ok in [
        "use crate::sched::WorkerLocal;",
        "use crate::par::begin;",
        "crate::remote!(Ping);",
        "$crate::remote::on($l, $x)",
        "/// See [`crate::runtime::Runtime`].",
    ] {
        assert!(check_line(&table, "par", ok).is_empty(), "{ok}");
    }
}

/// ARCHITECTURE.md's file table ("Every file"): the files it names,
/// relative to `src/`.
fn file_table() -> Vec<String> {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
            .expect("ARCHITECTURE.md is readable");
    let start = page
        .find("<!-- files: begin -->")
        .expect("ARCHITECTURE.md has the file table");
    let end = page
        .find("<!-- files: end -->")
        .expect("the file table ends");
    page[start..end]
        .lines()
        .filter_map(|row| row.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once('`').map(|(file, _)| file.to_string()))
        .collect()
}

#[test]
fn architecture_has_a_line_per_file_and_each_line_a_file() {
    let listed = file_table();
    assert!(
        listed.len() > 100,
        "the file table lists the files: {listed:?}"
    );
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let on_disk: Vec<String> = files
        .iter()
        .map(|f| f.strip_prefix(&src).unwrap().display().to_string())
        .collect();
    let unlisted: Vec<&String> = on_disk.iter().filter(|f| !listed.contains(f)).collect();
    let gone: Vec<&String> = listed.iter().filter(|f| !on_disk.contains(f)).collect();
    assert!(
        unlisted.is_empty() && gone.is_empty(),
        "ARCHITECTURE.md, \"Every file\": no row for {unlisted:?}; rows without a file: {gone:?}"
    );
}

#[test]
fn every_file_says_first_what_it_holds() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let silent: Vec<String> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            !text.starts_with("//!")
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        silent.is_empty(),
        "files that do not open with `//!` lines: {silent:?}"
    );
}

/// The top-level modules a source line names (`crate::NAME`), outside
/// comments and macros' `$crate`.
fn modules_named(line: &str) -> Vec<String> {
    let code = line.trim_start();
    if code.starts_with("//") {
        return Vec::new();
    }
    let mut names = Vec::new();
    let mut at = 0;
    while let Some(found) = code[at..].find("crate::") {
        let i = at + found;
        at = i + "crate::".len();
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c == '$' || c == '_' || c.is_alphanumeric()) {
            continue;
        }
        names.push(
            code[at..]
                .chars()
                .take_while(|c| *c == '_' || c.is_alphanumeric())
                .collect(),
        );
    }
    names
}

/// A circle in `edges` (module -> modules it names), if there is one:
/// its modules in order.
fn find_circle(edges: &HashMap<String, Vec<String>>) -> Option<Vec<String>> {
    fn visit(
        at: &str,
        edges: &HashMap<String, Vec<String>>,
        path: &mut Vec<String>,
        done: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|m| m == at) {
            return Some(path[i..].to_vec());
        }
        if done.iter().any(|m| m == at) {
            return None;
        }
        path.push(at.to_string());
        for next in edges.get(at).into_iter().flatten() {
            if let Some(circle) = visit(next, edges, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.push(at.to_string());
        None
    }
    let mut done = Vec::new();
    let mut starts: Vec<&String> = edges.keys().collect();
    starts.sort();
    starts
        .into_iter()
        .find_map(|m| visit(m, edges, &mut Vec::new(), &mut done))
}

#[test]
fn no_circle_across_top_level_modules() {
    let table = layer_table();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut edges: HashMap<String, Vec<String>> = HashMap::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let top = first.trim_end_matches(".rs").to_string();
        if top == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for name in text.lines().flat_map(modules_named) {
            if name != top && table.contains_key(&name) {
                let to = edges.entry(top.clone()).or_default();
                if !to.contains(&name) {
                    to.push(name);
                }
            }
        }
    }
    assert!(
        edges.values().map(Vec::len).sum::<usize>() > 20,
        "the modules name each other: {edges:?}"
    );
    assert_eq!(
        find_circle(&edges),
        None,
        "modules that import each other in a circle"
    );
    // A planted circle is found.
    let mut planted = edges.clone();
    planted
        .entry("sched".into())
        .or_default()
        .push("task".into());
    planted
        .entry("task".into())
        .or_default()
        .push("sched".into());
    let circle = find_circle(&planted).expect("the planted circle is found");
    assert!(circle.contains(&"sched".to_string()) && circle.contains(&"task".to_string()));
}
