//! Tests of the rendezvous areas: allocation first in, first out, taking
//! back only the oldest blocks, the restart at 0, the wrap, staged blocks
//! (rule S), and the receiver's checks of every note (`README.md`,
//! "Rendezvous").

use super::*;
use crate::comm::shm::region::{Area, Layout, MAX_ALIGN};
use std::sync::Arc;

const CAP: usize = 64 << 10;

/// A fresh region holding one area of `CAP` bytes, with both views.
fn area() -> (Arc<Region>, Outbound, Inbound, Blocks) {
    let mut layout = Layout::new();
    let a = layout.carve(CAP, MAX_ALIGN).unwrap();
    let region = Arc::new(Region::create(layout.len()).unwrap());
    // SAFETY: the area was carved in the region just made, which the
    // test keeps alive (the Arc) longer than the Outbound.
    let out = unsafe { Outbound::new(region.ptr(a), CAP) };
    let inb = Inbound::new(a.offset(), CAP);
    let blocks = Blocks {
        region: region.clone(),
    };
    (region, out, inb, blocks)
}

/// The payload a checked note names.
fn payload(region: &Region, t: &Taken) -> Vec<u8> {
    let p = region.ptr(Area::new(t.payload, t.len));
    // SAFETY: `check` found the block inside the area, written.
    unsafe { std::slice::from_raw_parts(p.as_ptr(), t.len).to_vec() }
}

/// Allocates and fills a block of `len` bytes of `byte`.
fn send(out: &mut Outbound, len: usize, byte: u8) -> Option<Block> {
    let b = out.try_alloc(len)?;
    out.payload_mut(&b).fill(byte);
    Some(b)
}

#[test]
fn a_block_goes_and_comes_back_and_the_area_restarts_at_zero() {
    let (region, mut out, mut inb, blocks) = area();
    let b = send(&mut out, 1000, 7).unwrap();
    assert_eq!(b.offset, 0);
    let t = inb.check(&region, 0, &b.note()).unwrap();
    assert_eq!(t.len, 1000);
    assert_eq!(payload(&region, &t), vec![7; 1000]);
    let b2 = send(&mut out, 10, 8).unwrap();
    assert_eq!(b2.offset, footprint(1000), "the next block follows");
    blocks.take_back(t.state);
    let t2 = inb.check(&region, 0, &b2.note()).unwrap();
    blocks.take_back(t2.state);
    // Everything taken back: the next block starts at 0 again.
    let b3 = send(&mut out, 5, 9).unwrap();
    assert_eq!(b3.offset, 0);
    assert_eq!(out.live(), 1);
}

#[test]
fn zero_bytes_and_the_largest_block_fit() {
    let (region, mut out, mut inb, blocks) = area();
    let b = send(&mut out, 0, 0).unwrap();
    let t = inb.check(&region, 1, &b.note()).unwrap();
    assert_eq!(t.len, 0);
    blocks.take_back(t.state);
    let b = send(&mut out, max_payload(CAP), 3).unwrap();
    assert_eq!(b.offset, 0, "the area restarts at 0 once all came back");
    let t = inb.check(&region, 1, &b.note()).unwrap();
    assert_eq!(payload(&region, &t), vec![3; max_payload(CAP)]);
    // Three more fill the area...
    let more: Vec<Block> = (4..7)
        .map(|i| send(&mut out, max_payload(CAP), i).unwrap())
        .collect();
    // ...a fifth waits until the oldest is taken back.
    assert!(out.try_alloc(max_payload(CAP)).is_none());
    blocks.take_back(t.state);
    let b5 = out
        .try_alloc(max_payload(CAP))
        .expect("the first block's room");
    assert_eq!(b5.offset, 0, "after the wrap");
    for (b, i) in more.iter().zip(4..) {
        let t = inb.check(&region, 1, &b.note()).unwrap();
        assert_eq!(payload(&region, &t), vec![i; max_payload(CAP)]);
        blocks.take_back(t.state);
    }
}

#[test]
fn only_the_oldest_blocks_are_taken_back() {
    let (region, mut out, mut inb, blocks) = area();
    let len = CAP / 4 - BLOCK_HEADER;
    let bs: Vec<Block> = (0..4).map(|i| send(&mut out, len, i).unwrap()).collect();
    let ts: Vec<Taken> = bs
        .iter()
        .map(|b| inb.check(&region, 0, &b.note()).unwrap())
        .collect();
    assert!(out.try_alloc(1).is_none(), "the area is full");
    // The newer three come back first: still nothing, the oldest holds.
    for t in &ts[1..] {
        blocks.take_back(t.state);
    }
    assert!(out.try_alloc(1).is_none(), "the oldest block still holds");
    blocks.take_back(ts[0].state);
    let b = out.try_alloc(len).expect("all taken back");
    assert_eq!(b.offset, 0);
}

#[test]
fn a_block_given_back_unsent_leaves_the_area_as_it_was() {
    let (region, mut out, mut inb, _blocks) = area();
    let a = send(&mut out, 100, 1).unwrap();
    let b = send(&mut out, 100, 2).unwrap();
    out.unalloc(b);
    assert_eq!(out.live(), 1);
    let c = send(&mut out, 100, 3).unwrap();
    assert_eq!((c.offset, c.number), (b.offset, b.number));
    inb.check(&region, 0, &a.note()).unwrap();
    let t = inb.check(&region, 0, &c.note()).unwrap();
    assert_eq!(payload(&region, &t), vec![3; 100]);
}

#[test]
fn the_receiver_checks_every_note() {
    let (region, mut out, mut inb, blocks) = area();
    let b = send(&mut out, 100, 1).unwrap();
    let note = b.note();
    let with = |i: usize, v: u64| {
        let mut n = note;
        n[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        n
    };
    let cases: [(Vec<u8>, &str); 6] = [
        (note[..20].to_vec(), "not 24"),
        (with(0, 8).to_vec(), "not a multiple"),
        (with(0, CAP as u64).to_vec(), "past the end"),
        (with(1, u64::MAX).to_vec(), "past the end"),
        (with(1, 99).to_vec(), "99 bytes"),
        (with(2, 5).to_vec(), "number 5"),
    ];
    for (n, want) in cases {
        let e = inb.check(&region, 0, &n).unwrap_err();
        assert!(e.contains(want), "want {want:?} in: {e}");
    }
    let t = inb.check(&region, 0, &note).unwrap();
    // The same note again: its number does not grow.
    let e = inb.check(&region, 0, &note).unwrap_err();
    assert!(e.contains("must grow"), "{e}");
    // On the other ring the number is new, but the block was taken.
    blocks.take_back(t.state);
    let e = inb.check(&region, 1, &note).unwrap_err();
    assert!(e.contains("state 2"), "{e}");
}

#[test]
fn random_traffic_never_overlaps_live_blocks() {
    let (region, mut out, mut inb, blocks) = area();
    let mut rng = crate::comm::shm::ring::tests::Rng::new(7);
    // Blocks sent and not yet taken back: (offset, footprint, byte, taken).
    let mut live: Vec<(Block, Taken)> = Vec::new();
    let mut sent = 0u32;
    for _ in 0..20_000 {
        if rng.below(3) != 0 {
            let len = rng.below(CAP / 3);
            if let Some(b) = send(&mut out, len, sent as u8) {
                let end = b.offset + footprint(len);
                assert!(end <= CAP);
                for (o, _) in &live {
                    let o_end = o.offset + footprint(o.len);
                    assert!(end <= o.offset || b.offset >= o_end, "overlap");
                }
                let t = inb.check(&region, (sent % 2) as usize, &b.note()).unwrap();
                sent += 1;
                live.push((b, t));
            }
        } else if !live.is_empty() {
            let i = rng.below(live.len());
            let (b, t) = live.swap_remove(i);
            let got = payload(&region, &t);
            assert!(got.iter().all(|&x| x == b.number.wrapping_sub(1) as u8));
            blocks.take_back(t.state);
        }
    }
    assert!(sent > 1000, "only {sent} blocks went");
}

#[test]
fn the_fuzz_body_accepts_good_notes_and_survives_random_ones() {
    // A real block and its note, as the fuzz target would be given them.
    let (region, mut out, _inb, _blocks) = area();
    let b = send(&mut out, 100, 5).unwrap();
    drop(region);
    // SAFETY: `out.base` is the area's start, 64 KiB long, and the region
    // is still mapped (`out` was made from it and the Arc in `area()`'s
    // Blocks, `_blocks`, holds it); copy its first 4 KiB.
    let mut bytes = unsafe { std::slice::from_raw_parts(out.base.as_ptr(), 4096).to_vec() };
    bytes.extend_from_slice(&b.note());
    bytes.push(0);
    // And a good return, of the body's first block out (100 bytes at 0).
    bytes.extend_from_slice(&return_note(BLOCK_HEADER, 100, 1));
    bytes.push(0);
    fuzz_notes(&bytes);
    let mut rng = crate::comm::shm::ring::tests::Rng::new(11);
    for _ in 0..200 {
        let n = rng.below(4096 + 200);
        let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
        fuzz_notes(&junk);
    }
}

#[test]
fn a_returned_block_is_checked_held_and_taken_back_by_its_sender() {
    let (region, mut out, mut inb, blocks) = area();
    let returned = Returned {
        region: region.clone(),
        area: inb.offset(),
        held: out.held(),
    };
    let b = send(&mut out, 1000, 7).unwrap();
    let t = inb.check(&region, 0, &b.note()).unwrap();
    let payload_at = b.offset + BLOCK_HEADER;
    // The sender trusts nothing the return says.
    let cases: [(Vec<u8>, &str); 5] = [
        (
            return_note(payload_at, 10, b.number)[..20].to_vec(),
            "not 24",
        ),
        (
            return_note(payload_at, 10, b.number + 1).to_vec(),
            "not out",
        ),
        (
            return_note(payload_at - 1, 10, b.number).to_vec(),
            "outside",
        ),
        (
            return_note(payload_at + 990, 11, b.number).to_vec(),
            "outside",
        ),
        (
            return_note(payload_at + 8, usize::MAX, b.number).to_vec(),
            "outside",
        ),
    ];
    for (n, want) in cases {
        let e = out.check_return(&n).unwrap_err();
        assert!(e.contains(want), "want {want:?} in: {e}");
    }
    // The receiver wrote its reply around offset 64 of the payload.
    let r = out
        .check_return(&return_note(payload_at + 64, 100, b.number))
        .unwrap();
    assert_eq!((r.at, r.len, r.block), (payload_at + 64, 100, b.offset));
    // SAFETY: the frame lies in the area, mapped while `region` lives.
    let frame = unsafe { std::slice::from_raw_parts(r.frame.as_ptr(), r.len) };
    assert_eq!(frame, &[7; 100][..], "the frame is read where it lies");
    let e = out
        .check_return(&return_note(payload_at, 10, b.number))
        .unwrap_err();
    assert!(e.contains("twice"), "{e}");
    // A hostile receiver marks the returned block taken as well: it is
    // still held, so the area does not restart over it.
    blocks.take_back(t.state);
    let c = send(&mut out, 10, 1).unwrap();
    assert_eq!(c.offset, footprint(1000), "the held block is not reused");
    // Our own take-back lets it go; with `c` taken too, the area restarts.
    returned.take_back(r.block);
    let tc = inb.check(&region, 0, &c.note()).unwrap();
    blocks.take_back(tc.state);
    assert_eq!(send(&mut out, 10, 2).unwrap().offset, 0);
}

#[test]
fn a_block_taken_before_its_return_is_refused() {
    let (region, mut out, mut inb, blocks) = area();
    let b = send(&mut out, 500, 3).unwrap();
    // Still live (nothing reclaimed since), but its receiver took it.
    let t = inb.check(&region, 0, &b.note()).unwrap();
    blocks.take_back(t.state);
    let e = out
        .check_return(&return_note(b.offset + BLOCK_HEADER, 500, b.number))
        .unwrap_err();
    assert!(e.contains("state is 2"), "{e}");
    // Once reclaimed, its number is no longer out at all.
    let c = send(&mut out, 10, 4).unwrap();
    assert_eq!(c.offset, 0);
    let e = out
        .check_return(&return_note(b.offset + BLOCK_HEADER, 10, b.number))
        .unwrap_err();
    assert!(e.contains("not out"), "{e}");
}

/// Writes `len` bytes of `byte` from `from` into the staged block
/// `stage` (without a lock, as its encoder does).
fn write_staged(out: &Outbound, stage: u64, from: usize, len: usize, byte: u8) {
    let (p, room) = out.staged_payload(stage).expect("staged");
    assert!(from + len <= room);
    // SAFETY: the staged block's payload is `room` bytes at `p`, ours
    // until it is sent; the range is inside it (asserted).
    unsafe { std::ptr::write_bytes(p.as_ptr().add(from), byte, len) };
}

/// Rule S: a staged block is numbered when it is sent, so blocks
/// allocated and sent after it come first in number order; it grows only
/// while it is the newest, into free space, and shrinks anywhere.
#[test]
fn a_staged_block_is_numbered_when_it_goes_and_grows_only_while_newest() {
    let (region, mut out, mut inb, blocks) = area();
    let first = send(&mut out, 100, 1).unwrap();
    let stage = out.stage(1000).unwrap();
    let p = out.staged_payload(stage).unwrap().0;
    write_staged(&out, stage, 0, 1000, 5);
    assert!(out.resize_staged(stage, 3000), "the newest: room after it");
    write_staged(&out, stage, 1000, 2000, 6);
    assert_eq!(out.staged_payload(stage), Some((p, 3000)), "kept in place");
    assert!(!out.resize_staged(stage, CAP), "not past the area");
    // Another sender's block goes after it, and before it.
    let other = send(&mut out, 200, 7).unwrap();
    assert_eq!(other.number, first.number + 1, "numbered at once");
    assert!(!out.resize_staged(stage, 4000), "not the newest: no longer");
    assert!(out.resize_staged(stage, 2500), "but shorter");
    // A return naming number 0 (a staged block's) names nothing.
    assert!(out.check_return(&return_note(64, 8, 0)).is_err());
    let staged = out.send_staged(stage);
    assert_eq!(staged.number, other.number + 1, "numbered when sent");
    assert_eq!(out.staged_payload(stage), None, "no longer staged");
    let ts: Vec<Taken> = [first, other, staged]
        .iter()
        .map(|b| inb.check(&region, 0, &b.note()).unwrap())
        .collect();
    let mut want = vec![5; 1000];
    want.resize(2500, 6);
    assert_eq!(payload(&region, &ts[2]), want);
    // Sent: giving it back does nothing.
    out.unstage(stage);
    assert_eq!(out.live(), 3);
    for t in &ts {
        blocks.take_back(t.state);
    }
    let again = send(&mut out, 10, 8).unwrap();
    assert_eq!(again.offset, 0, "all taken back: the area restarts");
}

#[test]
fn a_staged_block_given_back_leaves_the_area_as_it_was() {
    let (region, mut out, mut inb, _blocks) = area();
    let a = send(&mut out, 100, 1).unwrap();
    let s = out.stage(5000).unwrap();
    out.unstage(s + 1);
    assert!(
        out.staged_payload(s).is_some(),
        "another stage: still staged"
    );
    out.unstage(s);
    assert!(out.staged_payload(s).is_none());
    assert_eq!(out.live(), 1);
    let b = send(&mut out, 100, 2).unwrap();
    assert_eq!(
        b.offset,
        footprint(100),
        "the newest went: its room is free"
    );
    assert_eq!(b.number, a.number + 1);
    inb.check(&region, 0, &a.note()).unwrap();
    let t = inb.check(&region, 0, &b.note()).unwrap();
    assert_eq!(payload(&region, &t), vec![2; 100]);
}

/// A staged block given back with blocks after it stays until the blocks
/// before it came back, then is passed as a taken one.
#[test]
fn a_staged_block_given_back_between_others_is_passed_once_they_are_back() {
    let (region, mut out, mut inb, blocks) = area();
    let len = CAP / 4 - BLOCK_HEADER;
    let a = send(&mut out, len, 1).unwrap();
    let s = out.stage(len).unwrap();
    let c = send(&mut out, len, 3).unwrap();
    out.unstage(s);
    assert_eq!(out.live(), 3, "between two live blocks: kept");
    let ta = inb.check(&region, 0, &a.note()).unwrap();
    let tc = inb.check(&region, 0, &c.note()).unwrap();
    blocks.take_back(tc.state);
    blocks.take_back(ta.state);
    let d = send(&mut out, 10, 4).unwrap();
    assert_eq!(d.offset, 0, "all three passed: the area restarts");
    assert_eq!(out.live(), 1);
}

#[test]
fn a_staged_block_after_a_wrap_grows_no_further_than_the_oldest() {
    let (region, mut out, mut inb, blocks) = area();
    let len = CAP / 4 - BLOCK_HEADER;
    let bs: Vec<Block> = (0..3).map(|i| send(&mut out, len, i).unwrap()).collect();
    let ts: Vec<Taken> = bs
        .iter()
        .map(|b| inb.check(&region, 0, &b.note()).unwrap())
        .collect();
    // The first comes back: a block wraps to the area's start, before the
    // second, which is still out.
    blocks.take_back(ts[0].state);
    let _fourth = send(&mut out, len, 3).unwrap();
    let s = out.stage(1000).unwrap();
    let p = out.staged_payload(s).unwrap().0;
    let first_payload = region.ptr(Area::new(ts[0].payload, 1)).as_ptr();
    assert_eq!(p.as_ptr(), first_payload, "wrapped to the area's start");
    assert!(out.resize_staged(s, len - BLOCK_HEADER));
    assert!(
        !out.resize_staged(s, len + 64),
        "the second block, still out, lies after it"
    );
    blocks.take_back(ts[1].state);
    assert!(
        out.resize_staged(s, 2 * len),
        "the second taken back: its room is free"
    );
    blocks.take_back(ts[2].state);
}
