//! The Unbalanced Tree Search benchmark (UTS: Olivier, Huan, Liu, Prins,
//! Dinan, Sadayappan, Tseng, "UTS: An Unbalanced Tree Search Benchmark",
//! LCPC 2006): count the nodes of a tree that exists only as it is
//! explored. Each node has a 20-byte state; its number of children is a
//! random draw from that state, and child i's state is derived from the
//! parent's, so the tree is the same whatever order it is explored in
//! and whoever explores which part, yet no part's size can be known
//! before it is explored.
//!
//! The random numbers are the reference implementation's splittable
//! SHA-1 generator (its `rng/brg_sha1`):
//!
//! - the root's state is the SHA-1 digest of 20 bytes: 16 zeros, then the
//!   root seed `r` as a 4-byte big-endian integer;
//! - child i's state is the digest of the parent's 20 bytes followed by i
//!   as a 4-byte big-endian integer;
//! - a node's random number is its state's last 4 bytes, big-endian,
//!   with the top bit cleared; as a probability, that number / 2^31.
//!
//! Two of the reference's kinds of tree are here, with its parameters:
//!
//! - geometric (`-t 1`), with the fixed shape (`-a 3`): below depth
//!   `-d`, a node's number of children follows the geometric distribution
//!   of mean `-b`, drawn by inverting its distribution function:
//!   `floor(log(1 - u) / log(1 - p))` with `p = 1 / (1 + b)`; at depth
//!   `-d` and below, none;
//! - binomial (`-t 0`): the root has `-b` children; every other node has
//!   `-m` children with probability `-q`, else none;
//!
//! and no node but a binomial root has more than 100 children. UTS's
//! sample trees T1, T3, T1L and T3L ([`Tree`]) have published sizes,
//! which this program finds exactly.
//!
//! - [`Uts`]: splittable work for `cantus::balance`: a stack of nodes
//!   still to expand, given away from the bottom (the oldest);
//! - [`uts_join`]: the same walk with `cantus::join` over every node's
//!   children (the fork-join peer);
//! - [`uts_seq`]: the same walk on one thread (the reference).
//!
//! Shared by the examples, tests and benchmarks (the workspace crate
//! `cantus-programs`), each of which uses a part of it.

// The crate's rust-version (1.85) predates `is_multiple_of`, which the
// bench crate's lints (no rust-version) would have.
#![allow(clippy::manual_is_multiple_of)]

use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};

/// The most children any node but a binomial tree's root may have (the
/// reference's `MAXNUMCHILDREN`).
const MAX_CHILDREN: u32 = 100;

/// A tree's parameters, as the reference's command line gives them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Params {
    /// `-t 1 -a 3 -b branching -d depth -r root_seed`: geometric, the
    /// same mean number of children at every depth above `depth`.
    Geometric {
        /// Mean number of children (`-b`).
        branching: f64,
        /// Nodes at this depth and below have no children (`-d`).
        depth: u32,
        /// The root's seed (`-r`).
        root_seed: i32,
    },
    /// `-t 0 -b root_children -m children -q probability -r root_seed`:
    /// binomial.
    Binomial {
        /// The root's number of children (`-b`).
        root_children: f64,
        /// Children of a node that has any (`-m`).
        children: u32,
        /// The probability that a node has children (`-q`).
        probability: f64,
        /// The root's seed (`-r`).
        root_seed: i32,
    },
}

/// What a walk of a tree finds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Nodes in the tree.
    pub nodes: u64,
    /// Nodes without children.
    pub leaves: u64,
    /// The largest depth of a node (the root's is 0).
    pub depth: u32,
}

impl Counts {
    /// Folds `other`, counts of a disjoint part of the tree, into these.
    pub fn merge(&mut self, other: Counts) {
        self.nodes += other.nodes;
        self.leaves += other.leaves;
        self.depth = self.depth.max(other.depth);
    }
}

/// The trees this program knows by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tree {
    /// UTS's sample tree T1: geometric, fixed shape,
    /// `-t 1 -a 3 -d 10 -b 4 -r 19`; 4,130,071 nodes.
    T1,
    /// UTS's sample tree T3: binomial,
    /// `-t 0 -b 2000 -q 0.124875 -m 8 -r 42`; 4,112,897 nodes.
    T3,
    /// UTS's sample tree T1L: geometric, fixed shape,
    /// `-t 1 -a 3 -d 13 -b 4 -r 29`; 102,181,082 nodes.
    T1L,
    /// UTS's sample tree T3L: binomial,
    /// `-t 0 -b 2000 -q 0.200014 -m 5 -r 7`; 111,345,631 nodes.
    T3L,
    /// Ours, for quick tests: T1 cut at depth 6 (`-t 1 -a 3 -d 6 -b 4
    /// -r 19`), that is T1's nodes of depth 6 or less (the same root,
    /// so the same nodes); 16,000 nodes by this program's walk, which
    /// finds T1's, T3's, T1L's and T3L's published sizes.
    T1Small,
    /// Ours, for quick tests: T3 with 20 children at the root (`-t 0
    /// -b 20 -q 0.124875 -m 8 -r 42`), that is T3's root and the
    /// subtrees of its first 20 children; 6,213 nodes by this program's
    /// walk.
    T3Small,
}

impl Tree {
    /// Every named tree.
    pub const ALL: [Tree; 6] = [
        Tree::T1,
        Tree::T3,
        Tree::T1L,
        Tree::T3L,
        Tree::T1Small,
        Tree::T3Small,
    ];

    /// The tree named `name`: "T1", "T3", "T1L", "T3L", "T1-small" or
    /// "T3-small".
    pub fn parse(name: &str) -> Option<Tree> {
        Tree::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The tree's name, as [`Tree::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Tree::T1 => "T1",
            Tree::T3 => "T3",
            Tree::T1L => "T1L",
            Tree::T3L => "T3L",
            Tree::T1Small => "T1-small",
            Tree::T3Small => "T3-small",
        }
    }

    /// The tree's parameters.
    pub fn params(self) -> Params {
        match self {
            Tree::T1 => Params::Geometric {
                branching: 4.0,
                depth: 10,
                root_seed: 19,
            },
            Tree::T3 => Params::Binomial {
                root_children: 2000.0,
                children: 8,
                probability: 0.124875,
                root_seed: 42,
            },
            Tree::T1L => Params::Geometric {
                branching: 4.0,
                depth: 13,
                root_seed: 29,
            },
            Tree::T3L => Params::Binomial {
                root_children: 2000.0,
                children: 5,
                probability: 0.200014,
                root_seed: 7,
            },
            Tree::T1Small => Params::Geometric {
                branching: 4.0,
                depth: 6,
                root_seed: 19,
            },
            Tree::T3Small => Params::Binomial {
                root_children: 20.0,
                children: 8,
                probability: 0.124875,
                root_seed: 42,
            },
        }
    }

    /// The tree's counts: for UTS's sample trees, the sizes the UTS
    /// distribution publishes (nodes) and its reference implementation
    /// prints (leaves, depth); for ours, what this program's sequential
    /// walk found.
    pub fn known_counts(self) -> Counts {
        let (nodes, leaves, depth) = match self {
            Tree::T1 => (4_130_071, 3_305_118, 10),
            Tree::T3 => (4_112_897, 3_599_034, 1_572),
            Tree::T1L => (102_181_082, 81_746_377, 13),
            Tree::T3L => (111_345_631, 89_076_904, 17_844),
            Tree::T1Small => (16_000, 12_839, 6),
            Tree::T3Small => (6_213, 5_438, 67),
        };
        Counts {
            nodes,
            leaves,
            depth,
        }
    }
}

/// A node's 20-byte random state.
type State = [u8; 20];

/// A node waiting to be expanded.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Node {
    /// Its random state.
    state: State,
    /// Its depth (the root's is 0).
    height: u32,
}

impl Node {
    /// The root of a tree whose root seed is `seed` (the reference's
    /// `rng_init`).
    fn root(seed: i32) -> Node {
        let mut bytes = [0u8; 20];
        bytes[16..].copy_from_slice(&seed.to_be_bytes());
        Node {
            state: Sha1::digest(bytes).into(),
            height: 0,
        }
    }

    /// This node's child `i` (the reference's `rng_spawn`).
    fn child(&self, i: u32) -> Node {
        let state = Sha1::new()
            .chain_update(self.state)
            .chain_update(i.to_be_bytes())
            .finalize()
            .into();
        Node {
            state,
            height: self.height + 1,
        }
    }

    /// The node's random number, from 0 to 2^31 - 1 (the reference's
    /// `rng_rand`).
    fn random(&self) -> u32 {
        u32::from_be_bytes([
            self.state[16],
            self.state[17],
            self.state[18],
            self.state[19],
        ]) & 0x7fff_ffff
    }

    /// The node's random number as a probability in [0, 1) (the
    /// reference's `rng_toProb`).
    fn probability(&self) -> f64 {
        self.random() as f64 / 2_147_483_648.0
    }

    /// How many children the node has in the tree `params` (the
    /// reference's `uts_numChildren`).
    fn num_children(&self, params: &Params) -> u32 {
        match *params {
            Params::Geometric {
                branching, depth, ..
            } => {
                // The root draws from the mean whatever the depth limit.
                if self.height > 0 && self.height >= depth {
                    return 0;
                }
                let p = 1.0 / (1.0 + branching);
                let u = self.probability();
                let n = ((1.0 - u).ln() / (1.0 - p).ln()).floor() as u32;
                n.min(MAX_CHILDREN)
            }
            Params::Binomial {
                root_children,
                children,
                probability,
                ..
            } => {
                if self.height == 0 {
                    // A root's count is not capped at MAX_CHILDREN:
                    // floor(b), never more than ceil(b).
                    root_children.floor() as u32
                } else if self.probability() < probability {
                    children.min(MAX_CHILDREN)
                } else {
                    0
                }
            }
        }
    }
}

impl Params {
    /// The tree's root.
    fn root(&self) -> Node {
        match *self {
            Params::Geometric { root_seed, .. } | Params::Binomial { root_seed, .. } => {
                Node::root(root_seed)
            }
        }
    }
}

/// Expands `node`: counts it and calls `push` with each child.
fn expand(node: &Node, params: &Params, counts: &mut Counts, mut push: impl FnMut(Node)) {
    counts.nodes += 1;
    counts.depth = counts.depth.max(node.height);
    let children = node.num_children(params);
    if children == 0 {
        counts.leaves += 1;
    }
    for i in 0..children {
        push(node.child(i));
    }
}

/// Walks the tree on the calling thread: the sequential reference (depth
/// first, with an explicit stack: T3 is 1,572 levels deep).
pub fn uts_seq(tree: Tree) -> Counts {
    let params = tree.params();
    let mut counts = Counts::default();
    let mut stack = vec![params.root()];
    while let Some(node) = stack.pop() {
        expand(&node, &params, &mut counts, |child| stack.push(child));
    }
    counts
}

/// Walks the tree with a `cantus::join` at every node, over halves of its
/// children (the fork-join peer of [`Uts`]); call it from a task. Each
/// level of the tree takes a few frames of the stack of whichever task
/// runs it, so a deep tree needs large task stacks: T1 (10 levels) runs
/// on the default ones, T3 (1,572 levels) does not.
pub fn uts_join(tree: Tree) -> Counts {
    let params = tree.params();
    subtree_join(&params.root(), &params)
}

/// The counts of `node`'s subtree, its children's subtrees joined.
fn subtree_join(node: &Node, params: &Params) -> Counts {
    let children = node.num_children(params);
    let mut counts = Counts {
        nodes: 1,
        leaves: (children == 0) as u64,
        depth: node.height,
    };
    if children > 0 {
        counts.merge(children_join(node, 0, children, params));
    }
    counts
}

/// The counts of the subtrees of `parent`'s children `first..end`
/// (at least one), by halves.
fn children_join(parent: &Node, first: u32, end: u32, params: &Params) -> Counts {
    if end - first == 1 {
        return subtree_join(&parent.child(first), params);
    }
    let middle = first + (end - first) / 2;
    let (mut counts, rest) = cantus::join(
        || children_join(parent, first, middle, params),
        || children_join(parent, middle, end, params),
    );
    counts.merge(rest);
    counts
}

/// A UTS tree as splittable work: the nodes still to expand. A unit is
/// one node: counted, its number of children drawn, each child's state
/// derived (one SHA-1 each) and pushed. The stack grows at its top
/// (depth first), so its oldest entries, at the bottom, are the
/// shallowest; a split gives away every other entry
/// (`balance::split_stack`).
#[derive(Debug, Serialize, Deserialize)]
pub struct Uts {
    /// The tree.
    params: Params,
    /// Nodes still to expand, the oldest first (encoded as one byte
    /// string: serde would encode each state byte by byte, and a T3
    /// piece holds a thousand nodes).
    #[serde(with = "node_bytes")]
    pending: Vec<Node>,
}

/// A stack of nodes as one byte string: 24 bytes a node (the state, then
/// the height, little-endian).
mod node_bytes {
    use super::Node;
    use serde::de::{Error, Visitor};
    use serde::{Deserializer, Serializer};

    /// Bytes a node takes.
    const NODE: usize = 24;

    /// Encodes the nodes as their bytes.
    pub fn serialize<S: Serializer>(nodes: &[Node], s: S) -> Result<S::Ok, S::Error> {
        let mut bytes = Vec::with_capacity(nodes.len() * NODE);
        for n in nodes {
            bytes.extend_from_slice(&n.state);
            bytes.extend_from_slice(&n.height.to_le_bytes());
        }
        s.serialize_bytes(&bytes)
    }

    /// Decodes what [`serialize`] encoded.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Node>, D::Error> {
        d.deserialize_bytes(Nodes)
    }

    /// Builds the nodes from the bytes.
    struct Nodes;

    impl<'de> Visitor<'de> for Nodes {
        type Value = Vec<Node>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("24 bytes a node")
        }

        fn visit_bytes<E: Error>(self, b: &[u8]) -> Result<Vec<Node>, E> {
            if b.len() % NODE != 0 {
                return Err(E::invalid_length(b.len(), &self));
            }
            Ok(b.chunks_exact(NODE)
                .map(|c| Node {
                    state: c[..20].try_into().expect("20 bytes"),
                    height: u32::from_le_bytes(c[20..].try_into().expect("4 bytes")),
                })
                .collect())
        }
    }
}

impl Uts {
    /// The work of walking `tree` from its root.
    pub fn new(tree: Tree) -> Uts {
        let params = tree.params();
        Uts {
            params,
            pending: vec![params.root()],
        }
    }
}

impl cantus::balance::Splittable for Uts {
    /// What the walk found.
    type Result = Counts;

    fn run(&mut self, units: usize, counts: &mut Counts) -> bool {
        for _ in 0..units {
            let Some(node) = self.pending.pop() else {
                return false;
            };
            expand(&node, &self.params, counts, |child| {
                self.pending.push(child)
            });
        }
        !self.pending.is_empty()
    }

    fn split(&mut self) -> Option<Uts> {
        // Every other pending entry, from the oldest: each level's
        // siblings shared about evenly.
        cantus::balance::split_stack(&mut self.pending).map(|pending| Uts {
            params: self.params,
            pending,
        })
    }

    fn merge(counts: &mut Counts, other: Counts) {
        counts.merge(other);
    }
}

cantus::splittable!(Uts);
