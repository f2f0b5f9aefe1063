//! Tree exploration (seed 000, section 7.2): build a binary tree of `n`
//! nodes in parallel, a `cobegin` at every node, each node with a unique
//! id; then sum the ids in parallel, again with a `cobegin` at every node.
//! Checks the sum against `n * (n - 1) / 2` and against a serial walk.
//!
//! `cargo run --release --example tree -- 1048576`

struct Node {
    id: u64,
    left: Option<Box<Node>>,
    right: Option<Box<Node>>,
}

/// A balanced tree holding the ids `lo..hi`, one node each.
fn build(lo: u64, hi: u64) -> Option<Box<Node>> {
    if lo >= hi {
        return None;
    }
    let mid = lo + (hi - lo) / 2;
    let (left, right) = cantus::cobegin!(build(lo, mid), build(mid + 1, hi));
    Some(Box::new(Node {
        id: mid,
        left,
        right,
    }))
}

fn sum(tree: &Option<Box<Node>>) -> u64 {
    match tree {
        None => 0,
        Some(node) => {
            let (a, b) = cantus::cobegin!(sum(&node.left), sum(&node.right));
            node.id + a + b
        }
    }
}

/// Sum and node count, walking the tree serially.
fn sum_serial(tree: &Option<Box<Node>>) -> (u64, u64) {
    match tree {
        None => (0, 0),
        Some(node) => {
            let (a, na) = sum_serial(&node.left);
            let (b, nb) = sum_serial(&node.right);
            (node.id + a + b, na + nb + 1)
        }
    }
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("usage: tree [N]"))
        .unwrap_or(1 << 20);
    let rt = match cantus::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tree: {e}");
            std::process::exit(2);
        }
    };
    let t = std::time::Instant::now();
    let (tree, total) = rt.block_on(|| {
        let tree = build(0, n);
        let total = sum(&tree);
        (tree, total)
    });
    let elapsed = t.elapsed();
    println!(
        "tree of {n} nodes built and summed on {} workers in {:.3} s",
        rt.workers(),
        elapsed.as_secs_f64()
    );
    rt.shutdown();
    let expected = n * n.saturating_sub(1) / 2;
    let (serial, nodes) = sum_serial(&tree);
    if nodes != n {
        eprintln!("tree: WRONG: {nodes} nodes, expected {n}");
        std::process::exit(1);
    }
    if total != expected || serial != expected {
        eprintln!("tree: WRONG: parallel sum {total}, serial walk {serial}, expected {expected}");
        std::process::exit(1);
    }
    println!("tree: sum of ids {total} checked against n(n-1)/2 and a serial walk: OK");
}
