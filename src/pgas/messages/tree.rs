//! The binomial tree the message memory's collectives travel on: over
//! `n` locales, rooted at any of them. A locale's rank is its distance
//! from the root, `(locale - root) mod n`; the parent of rank `v > 0` is
//! `v` with its lowest set bit cleared, and the children of `v` are
//! `v + 2^k` for every `2^k` below `v`'s lowest set bit (for the root:
//! below `n`), those under `n`. So every locale but the root has exactly
//! one parent, the tree is `ceil(log2 n)` deep, and a gather (children
//! to parents) or a broadcast (parents to children) takes that many
//! steps of messages (Thakur, Rabenseifner, Gropp, "Optimization of
//! collective communication operations in MPICH", IJHPCA 19(1), 2005,
//! section 3: <https://doi.org/10.1177/1094342005051521>).

/// The binomial tree over `locales` locales rooted at `root`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tree {
    locales: usize,
    root: usize,
}

impl Tree {
    pub(crate) fn new(locales: usize, root: usize) -> Tree {
        assert!(root < locales, "the root is a locale");
        Tree { locales, root }
    }

    fn rank(&self, locale: usize) -> usize {
        (locale + self.locales - self.root) % self.locales
    }

    fn locale(&self, rank: usize) -> usize {
        (rank + self.root) % self.locales
    }

    /// The locale `locale` sends its gather to (`None` for the root).
    pub(crate) fn parent(&self, locale: usize) -> Option<usize> {
        let v = self.rank(locale);
        (v != 0).then(|| self.locale(v & (v - 1)))
    }

    /// The locales `locale` sends a broadcast on to, the largest subtree
    /// first (its message has the farthest to go).
    pub(crate) fn children(&self, locale: usize) -> impl Iterator<Item = usize> + use<> {
        let tree = *self;
        let v = self.rank(locale);
        // Children are v + 2^k for 2^k below v's lowest set bit (any 2^k
        // for the root); `bound` is that bit, or n rounded up to a power
        // of two.
        let bound = if v == 0 {
            tree.locales.next_power_of_two()
        } else {
            v & v.wrapping_neg()
        };
        (0..bound.trailing_zeros())
            .rev()
            .map(move |k| v + (1 << k))
            .filter(move |&c| c < tree.locales)
            .map(move |c| tree.locale(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_locale_but_the_root_has_one_parent_that_names_it() {
        for n in 1..=33 {
            for root in 0..n {
                let t = Tree::new(n, root);
                assert_eq!(t.parent(root), None);
                let mut reached = vec![0u32; n];
                for l in 0..n {
                    for c in t.children(l) {
                        assert_eq!(t.parent(c), Some(l), "n {n} root {root}: {l} -> {c}");
                        reached[c] += 1;
                    }
                    if l != root {
                        let p = t.parent(l).unwrap();
                        assert!(t.children(p).any(|c| c == l), "n {n} root {root}: {l}");
                    }
                }
                // Every locale but the root is some locale's child once.
                for (l, &r) in reached.iter().enumerate() {
                    assert_eq!(r, u32::from(l != root), "n {n} root {root}: locale {l}");
                }
            }
        }
    }

    #[test]
    fn the_tree_is_log2_deep() {
        for n in 1..=64usize {
            let depth_bound = n.next_power_of_two().trailing_zeros() as usize;
            for root in [0, n / 2, n - 1] {
                let t = Tree::new(n, root);
                for l in 0..n {
                    let (mut at, mut depth) = (l, 0);
                    while let Some(p) = t.parent(at) {
                        at = p;
                        depth += 1;
                    }
                    assert_eq!(at, root);
                    assert!(
                        depth <= depth_bound,
                        "n {n} root {root}: {l} at depth {depth}"
                    );
                }
            }
        }
    }

    #[test]
    fn known_shapes() {
        let t = Tree::new(8, 0);
        assert_eq!(t.children(0).collect::<Vec<_>>(), [4, 2, 1]);
        assert_eq!(t.children(4).collect::<Vec<_>>(), [6, 5]);
        assert_eq!(t.children(6).collect::<Vec<_>>(), [7]);
        assert_eq!(t.children(7).count(), 0);
        assert_eq!(t.parent(7), Some(6));
        // Rooted elsewhere, with n not a power of two: ranks shift.
        let t = Tree::new(3, 2);
        assert_eq!(t.children(2).collect::<Vec<_>>(), [1, 0]);
        assert_eq!(t.parent(0), Some(2));
        assert_eq!(t.parent(1), Some(2));
        assert_eq!(Tree::new(1, 0).children(0).count(), 0);
        assert_eq!(Tree::new(2, 1).children(1).collect::<Vec<_>>(), [0]);
    }
}
