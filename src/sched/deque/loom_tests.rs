//! Loom models of the deque (README.md beside this file): whatever the
//! interleaving and whichever stale values the memory model lets a load
//! return, every pushed element is taken exactly once, whole (never two
//! pushes' words mixed), by the owner or by a thief. Run with:
//! `RUSTFLAGS="--cfg loom" cargo test --release --lib --target-dir target/loom deque`
//!
//! Elements are `[usize; 2]` holding `[k, !k]`, so a thief that kept a
//! torn read (words of two different pushes into a reused slot) would be
//! caught. Capacities are tiny so that slots are reused and buffers grow
//! within a few pushes.

use super::{Steal, Stealer, Worker};
use loom::thread;

use crate::loom::model;

fn element(k: usize) -> [usize; 2] {
    [k, !k]
}

/// The element's number, checking that its words belong together.
fn number(e: [usize; 2]) -> usize {
    assert_eq!(e, element(e[0]), "a torn element was taken");
    e[0]
}

/// Up to `tries` steal attempts; a `Retry` counts as an attempt (so the
/// thread stays bounded), and so does `Empty`.
fn steal_some(s: &Stealer<[usize; 2]>, tries: usize) -> Vec<usize> {
    let mut got = Vec::new();
    for _ in 0..tries {
        if let Steal::Success(e) = s.steal() {
            got.push(number(e));
        }
    }
    got
}

/// Pops everything left; the owner's drain after the thieves are done.
fn drain(w: &Worker<[usize; 2]>, got: &mut Vec<usize>) {
    while let Some(e) = w.pop() {
        got.push(number(e));
    }
    assert!(w.is_empty());
}

/// Every element of `1..=n` exactly once.
fn assert_exactly_once(mut got: Vec<usize>, n: usize) {
    got.sort_unstable();
    assert_eq!(
        got,
        (1..=n).collect::<Vec<_>>(),
        "elements lost or duplicated"
    );
}

/// Owner pushes and pops while one thief steals; with capacity 2, the
/// third and fourth pushes either reuse the slots of stolen elements
/// (while the thief may be reading them) or grow the buffer.
#[test]
fn loom_deque_owner_and_one_thief() {
    // Exhaustive (LOOM_MAX_PREEMPTIONS=100) passes in about three minutes
    // on an idle core; six preemptions take about 12 s.
    model(Some(6), || {
        let w = Worker::with_capacity(2);
        let s = w.stealer();
        let thief = thread::spawn(move || steal_some(&s, 3));
        let mut got = Vec::new();
        w.push(element(1));
        w.push(element(2));
        got.extend(w.pop().map(number));
        w.push(element(3));
        w.push(element(4));
        got.extend(w.pop().map(number));
        drain(&w, &mut got);
        got.extend(thief.join().unwrap());
        assert_exactly_once(got, 4);
    });
}

/// The owner asks `fewer_than` between pushes (as a hosted worker does
/// at every fork): when its bound on `top` cannot tell, it reads `top`
/// and keeps that as its bound, which the next push trusts to reuse the
/// slot of a stolen element (capacity 2) while the thief may still be
/// reading it.
#[test]
fn loom_deque_fewer_than_refreshes_the_bound_pushes_trust() {
    model(Some(6), || {
        let w = Worker::with_capacity(2);
        let s = w.stealer();
        let thief = thread::spawn(move || steal_some(&s, 2));
        let mut got = Vec::new();
        w.push(element(1));
        w.push(element(2));
        // Two queued by the bound: the answer (which depends on the
        // interleaving) reads top.
        w.fewer_than(2);
        w.push(element(3));
        drain(&w, &mut got);
        got.extend(thief.join().unwrap());
        assert_exactly_once(got, 3);
    });
}

/// Owner against two thieves.
#[test]
fn loom_deque_owner_and_two_thieves() {
    model(Some(5), || {
        let w = Worker::with_capacity(2);
        let thieves: Vec<_> = (0..2)
            .map(|_| {
                let s = w.stealer();
                thread::spawn(move || steal_some(&s, 1))
            })
            .collect();
        let mut got = Vec::new();
        w.push(element(1));
        w.push(element(2));
        got.extend(w.pop().map(number));
        drain(&w, &mut got);
        for t in thieves {
            got.extend(t.join().unwrap());
        }
        assert_exactly_once(got, 2);
    });
}

/// The last-element race: the owner pops and a thief steals a one-element
/// deque. Exactly one of them gets it (the CAS on top decides).
#[test]
fn loom_deque_last_element_race() {
    model(None, || {
        let w = Worker::with_capacity(1);
        let s = w.stealer();
        w.push(element(1));
        let thief = thread::spawn(move || s.steal());
        let popped = w.pop();
        let stolen = thief.join().unwrap();
        match (popped, stolen) {
            (Some(e), Steal::Empty | Steal::Retry) | (None, Steal::Success(e)) => {
                assert_eq!(number(e), 1)
            }
            (p, s) => panic!("pop {p:?} and steal {s:?} on a one-element deque"),
        }
        assert!(w.is_empty());
        assert_eq!(w.pop(), None);
    });
}

/// The last-element race repeated on the same indices' neighbours: after
/// the race, push again (into the slot after the raced one) and race again.
#[test]
fn loom_deque_last_element_race_twice() {
    model(None, || {
        let w = Worker::with_capacity(1);
        let s = w.stealer();
        w.push(element(1));
        let thief = thread::spawn(move || steal_some(&s, 2));
        let mut got = Vec::new();
        got.extend(w.pop().map(number));
        w.push(element(2));
        got.extend(w.pop().map(number));
        drain(&w, &mut got);
        got.extend(thief.join().unwrap());
        assert_exactly_once(got, 2);
    });
}

/// The buffer grows (1 -> 2 -> 4) while a thief steals: the thief may
/// read an old buffer or the new one, and must still take each element
/// at most once, whole.
#[test]
fn loom_deque_growth_while_stealing() {
    model(None, || {
        let w = Worker::with_capacity(1);
        let s = w.stealer();
        let thief = thread::spawn(move || steal_some(&s, 2));
        let mut got = Vec::new();
        for k in 1..=3 {
            w.push(element(k));
        }
        drain(&w, &mut got);
        got.extend(thief.join().unwrap());
        assert_exactly_once(got, 3);
    });
}

/// `pop_if` putting a rejected element back while a thief steals.
#[test]
fn loom_deque_pop_if_puts_back() {
    model(None, || {
        let w = Worker::with_capacity(2);
        let s = w.stealer();
        w.push(element(1));
        w.push(element(2));
        let thief = thread::spawn(move || steal_some(&s, 2));
        let mut got = Vec::new();
        assert_eq!(w.pop_if(|_| false), None);
        got.extend(w.pop_if(|_| true).map(number));
        drain(&w, &mut got);
        got.extend(thief.join().unwrap());
        assert_exactly_once(got, 2);
    });
}

/// A batch steal against the owner's pops: the thief takes up to three
/// of three elements one CAS at a time into a deque of its own, while the
/// owner pops from the bottom without a CAS whenever it sees `top` below
/// the element. Capacity 2, so the third push grows the buffer (the
/// thief may read the old one). Moving `top` by the whole batch in one
/// CAS fails this model: the owner pops an element inside the batch.
#[test]
fn loom_deque_batch_steal_against_pops() {
    model(Some(5), || {
        let w = Worker::with_capacity(2);
        let s = w.stealer();
        for k in 1..=3 {
            w.push(element(k));
        }
        let thief = thread::spawn(move || {
            let mine = Worker::with_capacity(1);
            let mut got = Vec::new();
            s.steal_into(&mine, 3, |_| true);
            drain(&mine, &mut got);
            got
        });
        let mut got = Vec::new();
        got.extend(w.pop().map(number));
        got.extend(w.pop().map(number));
        drain(&w, &mut got);
        got.extend(thief.join().unwrap());
        assert_exactly_once(got, 3);
    });
}

/// Two batch thieves and the owner, pushing while they steal: each
/// batch's later elements are steals of their own, racing the other
/// thief's and the owner's last-element CAS.
#[test]
fn loom_deque_two_batch_thieves() {
    model(Some(4), || {
        let w = Worker::with_capacity(4);
        let s = w.stealer();
        w.push(element(1));
        w.push(element(2));
        let thieves: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                thread::spawn(move || {
                    let mine = Worker::with_capacity(2);
                    let mut got = Vec::new();
                    s.steal_into(&mine, 2, |_| true);
                    drain(&mine, &mut got);
                    got
                })
            })
            .collect();
        w.push(element(3));
        let mut got = Vec::new();
        got.extend(w.pop().map(number));
        drain(&w, &mut got);
        for t in thieves {
            got.extend(t.join().unwrap());
        }
        assert_exactly_once(got, 3);
    });
}
