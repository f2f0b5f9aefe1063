//! The global address space on active messages alone, for transports
//! with no memory shared between locales (MPI; on one machine, chosen
//! with `CANTUS_PGAS=messages`). Each locale's heap segment is memory of
//! its own process ([`Segment`](segment::Segment)); puts, gets and
//! atomics on another locale's are remote calls that its owner runs
//! inside its poll (`calls.rs`); collectives are binomial trees of
//! messages (`tree.rs`) whose steps wait in the locale's post
//! (`post.rs`); the allocator and the SPMD group's words live on locale
//! 0, which decides and tells the others. `README.md` beside the parent
//! module states the protocols and why they keep the guarantees.

mod calls;
pub(super) mod native;
mod post;
mod segment;
mod tree;

use super::heap::{Block, Full, Heap};
use super::memory::{
    AllocFailure, Answers, AtomicOp, BARRIER, Memory, Mismatch, Signature, agree, zero_part,
};
use super::nonblocking::{Gets, InFlight};
use crate::comm::collective::{AlignedBytes, Collectives};
use crate::comm::symmetric::{NodeAreas, SymmetricAreas};
use crate::error::Error;
use post::{Ended, Key, Post};
use segment::Segment;
use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering, fence};
use tree::Tree;

/// The global address space of one locale, over messages.
pub(crate) struct MessageMemory {
    here: usize,
    locales: usize,
    heap_bytes: usize,
    /// This locale's segment, when no other process maps it (`None`: it
    /// lies in the node's shared region).
    _private: Option<Segment>,
    /// The node's shared region, in a job whose node shares memory
    /// (`comm::symmetric::NodeAreas`): kept mapped while `mapped` points
    /// into it.
    _node: Option<Arc<dyn SymmetricAreas>>,
    /// Where this process maps each locale's segment: its own, and in a
    /// node that shares memory the other ranks' of the node (reached in
    /// place, as with shared memory; the other locales by messages).
    mapped: Vec<Option<NonNull<u8>>>,
    /// Parcels of collectives and the group as this locale knows it.
    post: Post,
    /// The transport's own collectives (`native.rs`), if it has them.
    collectives: Option<Arc<dyn Collectives>>,
    /// A body of the job panicked: from then on the collectives are the
    /// trees of messages (`native.rs` may have left a collective that
    /// some locale never joined in flight, which would match the next).
    /// Every locale knows of every panic before the next group begins.
    native_off: AtomicBool,
    /// Collectives this locale's body entered, and completed (returned
    /// from, with a result or an error every locale shares), in the
    /// current group: the next collective's number, and what a notice
    /// of the body's end says.
    entered: AtomicU64,
    completed: AtomicU64,
    /// Locale 0: the SPMD group's words (as `SharedMemory`'s control
    /// page holds them): 1 while a group runs, its epoch, and 0 or 1 + the
    /// locale whose body panicked first. (Its handler is in every
    /// locale's post.)
    running: AtomicU64,
    epoch: AtomicU64,
    poison: AtomicU64,
    /// Locale 0: the allocator's words (its block headers lie in locale
    /// 0's segment, as with shared memory).
    heap_lock: AtomicU32,
    heap_top: AtomicU64,
    heap_last: AtomicU64,
    heap_high: AtomicU64,
    /// The other locales: headers of blocks whose handle this locale
    /// dropped, not yet told to locale 0 (they go with the next `alloc`,
    /// before locale 0 grants).
    released: Mutex<Vec<u64>>,
}

// SAFETY: the pointers in `mapped` are into mappings `MessageMemory`
// owns (its private segment, or the node's region it keeps in `_node`),
// valid from any thread while it lives; what is done through them is
// synchronized by the protocols of `pgas/README.md`.
unsafe impl Send for MessageMemory {}
// SAFETY: as for Send; the pointers are never changed after `new`.
unsafe impl Sync for MessageMemory {}

/// Size of a verdict at the head of an agreement's answer: 0 (agreed) or
/// 1, the locale that differs, locale 0's signature and its.
const VERDICT: usize = 1 + 8 + 2 * 24;

// Words of an allocation's answer (after the verdict).
const GRANTED: u64 = 1;
const FULL: u64 = 2;

impl MessageMemory {
    /// Locale `here`'s memory in a job of `locales`, with segments of
    /// `heap_bytes` (the same on every locale). `node`: the heap segments
    /// this locale shares with the other locales of its node, if it
    /// shares any (then its own segment is its area there, and theirs
    /// are mapped here).
    pub(crate) fn new(
        (here, locales, heap_bytes): (usize, usize, usize),
        node: Option<NodeAreas>,
        collectives: Option<Arc<dyn Collectives>>,
    ) -> Result<Self, Error> {
        let mut mapped = vec![None; locales];
        let (private, node) = match node {
            None => {
                let segment = Segment::new(heap_bytes)?;
                mapped[here] = Some(segment.base());
                (Some(segment), None)
            }
            Some(node) => {
                let areas = node.areas.areas();
                assert!(
                    areas.heap_bytes >= heap_bytes && node.members.len() == areas.locales,
                    "the node's areas hold every member's segment"
                );
                for (i, &l) in node.members.iter().enumerate() {
                    mapped[l] = Some(areas.heaps[i]);
                }
                assert!(mapped[here].is_some(), "a locale is a member of its node");
                (None, Some(node.areas))
            }
        };
        Ok(MessageMemory {
            here,
            locales,
            heap_bytes,
            _private: private,
            _node: node,
            mapped,
            post: Post::default(),
            collectives,
            native_off: AtomicBool::new(false),
            entered: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            running: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            poison: AtomicU64::new(0),
            heap_lock: AtomicU32::new(0),
            heap_top: AtomicU64::new(0),
            heap_last: AtomicU64::new(0),
            heap_high: AtomicU64::new(0),
            released: Mutex::new(Vec::new()),
        })
    }

    /// The transport's own collectives, while they may be used.
    fn native(&self) -> Option<&dyn Collectives> {
        // Acquire: pairs with `note_ended`'s Release.
        if self.native_off.load(Ordering::Acquire) {
            return None;
        }
        self.collectives.as_deref()
    }

    /// Whether the barrier, broadcast and reductions are the transport's
    /// own collectives now (a test hook).
    pub(crate) fn makes_native_collectives(&self) -> bool {
        self.native().is_some()
    }

    /// This locale's segment (mapped by every memory, `new`).
    fn own_segment(&self) -> NonNull<u8> {
        self.mapped[self.here].expect("a locale maps its own segment")
    }

    /// The allocator (locale 0 only: its headers are in this segment).
    fn heap(&self) -> Heap<'_> {
        assert_eq!(self.here, 0, "only locale 0 allocates");
        Heap {
            lock: &self.heap_lock,
            top: &self.heap_top,
            last: &self.heap_last,
            high: &self.heap_high,
            meta: self.own_segment(),
            bytes: self.heap_bytes,
        }
    }

    /// Locale 0: claims the group word; the new epoch, or `None` if a
    /// group runs.
    fn claim(&self) -> Option<u64> {
        // Acquire: pairs with `finish_group`'s Release store (the last
        // group's words are behind us). These words are touched only on
        // locale 0, by its polls and its tasks.
        self.running
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        self.poison.store(0, Ordering::Relaxed);
        Some(self.epoch.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// Locale 0: ends the group; the locale whose body panicked first.
    fn finish_group(&self) -> Option<usize> {
        // Acquire: pairs with the Release CAS in `note_ended`.
        let p = self.poison.load(Ordering::Acquire);
        // Release: pairs with `claim`'s Acquire CAS.
        self.running.store(0, Ordering::Release);
        (p as usize).checked_sub(1)
    }

    /// `locale`'s body of group `epoch` ended (a notice, or this locale's
    /// own): recorded in the post, so that waits that can no longer
    /// complete end; on locale 0 the first panic also poisons the group.
    fn note_ended(&self, epoch: u64, locale: usize, ended: Ended) {
        if !(self.post.ended(epoch, locale, ended) && ended.panicked) {
            return;
        }
        // Release: pairs with the Acquire in `native`. The body's next
        // collective comes after this notice was handled (a group begins
        // once every body's end was acknowledged everywhere); the pair
        // keeps that order visible through the messages between.
        self.native_off.store(true, Ordering::Release);
        if self.here == 0 {
            // Release: pairs with `finish_group`'s Acquire load. Only the
            // first panic poisons: the notices of follow-on panics come
            // after the first one's was acknowledged (`body_ended`).
            let _ = self.poison.compare_exchange(
                0,
                locale as u64 + 1,
                Ordering::Release,
                Ordering::Relaxed,
            );
        }
    }

    /// Starts this locale's part in its next collective.
    fn collective(&self) -> Step<'_> {
        Step {
            m: self,
            epoch: self.post.epoch(),
            seq: self.entered.fetch_add(1, Ordering::Relaxed),
            phase: 0,
        }
    }

    /// Tells every locale (this one included) that this locale's body
    /// ended: locale 0 first, acknowledged, so that a first panic
    /// poisons before any follow-on panic it causes can; then the others,
    /// all acknowledged before this returns (before the body's reply
    /// leaves).
    fn announce_end(&self, epoch: u64, ended: Ended) {
        let here = self.here;
        let tell = |l: usize| {
            if l == here {
                self.note_ended(epoch, here, ended);
                None
            } else {
                Some(calls::ended(l, epoch, here, ended))
            }
        };
        let first = tell(0).map(crate::remote::RemoteHandle::join);
        let rest: Vec<_> = (1..self.locales).filter_map(tell).collect();
        for r in first
            .into_iter()
            .chain(rest.into_iter().map(crate::remote::RemoteHandle::join))
        {
            if let Err(e) = r {
                eprintln!(
                    "cantus::pgas: locale {here} could not tell that its SPMD body ended: {e}"
                );
            }
        }
    }
}

/// One locale's part in one collective: its group's epoch, its number,
/// and the next step. Every step waits in the post for what it needs and
/// sends on what others need; a collective returns only after this
/// locale sent everything it owes, so a body that completed it never
/// holds the others up.
struct Step<'a> {
    m: &'a MessageMemory,
    epoch: u64,
    seq: u64,
    phase: u32,
}

impl Step<'_> {
    fn next(&mut self) -> u32 {
        self.phase += 1;
        self.phase - 1
    }

    fn key(&self, phase: u32, from: usize) -> Key {
        Key {
            seq: self.seq,
            phase,
            from: from as u32,
        }
    }

    /// Waits for the parcel of `phase` from `from`.
    fn take(&self, phase: u32, from: usize) -> Vec<u8> {
        self.m
            .post
            .take(self.key(phase, from), self.m.here, crate::remote::poll_once)
    }

    fn send(&self, to: usize, phase: u32, bytes: &[u8]) {
        let key = self.key(phase, self.m.here);
        if let Err(e) = calls::send_parcel(to, self.epoch, key, bytes) {
            panic!(
                "cantus::pgas: locale {} could not send its part of a collective to locale \
                 {to}: {e}",
                self.m.here
            );
        }
    }

    /// A gather to `root` up the binomial tree: each locale's `mine`
    /// travels with its subtree's, as parts `(locale u32, length u64,
    /// bytes)`; `root` gets every locale's, in locale order.
    fn up(&mut self, root: usize, mine: &[u8]) -> Option<Vec<Vec<u8>>> {
        let phase = self.next();
        let tree = Tree::new(self.m.locales, root);
        let here = self.m.here;
        let mut bundle = Vec::with_capacity(12 + mine.len());
        bundle.extend_from_slice(&(here as u32).to_le_bytes());
        bundle.extend_from_slice(&(mine.len() as u64).to_le_bytes());
        bundle.extend_from_slice(mine);
        for child in tree.children(here) {
            bundle.extend_from_slice(&self.take(phase, child));
        }
        match tree.parent(here) {
            Some(parent) => {
                self.send(parent, phase, &bundle);
                None
            }
            None => Some(parts(&bundle, self.m.locales)),
        }
    }

    /// A broadcast from `root` down the binomial tree: `root` passes
    /// `data`, the others get it (`None` at the root).
    fn down(&mut self, root: usize, data: Option<&[u8]>) -> Option<Vec<u8>> {
        let phase = self.next();
        let tree = Tree::new(self.m.locales, root);
        let here = self.m.here;
        let got = tree.parent(here).map(|p| self.take(phase, p));
        let bytes = got.as_deref().or(data).expect("the root passes the data");
        for child in tree.children(here) {
            self.send(child, phase, bytes);
        }
        got
    }

    /// Every collective's first two steps: every locale's signature
    /// (with `extra` bytes) up to locale 0, which compares them and makes
    /// the answer (`decide` gets whether they agree and every locale's
    /// extra bytes, and its result travels with the verdict), and the
    /// verdict back down. The same verdict everywhere, whatever the
    /// locales called.
    fn agree(
        &mut self,
        sig: Signature,
        extra: &[u8],
        decide: impl FnOnce(bool, &[&[u8]]) -> Vec<u8>,
    ) -> Result<Vec<u8>, Mismatch> {
        let mut mine = sig.map(u64::to_le_bytes).as_flattened().to_vec();
        mine.extend_from_slice(extra);
        let answer = self.up(0, &mine).map(|parts| {
            let sig =
                |l: usize| -> Signature { std::array::from_fn(|i| read_u64(&parts[l], 8 * i)) };
            let verdict = agree(self.m.locales, sig);
            let extras: Vec<&[u8]> = parts.iter().map(|p| &p[24..]).collect();
            let mut answer = encode_verdict(verdict);
            answer.extend_from_slice(&decide(verdict.is_ok(), &extras));
            answer
        });
        let answer = match self.down(0, answer.as_deref()) {
            Some(got) => got,
            None => answer.expect("locale 0 made the answer"),
        };
        decode_verdict(&answer)?;
        Ok(answer[VERDICT..].to_vec())
    }
}

impl Drop for Step<'_> {
    fn drop(&mut self) {
        // A collective that ends by a panic is not completed: a locale's
        // notice of its end then says its body never completed it.
        if !std::thread::panicking() {
            self.m.completed.store(self.seq + 1, Ordering::Relaxed);
        }
    }
}

/// The little-endian u64 at `at` of `bytes`.
fn read_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// Every locale's part of a gathered bundle, in locale order. A bundle
/// that does not hold each locale's part once is a broken protocol.
fn parts(bundle: &[u8], locales: usize) -> Vec<Vec<u8>> {
    let mut parts = vec![None; locales];
    let mut at = 0;
    while at < bundle.len() {
        let locale = u32::from_le_bytes(bundle[at..at + 4].try_into().expect("4 bytes")) as usize;
        let len = read_u64(bundle, at + 4) as usize;
        let part = bundle[at + 12..at + 12 + len].to_vec();
        assert!(
            locale < locales && parts[locale].replace(part).is_none(),
            "cantus::pgas: a collective's gather holds locale {locale}'s part twice or of no locale"
        );
        at += 12 + len;
    }
    parts
        .into_iter()
        .enumerate()
        .map(|(l, p)| p.unwrap_or_else(|| panic!("cantus::pgas: a gather lacks locale {l}'s part")))
        .collect()
}

fn encode_verdict(verdict: Result<(), Mismatch>) -> Vec<u8> {
    let mut v = vec![0u8; VERDICT];
    if let Err(m) = verdict {
        v[0] = 1;
        v[1..9].copy_from_slice(&(m.locale as u64).to_le_bytes());
        for (i, w) in m.first.iter().chain(&m.theirs).enumerate() {
            v[9 + 8 * i..][..8].copy_from_slice(&w.to_le_bytes());
        }
    }
    v
}

fn decode_verdict(answer: &[u8]) -> Result<(), Mismatch> {
    if answer[0] == 0 {
        return Ok(());
    }
    let w = |i: usize| read_u64(answer, 9 + 8 * i);
    Err(Mismatch {
        locale: read_u64(answer, 1) as usize,
        first: [w(0), w(1), w(2)],
        theirs: [w(3), w(4), w(5)],
    })
}

impl Memory for MessageMemory {
    fn here(&self) -> usize {
        self.here
    }

    fn locales(&self) -> usize {
        self.locales
    }

    fn heap_bytes(&self) -> usize {
        self.heap_bytes
    }

    fn mapped(&self, locale: usize) -> Option<NonNull<u8>> {
        self.mapped[locale]
    }

    fn put_nb(
        &self,
        locale: usize,
        offset: usize,
        src: &[u8],
        signal: Option<(usize, AtomicOp)>,
        answers: Answers,
    ) -> Result<InFlight, Error> {
        calls::put_nb(locale, offset, src, signal, answers)
    }

    fn get_nb(&self, locale: usize, offset: usize, len: usize) -> Result<Gets, Error> {
        calls::get_nb(locale, offset, len)
    }

    /// A large get lands straight in `dst` over MPI (`calls::get_into`).
    fn get_into(&self, locale: usize, offset: usize, dst: &mut [u8]) -> Result<(), Error> {
        calls::get_into(locale, offset, dst)
    }

    fn atomic(
        &self,
        locale: usize,
        offset: usize,
        op: AtomicOp,
    ) -> Result<Result<u64, u64>, Error> {
        calls::atomic(locale, offset, op)
    }

    /// A gather of signatures to locale 0 and its verdict back (or the
    /// transport's all-gather of them).
    fn barrier(&self) -> Result<(), Mismatch> {
        // In a node that shares memory, the node's ranks wrote each
        // other's segments in place: the fences order those writes before
        // the barrier's messages and the reads after it, whatever path
        // the messages took (shared-memory rings, or MPI through another
        // node).
        fence(Ordering::SeqCst);
        let r = match self.native() {
            Some(coll) => self.native_barrier(coll),
            None => {
                let mut c = self.collective();
                c.agree([BARRIER, 0, 0], &[], |_, _| Vec::new()).map(drop)
            }
        };
        fence(Ordering::SeqCst);
        r
    }

    /// The verdict, then the data down a tree rooted at `root` (with the
    /// verdict, if the root is locale 0).
    fn broadcast(&self, sig: Signature, root: usize, bytes: &mut [u8]) -> Result<(), Mismatch> {
        if let Some(coll) = self.native() {
            return self.native_broadcast(coll, sig, root, bytes);
        }
        let mut c = self.collective();
        let here = self.here;
        let data = &*bytes;
        let first = c.agree(sig, &[], |ok, _| {
            if ok && root == 0 {
                data.to_vec()
            } else {
                Vec::new()
            }
        })?;
        if root == 0 {
            if here != 0 {
                bytes.copy_from_slice(&first);
            }
        } else if let Some(got) = c.down(root, (here == root).then_some(&*bytes)) {
            bytes.copy_from_slice(&got);
        }
        Ok(())
    }

    fn exchange<'p>(
        &self,
        sig: Signature,
        align: usize,
        part: &dyn Fn(usize) -> &'p [u8],
    ) -> Option<Result<Vec<AlignedBytes>, Mismatch>> {
        let coll = self.native()?;
        self.native_exchange(coll, sig, align, part)
    }

    /// Values go up with the signatures when locale 0 folds (`all_reduce`
    /// folds there and sends the result down with the verdict); for
    /// another root, the verdict first, then a gather to that root.
    fn reduce(
        &self,
        sig: Signature,
        root: Option<usize>,
        value: &[u8],
        fold: &dyn Fn(&[u8]) -> Vec<u8>,
    ) -> Result<Option<Vec<u8>>, Mismatch> {
        if let Some(coll) = self.native() {
            return self.native_reduce(coll, sig, root, value, fold);
        }
        let mut c = self.collective();
        let concat = |parts: &[&[u8]]| parts.concat();
        match root {
            None => c
                .agree(sig, value, |ok, values| {
                    if ok {
                        fold(&concat(values))
                    } else {
                        Vec::new()
                    }
                })
                .map(Some),
            Some(0) => {
                let mut folded = None;
                c.agree(sig, value, |ok, values| {
                    if ok {
                        folded = Some(fold(&concat(values)));
                    }
                    Vec::new()
                })?;
                Ok(folded)
            }
            Some(r) => {
                c.agree(sig, &[], |_, _| Vec::new())?;
                Ok(c.up(r, value).map(|values| {
                    let values: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
                    fold(&concat(&values))
                }))
            }
        }
    }

    /// Signatures and this locale's dropped handles up to locale 0, which
    /// frees what they free, then grants (the same rule as shared
    /// memory's allocator); the answer down; every locale zeroes its
    /// part; a barrier.
    fn alloc(&self, sig: Signature, bytes: usize, align: usize) -> Result<Block, AllocFailure> {
        let mut c = self.collective();
        let released: Vec<u8> = if self.here == 0 {
            Vec::new()
        } else {
            let headers = std::mem::take(&mut *self.released.lock().unwrap());
            headers.iter().flat_map(|h| h.to_le_bytes()).collect()
        };
        let answer = c
            .agree(sig, &released, |ok, extras| {
                let heap = self.heap();
                for h in extras.iter().flat_map(|e| e.chunks_exact(8)) {
                    heap.release(read_u64(h, 0) as usize);
                }
                let words = match (ok, heap.grant(bytes, align, self.locales as u64)) {
                    (false, _) => Vec::new(),
                    (true, Ok(b)) => vec![GRANTED, b.data as u64, b.header as u64, b.dirty as u64],
                    (true, Err(full)) => vec![FULL, full.left as u64],
                };
                words.iter().flat_map(|w| w.to_le_bytes()).collect()
            })
            .map_err(AllocFailure::Mismatch)?;
        if read_u64(&answer, 0) == FULL {
            return Err(AllocFailure::Full(Full {
                left: read_u64(&answer, 8) as usize,
            }));
        }
        let block = Block {
            data: read_u64(&answer, 8) as usize,
            header: read_u64(&answer, 16) as usize,
            dirty: read_u64(&answer, 24) as usize,
        };
        // SAFETY: data + dirty <= data + bytes <= heap_bytes (granted);
        // no locale puts into the block before the barrier below (none
        // has a pointer to it yet), and no task of this locale has one.
        unsafe { zero_part(self.own_segment(), &block) };
        c.up(0, &[]);
        c.down(0, self.here.eq(&0).then_some(&[]));
        Ok(block)
    }

    fn release(&self, header: usize) {
        if self.here == 0 {
            self.heap().release(header);
        } else {
            self.released.lock().unwrap().push(header as u64);
        }
    }

    /// Claims the group word on locale 0, then starts the group in every
    /// locale's post and waits until all did: the bodies are sent after
    /// this returns, so a body finds its group in its locale's post.
    fn begin_group(&self, id: u64) -> Result<(), Error> {
        let epoch = if self.here == 0 {
            self.claim()
        } else {
            calls::claim()?
        }
        .ok_or_else(super::shared::group_running)?;
        let calls: Vec<_> = (0..self.locales)
            .filter(|&l| l != self.here)
            .map(|l| calls::begin(l, epoch, id))
            .collect();
        self.post.begin(epoch, id, self.locales);
        let started = calls
            .into_iter()
            .map(crate::remote::RemoteHandle::join)
            .find_map(Result::err);
        match started {
            None => Ok(()),
            Some(e) => {
                self.end_group();
                Err(e)
            }
        }
    }

    fn running_group(&self) -> Option<(u64, u64)> {
        self.post.group()
    }

    fn body_started(&self, _: u64) {
        self.entered.store(0, Ordering::Relaxed);
        self.completed.store(0, Ordering::Relaxed);
    }

    /// Announces the end to every locale (unless the body returned while
    /// a task of it is inside a collective: that task may yet arrive),
    /// from a task of its own if the body was an inline call (which may
    /// not send).
    fn body_ended(&self, panicked: bool, in_collective: bool) {
        if !panicked && in_collective {
            return;
        }
        let epoch = self.post.epoch();
        let ended = Ended {
            done: self.completed.load(Ordering::Relaxed),
            panicked,
        };
        if crate::sched::no_wait::inline_call().is_none() {
            self.announce_end(epoch, ended);
            return;
        }
        crate::par::begin(move || {
            if let Some(s) = super::space::installed() {
                if let Some(m) = s.memory.as_any().downcast_ref::<MessageMemory>() {
                    m.announce_end(epoch, ended);
                }
            }
        });
    }

    fn end_group(&self) -> Option<usize> {
        if self.here == 0 {
            return self.finish_group();
        }
        calls::end().unwrap_or_else(|e| {
            eprintln!("cantus::pgas: could not end the SPMD group on locale 0: {e}");
            None
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_round_trip() {
        assert_eq!(decode_verdict(&encode_verdict(Ok(()))), Ok(()));
        let m = Mismatch {
            first: [1, 2, 3],
            locale: 5,
            theirs: [4, u64::MAX, 6],
        };
        assert_eq!(decode_verdict(&encode_verdict(Err(m))), Err(m));
        assert_eq!(encode_verdict(Err(m)).len(), VERDICT);
    }

    #[test]
    fn bundles_hold_each_locale_once() {
        let mut b = Vec::new();
        for (l, part) in [(2u32, &b"cc"[..]), (0, b""), (1, b"b")] {
            b.extend_from_slice(&l.to_le_bytes());
            b.extend_from_slice(&(part.len() as u64).to_le_bytes());
            b.extend_from_slice(part);
        }
        assert_eq!(parts(&b, 3), [b"".to_vec(), b"b".to_vec(), b"cc".to_vec()]);
        assert!(
            std::panic::catch_unwind(|| parts(&b, 4)).is_err(),
            "a part missing"
        );
        let twice = [b.clone(), b].concat();
        assert!(
            std::panic::catch_unwind(|| parts(&twice, 3)).is_err(),
            "a part twice"
        );
    }

    /// One locale: every collective is answered by the locale itself.
    #[test]
    fn one_locale_collectives_and_allocation() {
        let m = MessageMemory::new((0, 1, 1 << 20), None, None).unwrap();
        m.post.begin(1, 9, 1);
        m.body_started(1);
        assert_eq!(m.barrier(), Ok(()));
        let mut buf = [1u8, 2, 3];
        m.broadcast([super::super::memory::BROADCAST, 0, 3], 0, &mut buf)
            .unwrap();
        assert_eq!(buf, [1, 2, 3]);
        let folded = m
            .reduce(
                [super::super::memory::ALL_REDUCE, 0, 2],
                None,
                &[7, 8],
                &|v| v.to_vec(),
            )
            .unwrap();
        assert_eq!(folded, Some(vec![7, 8]));
        let a = m
            .alloc([super::super::memory::ALLOC, 100, 8], 100, 8)
            .unwrap();
        let b = m
            .alloc([super::super::memory::ALLOC, 100, 8], 100, 8)
            .unwrap();
        assert!(b.data > a.data);
        m.release(b.header);
        m.release(a.header);
        let c = m
            .alloc([super::super::memory::ALLOC, 100, 8], 100, 8)
            .unwrap();
        assert_eq!(c.data, a.data, "freed blocks went back");
        assert!(matches!(
            m.alloc([super::super::memory::ALLOC, 2 << 20, 8], 2 << 20, 8),
            Err(AllocFailure::Full(_))
        ));
        assert_eq!(
            m.completed.load(Ordering::Relaxed),
            7,
            "a full heap is an answer too"
        );
        assert_eq!(m.claim(), Some(1));
        assert_eq!(m.claim(), None, "one group at a time");
        assert_eq!(m.finish_group(), None);
    }
}
