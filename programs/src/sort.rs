//! The partition step of the quicksort that `examples/quicksort.rs` and
//! `cantus-bench apps` run (seed 000, section 7.1: a serial partition,
//! then both sides as two tasks); each caller joins the two sides its own
//! way.

/// Partitions `v` (at least two elements) around the median of its first,
/// middle and last elements. Returns the pivot's final index `p`: every
/// element before `p` is `<=` the pivot and every one after is `>=`.
/// (Sedgewick's scheme: equal keys stop both scans, so runs of equal
/// keys split evenly.)
pub fn partition(v: &mut [u64]) -> usize {
    let last = v.len() - 1;
    let mid = v.len() / 2;
    if v[mid] < v[0] {
        v.swap(mid, 0);
    }
    if v[last] < v[0] {
        v.swap(last, 0);
    }
    if v[last] < v[mid] {
        v.swap(last, mid);
    }
    v.swap(0, mid);
    let pivot = v[0];
    let (mut i, mut j) = (1, last);
    loop {
        while i <= j && v[i] < pivot {
            i += 1;
        }
        // Stops at index 0 at the latest, which holds the pivot.
        while v[j] > pivot {
            j -= 1;
        }
        if i >= j {
            break;
        }
        v.swap(i, j);
        i += 1;
        j -= 1;
    }
    v.swap(0, j);
    j
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::SplitMix64;

    #[test]
    fn the_pivot_splits_every_input() {
        let mut rng = SplitMix64(3);
        for n in [2, 3, 5, 17, 1000] {
            for spread in [2, 1 << 40] {
                let mut v: Vec<u64> = (0..n).map(|_| rng.next() % spread).collect();
                let mut sorted = v.clone();
                sorted.sort_unstable();
                let p = partition(&mut v);
                assert!(v[..p].iter().all(|&x| x <= v[p]), "n {n}");
                assert!(v[p + 1..].iter().all(|&x| x >= v[p]), "n {n}");
                v.sort_unstable();
                assert_eq!(v, sorted, "a permutation, n {n}");
            }
        }
    }
}
