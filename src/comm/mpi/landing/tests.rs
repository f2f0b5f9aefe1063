//! Tests of the landings' table (no MPI: a stand-in for probed messages).

use super::*;

/// A probed message: (source, tag, length).
#[derive(Debug, PartialEq)]
struct Fake(usize, c_int, usize);

impl Probe for Fake {
    fn header(&self) -> (usize, c_int, usize) {
        (self.0, self.1, self.2)
    }
}

fn state(l: &Landing) -> u8 {
    l.state()
}

#[test]
fn an_expected_landing_is_taken_once_by_its_source_and_key() {
    let l = Landings::<Fake>::default();
    let mut place = [0u8; 4];
    let a = l.expect(1, place.as_mut_ptr(), 4).unwrap();
    let b = l.expect(1, place.as_mut_ptr(), 4).unwrap();
    assert_ne!(a.key, b.key, "two landings from one source");
    let tag = TAG_EXPECTED + a.key as c_int;
    assert!(
        matches!(l.arrived(Fake(2, tag, 4)), Arrived::Drop(..)),
        "another source's"
    );
    let Arrived::Land(m, p) = l.arrived(Fake(1, tag, 4)) else {
        panic!("expected")
    };
    assert_eq!((m, p.at()), (Fake(1, tag, 4), (place.as_mut_ptr(), 4)));
    assert!(
        matches!(l.arrived(Fake(1, tag, 4)), Arrived::Drop(..)),
        "taken once"
    );
    assert!(!l.withdraw(&a), "a pass took it first");
    assert_eq!(state(&a), LANDING_WAITING);
    p.landed();
    assert_eq!(state(&a), LANDED);
    assert!(l.withdraw(&b), "withdrawn before its message came");
    let tag_b = TAG_EXPECTED + b.key as c_int;
    assert!(matches!(l.arrived(Fake(1, tag_b, 4)), Arrived::Drop(..)));
}

#[test]
fn a_message_of_another_length_is_refused_and_its_place_untouched() {
    let l = Landings::<Fake>::default();
    let mut place = [0u8; 8];
    let a = l.expect(3, place.as_mut_ptr(), 8).unwrap();
    let tag = TAG_EXPECTED + a.key as c_int;
    assert!(matches!(l.arrived(Fake(3, tag, 9)), Arrived::Drop(..)));
    assert_eq!(state(&a), LANDING_REFUSED);
}

#[test]
fn a_claimed_message_is_parked_until_claimed_whichever_comes_first() {
    let l = Landings::<Fake>::default();
    let mut place = [0u8; 16];
    // The message first: parked, then claimed, then received by a pass.
    let tag = TAG_CLAIMED + 5;
    assert!(matches!(l.arrived(Fake(1, tag, 16)), Arrived::Parked));
    assert!(!l.has_ready());
    let (c, ask) = l.claim(1, 5, place.as_mut_ptr(), 16);
    assert!(ask, "the parked message needs a pass");
    assert!(l.has_ready());
    let mut ready = l.take_ready();
    assert!(!l.has_ready());
    let Some(Arrived::Land(m, p)) = ready.pop() else {
        panic!("claimed with a place of its length")
    };
    assert_eq!(m, Fake(1, tag, 16));
    assert_eq!(p.at(), (place.as_mut_ptr(), 16));
    p.landed();
    assert_eq!(state(&c), LANDED);
    assert!(!l.has_ready());
    // A claim that finds nothing parked (a forged or stale request: a
    // sender sends its bytes before the request) fails at once, and
    // leaves nothing behind: bytes that come later under that key park.
    let (d, ask) = l.claim(1, 6, place.as_mut_ptr(), 16);
    assert!(!ask);
    assert_eq!(state(&d), LANDING_REFUSED);
    assert!(matches!(
        l.arrived(Fake(1, TAG_CLAIMED + 6, 16)),
        Arrived::Parked
    ));
    // A second claim of a key whose first claim took its message: nothing
    // parked, so it fails at once too.
    let (e, ask) = l.claim(1, 6, place.as_mut_ptr(), 16);
    assert!(ask);
    let (f, _) = l.claim(1, 6, place.as_mut_ptr(), 16);
    assert_eq!((state(&e), state(&f)), (LANDING_WAITING, LANDING_REFUSED));
    assert_eq!(l.take_ready().len(), 1);
}

#[test]
fn a_refused_claim_drops_its_message_whichever_comes_first() {
    let l = Landings::<Fake>::default();
    // Refused first: dropped on arrival.
    assert!(!l.refuse(4, 1));
    assert!(matches!(
        l.arrived(Fake(4, TAG_CLAIMED + 1, 8)),
        Arrived::Drop(..)
    ));
    // Parked first: handed to a pass with no place.
    assert!(matches!(
        l.arrived(Fake(4, TAG_CLAIMED + 2, 8)),
        Arrived::Parked
    ));
    assert!(l.refuse(4, 2));
    let ready = l.take_ready();
    assert!(matches!(&ready[..], [Arrived::Discard(Fake(4, _, 8))]));
    // A message with a key whose earlier message waits unclaimed: dropped,
    // the earlier one kept.
    assert!(matches!(
        l.arrived(Fake(4, TAG_CLAIMED + 3, 8)),
        Arrived::Parked
    ));
    assert!(matches!(
        l.arrived(Fake(4, TAG_CLAIMED + 3, 9)),
        Arrived::Drop(..)
    ));
    let mut place = [0u8; 8];
    let (c, ask) = l.claim(4, 3, place.as_mut_ptr(), 8);
    assert!(ask);
    assert!(matches!(
        &l.take_ready()[..],
        [Arrived::Land(Fake(4, _, 8), _)]
    ));
    drop(c);
    // A claimed message of another length than its place: dropped, the
    // claim refused.
    assert!(matches!(
        l.arrived(Fake(4, TAG_CLAIMED + 4, 9)),
        Arrived::Parked
    ));
    let (d, ask) = l.claim(4, 4, place.as_mut_ptr(), 8);
    assert!(ask);
    assert!(matches!(
        &l.take_ready()[..],
        [Arrived::Drop(Fake(4, _, 9), _)]
    ));
    assert_eq!(state(&d), LANDING_REFUSED);
}

#[test]
fn keys_stay_below_the_least_tag_bound_and_busy_ones_are_skipped() {
    let l = Landings::<Fake>::default();
    let mut place = [0u8; 1];
    let first = l.expect(0, place.as_mut_ptr(), 1).unwrap();
    l.next.store(first.key, Ordering::Relaxed);
    let next = l.expect(0, place.as_mut_ptr(), 1).unwrap();
    assert_ne!(next.key, first.key, "the busy key is skipped");
    l.next.store(u32::MAX, Ordering::Relaxed);
    let wrapped = l.expect(0, place.as_mut_ptr(), 1).unwrap();
    assert!(wrapped.key < KEYS);
    assert!(TAG_CLAIMED + KEYS as c_int - 1 <= 32767);
    assert!(is_landing(TAG_EXPECTED) && is_landing(TAG_CLAIMED + KEYS as c_int - 1));
    assert!(!is_landing(TAG_EXPECTED - 1) && !is_landing(TAG_CLAIMED + KEYS as c_int));
    // Send keys: each once until released.
    let k = l.send_key(1).unwrap();
    l.next_send.store(k, Ordering::Relaxed);
    let k2 = l.send_key(1).unwrap();
    assert_ne!(k, k2);
    l.release(1, k);
    l.next_send.store(k, Ordering::Relaxed);
    assert_eq!(l.send_key(1), Some(k), "released, so free again");
}
