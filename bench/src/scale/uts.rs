//! A UTS-style unbalanced tree search (Olivier et al., "UTS: An
//! Unbalanced Tree Search Benchmark", LCPC 2006): count the nodes of a
//! tree that exists only implicitly, each node's number of children drawn
//! from a random law keyed by the node itself, with a task per node and
//! blocking joins.
//!
//! # The tree
//!
//! A node is a 64-bit state and its depth. The root's state is
//! `mix(seed)`; child `i` of a node with state `s` has state
//! `mix(s + (i + 1) * GAMMA)`, where `GAMMA` is SplitMix64's increment
//! (the golden ratio in 64-bit fixed point) and `mix` SplitMix64's output
//! function (Steele, Lea and Flood, "Fast splittable pseudorandom number
//! generators", OOPSLA 2014). So a child's state is one SplitMix64 step
//! `i + 1` positions ahead of its parent's, which makes the tree
//! *splittable*: any node's subtree can be generated from the node alone,
//! in any order, by any worker. (UTS uses SHA-1 for the same purpose; this
//! hash is not cryptographic, which UTS does not need either, and costs a
//! few nanoseconds instead of about a microsecond, so the benchmark
//! measures the tasking layer rather than the hash.) A node's own random
//! number is its state's top 53 bits as a value in `[0, 1)`.
//!
//! # The laws
//!
//! - **Geometric** (UTS's T1 family, "fixed" shape): a node above the depth
//!   limit has `floor(ln(1 - u) / ln(1 - p))` children, `p = 1 / (1 + b0)`:
//!   geometrically distributed with mean `b0`; nodes at the limit have
//!   none. Wide and bushy, about `b0^depth` nodes.
//! - **Binomial** (UTS's T3 family): the root has `r` children; any other
//!   node has `m` children with probability `q`, else none. With `m * q`
//!   just below 1 the process is nearly critical: most subtrees die at
//!   once, a few run very deep, so the tree is deep and narrow and the
//!   work is hard to balance.
//!
//! The seeds below were chosen so the trees have about the sizes of UTS's
//! T1 (4.1 million nodes) and T3 (4.1 million nodes, depth 1572); the
//! counts are pinned by a unit test.

use crate::apps::ForkJoin;

/// SplitMix64's increment: 2^64 / golden ratio, odd.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function (variant 13 of Stafford's mixers).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The state of child `i` of the node with state `parent`.
fn child_state(parent: u64, i: u64) -> u64 {
    mix(parent.wrapping_add(GAMMA.wrapping_mul(i + 1)))
}

/// The node's random number: the top 53 bits of its state in `[0, 1)`.
fn unit(state: u64) -> f64 {
    (state >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

/// How many children a node has.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Law {
    /// Geometric with mean `b0` above `max_depth`, none at it.
    Geometric { b0: f64, max_depth: u32 },
    /// `root` children at the root; elsewhere `m` with probability `q`.
    Binomial { root: u64, m: u64, q: f64 },
}

/// One tree: a law and the root's seed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tree {
    /// `uts_t1` or `uts_t3`.
    pub(crate) name: &'static str,
    pub(crate) law: Law,
    pub(crate) seed: u64,
    /// Its node count, as the serial traversal finds it (pinned by a test;
    /// every run checks it again).
    pub(crate) nodes: u64,
    /// `ln(1 - p)` of the geometric law (0 for binomial).
    ln_fail: f64,
}

impl Tree {
    const fn new(name: &'static str, law: Law, seed: u64, nodes: u64) -> Tree {
        Tree {
            name,
            law,
            seed,
            nodes,
            ln_fail: 0.0,
        }
    }

    /// With the geometric law's constant computed (`ln` is not const).
    fn ready(mut self) -> Tree {
        if let Law::Geometric { b0, .. } = self.law {
            self.ln_fail = (1.0 - 1.0 / (1.0 + b0)).ln();
        }
        self
    }

    /// The T1-like tree (geometric, mean 4, depth 10: 4,027,408 nodes) or
    /// with `quick` a smaller one of the same law (depth 7).
    pub(crate) fn t1(quick: bool) -> Tree {
        if quick {
            Tree::new(
                "uts_t1",
                Law::Geometric {
                    b0: 4.0,
                    max_depth: 7,
                },
                18,
                131_995,
            )
            .ready()
        } else {
            Tree::new(
                "uts_t1",
                Law::Geometric {
                    b0: 4.0,
                    max_depth: 10,
                },
                28,
                4_027_408,
            )
            .ready()
        }
    }

    /// The T3-like tree (binomial, root 2000, m = 8, q = 0.124875, so
    /// m * q = 0.999, as UTS's T3: 3,678,897 nodes, deepest at depth 1121) or
    /// with `quick` a smaller one of the same law (another seed: 251,209
    /// nodes, deepest at depth 520).
    pub(crate) fn t3(quick: bool) -> Tree {
        let law = Law::Binomial {
            root: 2000,
            m: 8,
            q: 0.124_875,
        };
        if quick {
            Tree::new("uts_t3", law, 55, 251_209).ready()
        } else {
            Tree::new("uts_t3", law, 99, 3_678_897).ready()
        }
    }

    fn root(&self) -> u64 {
        mix(self.seed)
    }

    /// The number of children of the node `state` at `depth`.
    #[inline]
    fn children(&self, state: u64, depth: u32) -> u64 {
        match self.law {
            Law::Geometric { max_depth, .. } => {
                if depth >= max_depth {
                    0
                } else {
                    ((1.0 - unit(state)).ln() / self.ln_fail) as u64
                }
            }
            Law::Binomial { root, m, q } => {
                if depth == 0 {
                    root
                } else if unit(state) < q {
                    m
                } else {
                    0
                }
            }
        }
    }

    /// A one-line description of the law.
    pub(crate) fn describe(&self) -> String {
        match self.law {
            Law::Geometric { b0, max_depth } => format!(
                "{}: geometric, mean {b0} children, depth {max_depth}, seed {}",
                self.name, self.seed
            ),
            Law::Binomial { root, m, q } => format!(
                "{}: binomial, root {root}, m {m}, q {q}, seed {}",
                self.name, self.seed
            ),
        }
    }

    /// Counts the nodes serially with an explicit stack (no recursion, no
    /// tasks: an independent check of the parallel count). Returns the
    /// count and the greatest depth.
    pub(crate) fn serial_count(&self) -> (u64, u32) {
        let mut stack = vec![(self.root(), 0u32)];
        let (mut nodes, mut deepest) = (0u64, 0u32);
        while let Some((s, d)) = stack.pop() {
            nodes += 1;
            deepest = deepest.max(d);
            for i in 0..self.children(s, d) {
                stack.push((child_state(s, i), d + 1));
            }
        }
        (nodes, deepest)
    }

    /// Counts the nodes with a task per node: the children of a node are
    /// split in halves by `J::join` until one is left.
    pub(crate) fn count<J: ForkJoin>(&self) -> u64 {
        self.count_from::<J>(self.root(), 0)
    }

    fn count_from<J: ForkJoin>(&self, state: u64, depth: u32) -> u64 {
        let k = self.children(state, depth);
        1 + self.count_children::<J>(state, depth, 0, k)
    }

    /// The nodes under children `lo..hi` of the node `state`.
    fn count_children<J: ForkJoin>(&self, state: u64, depth: u32, lo: u64, hi: u64) -> u64 {
        match hi - lo {
            0 => 0,
            1 => self.count_from::<J>(child_state(state, lo), depth + 1),
            n => {
                let mid = lo + n / 2;
                let (a, b) = J::join(
                    || self.count_children::<J>(state, depth, lo, mid),
                    || self.count_children::<J>(state, depth, mid, hi),
                );
                a + b
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apps::Serial;

    #[test]
    fn hash_and_laws_are_pinned() {
        // SplitMix64 from state 0: the first output of the reference
        // generator is mix(GAMMA).
        assert_eq!(mix(GAMMA), 0xE220_A839_7B1D_CDAF);
        assert_eq!(child_state(0, 0), mix(GAMMA));
        assert!((0..1000).all(|i| (0.0..1.0).contains(&unit(child_state(7, i)))));
        for t in [Tree::t1(true), Tree::t3(true)] {
            let (n, _) = t.serial_count();
            assert_eq!(n, t.nodes, "{}", t.describe());
            assert_eq!(t.count::<Serial>(), n, "{}", t.describe());
        }
        assert_eq!(Tree::t3(true).serial_count().1, 520);
    }

    #[test]
    #[ignore = "counts the full-size trees (a few seconds)"]
    fn full_trees_are_pinned() {
        for t in [Tree::t1(false), Tree::t3(false)] {
            assert_eq!(t.serial_count().0, t.nodes, "{}", t.describe());
        }
    }

    #[test]
    fn geometric_law_has_the_mean_it_says() {
        let t = Tree::t1(true);
        let n = 200_000u64;
        let total: u64 = (0..n).map(|i| t.children(child_state(1, i), 1)).sum();
        let mean = total as f64 / n as f64;
        assert!((mean - 4.0).abs() < 0.05, "mean {mean}");
    }
}
