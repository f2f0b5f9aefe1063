//! The shared-memory transport: every ordered pair of locales has two
//! rings in the job's region (one per network), and every locale has a
//! line with its doorbell (a futex word) and its sleeping flag.
//! `README.md` beside this file ("The transport") states the layout and
//! the wake-up protocol. After the rings come the symmetric areas
//! (`comm/symmetric.rs`) that the global address space (`pgas/`) lays
//! out: a control page, a scratch area per locale and a heap segment per
//! locale (`SymmetricAreas for ShmTransport`).

use super::futex::{futex_wait, futex_wake};
use super::region::{Area, HEADER_SIZE, LINE, Layout, MAX_ALIGN, Region};
use super::rendezvous::{
    self, Blocks, Inbound, NOTE_LEN, NOTE_TAG, Outbound, RETURN_TAG, Returned,
};
use super::ring::{self, Consumer, Producer};
use crate::comm::symmetric::{AREA_ALIGN, Areas, CONTROL_BYTES, SCRATCH_BYTES, SymmetricAreas};
use crate::comm::transport::{
    Arrival, Lent, Nets, Network, SendError, Staged, StagedFrame, TakeBack, Transport,
};
use crate::error::{Error, ErrorKind, Locales};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The job's shape, written by locale 0 into the first area of the region
/// before any other locale starts; the others read it to compute the same
/// layout.
#[repr(C)]
struct JobInfo {
    locales: u64,
    ring_bytes: u64,
    heap_bytes: u64,
    rendezvous_bytes: u64,
}

/// The job's shape, as every locale computes the layout from it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    /// Locales in the job.
    pub(crate) locales: usize,
    /// Bytes of each ring (a power of two).
    pub(crate) ring_bytes: usize,
    /// Bytes of each locale's heap segment.
    pub(crate) heap_bytes: usize,
    /// Bytes of each ordered pair's rendezvous area (0: none).
    pub(crate) rendezvous_bytes: usize,
}

// The symmetric areas are carved at offsets aligned to AREA_ALIGN of a
// mapping aligned to a page, which `Layout::carve` allows up to MAX_ALIGN.
const _: () = assert!(AREA_ALIGN <= MAX_ALIGN && AREA_ALIGN.is_power_of_two());

/// Where everything is in the region, for `locales` locales, rings of
/// `ring_bytes` and heap segments of `heap_bytes`: a pure function of the
/// three, so every locale computes it alike.
struct Plan {
    layout: Layout,
    info: Area,
    /// One line per locale: doorbell (futex word) at 0, sleeping at 4.
    lines: Vec<Area>,
    /// Ring of (src, dst, net) at `src * locales * 2 + dst * 2 + net`;
    /// `src == dst` has none.
    rings: Vec<Option<Area>>,
    /// The symmetric areas: control page, scratch areas, heaps.
    pgas_control: Area,
    pgas_scratch: Vec<Area>,
    heaps: Vec<Area>,
    /// Rendezvous area of (src, dst) at `src * locales + dst` (`README.md`,
    /// "Rendezvous"); none for `src == dst` or when they are off.
    rendezvous: Vec<Option<Area>>,
}

impl Plan {
    fn new(shape: Shape) -> Result<Plan, Error> {
        let Shape {
            locales,
            ring_bytes,
            heap_bytes,
            rendezvous_bytes,
        } = shape;
        let mut layout = Layout::new();
        let info = layout.carve(std::mem::size_of::<JobInfo>(), LINE)?;
        debug_assert_eq!(info.offset(), HEADER_SIZE.next_multiple_of(LINE));
        let lines = (0..locales)
            .map(|_| layout.carve(LINE, LINE))
            .collect::<Result<Vec<_>, _>>()?;
        let mut rings = Vec::with_capacity(locales * locales * 2);
        for src in 0..locales {
            for dst in 0..locales {
                for _ in Network::ALL {
                    rings.push(if src == dst {
                        None
                    } else {
                        Some(layout.carve(ring::footprint(ring_bytes), ring::ALIGN)?)
                    });
                }
            }
        }
        let pgas_control = layout.carve(CONTROL_BYTES, AREA_ALIGN)?;
        let pgas_scratch = (0..locales)
            .map(|_| layout.carve(SCRATCH_BYTES, AREA_ALIGN))
            .collect::<Result<Vec<_>, _>>()?;
        let heaps = (0..locales)
            .map(|_| layout.carve(heap_bytes, AREA_ALIGN))
            .collect::<Result<Vec<_>, _>>()?;
        let mut rendezvous = Vec::with_capacity(locales * locales);
        for src in 0..locales {
            for dst in 0..locales {
                rendezvous.push(if src == dst || rendezvous_bytes == 0 {
                    None
                } else {
                    Some(layout.carve(rendezvous_bytes, MAX_ALIGN)?)
                });
            }
        }
        Ok(Plan {
            layout,
            info,
            lines,
            rings,
            pgas_control,
            pgas_scratch,
            heaps,
            rendezvous,
        })
    }

    fn ring(&self, locales: usize, src: usize, dst: usize, net: Network) -> Area {
        self.rings[src * locales * 2 + dst * 2 + net as usize].expect("a ring between two locales")
    }
}

/// A ring that takes frames from this locale, and how many it took.
struct Outgoing {
    ring: Producer,
    /// Frames committed to `ring` (only written under its mutex).
    taken: u64,
}

/// A ring that brings frames to this locale.
struct Incoming {
    /// The ring's base in the region, for [`unread`](Self::unread).
    base: NonNull<u8>,
    /// Its consumer; only the poller (one at a time, by the driver's
    /// token) locks it.
    consumer: Mutex<Consumer>,
}

impl Incoming {
    /// Whether the ring holds a frame not yet taken (two loads, no lock).
    fn unread(&self) -> bool {
        // SAFETY: `base` is the ring the consumer was attached to, in the
        // region's mapping, which outlives the transport that holds this;
        // `unread` only loads its two indices.
        unsafe { ring::unread(self.base) }
    }
}

/// This locale's end of the shared-memory transport.
pub(crate) struct ShmTransport {
    region: Arc<Region>,
    here: usize,
    locales: usize,
    /// The largest frame `try_send` takes (a block's, when rendezvous is
    /// on; else a ring frame's).
    max_frame: usize,
    /// The largest frame that goes through a ring; larger ones go by
    /// rendezvous.
    ring_frame: usize,
    /// Our rendezvous areas, by destination (`None`: ourselves, or off);
    /// shared with the staged blocks ([`ShmStage`]).
    bulk_out: Vec<Option<Arc<Mutex<Outbound>>>>,
    /// The others' areas for us, by source.
    bulk_in: Vec<Option<Mutex<Inbound>>>,
    /// Where lent blocks go back.
    blocks: Arc<dyn TakeBack>,
    /// Where blocks of ours returned to us go back, by destination
    /// (`None` where `bulk_out` is).
    returned: Vec<Option<Arc<dyn TakeBack>>>,
    /// Our producers, by destination and network (`None` for ourselves).
    /// A mutex each: any thread of this locale may send.
    out: Vec<[Option<Mutex<Outgoing>>; 2]>,
    /// Our incoming rings, by source and network.
    inc: Vec<[Option<Incoming>; 2]>,
    /// Each locale's line (doorbell, sleeping).
    lines: Vec<usize>,
    /// The symmetric areas.
    pgas_control: Area,
    pgas_scratch: Vec<Area>,
    heaps: Vec<Area>,
    heap_bytes: usize,
    /// An `unpark` that no `park` consumed yet.
    unpark_token: AtomicBool,
    /// Where the next poll starts, so no source is always served last.
    next_src: AtomicUsize,
}

// SAFETY: the raw pointers are into the region's mapping, which the
// transport owns and which stays mapped as long as it lives; every access
// through them follows the ring's protocol (ring.rs) or is atomic.
unsafe impl Send for ShmTransport {}
// SAFETY: as above; mutable state is behind mutexes or atomics.
unsafe impl Sync for ShmTransport {}

impl ShmTransport {
    /// Locale 0: creates the region for `locales` locales with rings of
    /// `ring_bytes` (a power of two) and heap segments of `heap_bytes`,
    /// and initializes every ring. The other locales attach with
    /// [`ShmTransport::attach`] once started with `region.share_with`.
    pub(crate) fn create(shape: Shape) -> Result<ShmTransport, Error> {
        let plan = Plan::new(shape)?;
        let region = Region::create(plan.layout.len())?;
        // SAFETY: the info area lies within the fresh region, LINE-aligned,
        // and no other process maps the region yet.
        unsafe {
            region
                .ptr(plan.info)
                .cast::<JobInfo>()
                .as_ptr()
                .write(JobInfo {
                    locales: shape.locales as u64,
                    ring_bytes: shape.ring_bytes as u64,
                    heap_bytes: shape.heap_bytes as u64,
                    rendezvous_bytes: shape.rendezvous_bytes as u64,
                })
        };
        for area in plan.rings.iter().flatten() {
            // SAFETY: each ring area was carved with the footprint and
            // alignment a ring needs; no handle to it exists anywhere yet.
            unsafe { ring::init(region.ptr(*area), shape.ring_bytes)? };
        }
        ShmTransport::open(region, plan, 0, shape)
    }

    /// Any locale but 0: attaches to the region inherited from locale 0 as
    /// locale `here`.
    pub(crate) fn attach(region: Region, here: usize) -> Result<ShmTransport, Error> {
        let info_area = Plan::new(Shape {
            locales: 1,
            ring_bytes: ring::MIN_CAPACITY,
            heap_bytes: 0,
            rendezvous_bytes: 0,
        })?
        .info;
        // SAFETY: the info area is at the same offset for every plan (the
        // first carve); locale 0 wrote it before starting this process.
        let info = unsafe { region.ptr(info_area).cast::<JobInfo>().as_ptr().read() };
        let shape = Shape {
            locales: info.locales as usize,
            ring_bytes: info.ring_bytes as usize,
            heap_bytes: info.heap_bytes as usize,
            rendezvous_bytes: info.rendezvous_bytes as usize,
        };
        let locales = shape.locales;
        if here == 0 || here >= locales {
            return Err(Error::new(
                ErrorKind::Locale,
                format!(
                    "cantus: this process was started as locale {here}, but the job has {}",
                    Locales(locales)
                ),
            ));
        }
        let plan = Plan::new(shape)?;
        if plan.layout.len() > region.len() {
            return Err(Error::new(
                ErrorKind::SharedMemory,
                format!(
                    "cantus: the job's region is {} bytes, but {locales} locales with \
                     {}-byte rings, {}-byte heaps and {}-byte rendezvous areas need {}",
                    region.len(),
                    shape.ring_bytes,
                    shape.heap_bytes,
                    shape.rendezvous_bytes,
                    plan.layout.len()
                ),
            ));
        }
        ShmTransport::open(region, plan, here, shape)
    }

    fn open(region: Region, plan: Plan, here: usize, shape: Shape) -> Result<ShmTransport, Error> {
        let (locales, ring_bytes, rendezvous_bytes) =
            (shape.locales, shape.ring_bytes, shape.rendezvous_bytes);
        let mut out = Vec::with_capacity(locales);
        let mut inc = Vec::with_capacity(locales);
        for other in 0..locales {
            if other == here {
                out.push([None, None]);
                inc.push([None, None]);
                continue;
            }
            let mut o = [None, None];
            let mut i = [None, None];
            for net in Network::ALL {
                let to = region.ptr(plan.ring(locales, here, other, net));
                let from = region.ptr(plan.ring(locales, other, here, net));
                // SAFETY: both areas are rings initialized by locale 0
                // before this process started (or, in locale 0, above);
                // this locale is the only producer of the rings from it
                // and the only consumer of the rings to it.
                unsafe {
                    o[net as usize] = Some(Mutex::new(Outgoing {
                        ring: Producer::attach(to, ring_bytes)?,
                        taken: 0,
                    }));
                    i[net as usize] = Some(Incoming {
                        base: from,
                        consumer: Mutex::new(Consumer::attach(from, ring_bytes)?),
                    });
                }
            }
            out.push(o);
            inc.push(i);
        }
        let ring_frame = ring::max_payload(ring_bytes);
        // Rendezvous pays only where a block carries more than a ring frame.
        let rendezvous_on =
            rendezvous_bytes > 0 && rendezvous::max_payload(rendezvous_bytes) > ring_frame;
        let area =
            |src: usize, dst: usize| plan.rendezvous[src * locales + dst].filter(|_| rendezvous_on);
        let bulk_out: Vec<Option<Arc<Mutex<Outbound>>>> = (0..locales)
            .map(|dst| {
                area(here, dst).map(|a| {
                    // SAFETY: the area was carved for (here, dst) alone, a
                    // page-aligned piece of the region, which the transport
                    // keeps mapped; this is its only sender.
                    Arc::new(Mutex::new(unsafe { Outbound::new(region.ptr(a), a.len()) }))
                })
            })
            .collect();
        let bulk_in = (0..locales)
            .map(|src| area(src, here).map(|a| Mutex::new(Inbound::new(a.offset(), a.len()))))
            .collect();
        let region = Arc::new(region);
        let returned = (0..locales)
            .map(|dst| {
                let out = bulk_out[dst].as_ref()?;
                let a = area(here, dst)?;
                let held = out.lock().unwrap().held();
                Some(Arc::new(Returned {
                    region: region.clone(),
                    area: a.offset(),
                    held,
                }) as Arc<dyn TakeBack>)
            })
            .collect();
        Ok(ShmTransport {
            here,
            locales,
            max_frame: if rendezvous_on {
                rendezvous::max_payload(rendezvous_bytes)
            } else {
                ring_frame
            },
            ring_frame,
            bulk_out,
            bulk_in,
            blocks: Arc::new(Blocks {
                region: region.clone(),
            }),
            returned,
            out,
            inc,
            lines: plan.lines.iter().map(|a| a.offset()).collect(),
            pgas_control: plan.pgas_control,
            pgas_scratch: plan.pgas_scratch,
            heaps: plan.heaps,
            heap_bytes: shape.heap_bytes,
            unpark_token: AtomicBool::new(false),
            next_src: AtomicUsize::new(0),
            region,
        })
    }

    /// Sends a frame larger than a ring frame by rendezvous (`README.md`,
    /// "Rendezvous"): copies it once into a block of our area for `dest`,
    /// then puts the block's note on the ring. `NoLargeRoom` when the
    /// area has no room (its receiver may be keeping blocks: rule L),
    /// `Full` when the ring has none (nothing sent, the block given back).
    fn send_block(
        &self,
        dest: usize,
        parts: &[&[u8]],
        len: usize,
        producer: &Mutex<Outgoing>,
    ) -> Result<(), SendError> {
        let Some(area) = self.bulk_out.get(dest).and_then(Option::as_ref) else {
            // `max_frame` is a ring frame's when rendezvous is off, and
            // `try_send` checked the length against it.
            unreachable!("a frame larger than a ring frame, with no rendezvous area");
        };
        // The area's lock is held until the note is on the ring, so notes
        // go onto each ring in the order of their blocks' numbers (which
        // the receiver checks).
        let mut area = area.lock().unwrap();
        if let Some(sent) = self.send_staged(&mut area, parts, len, producer) {
            // Rule S: written in its staged block.
            return sent;
        }
        let block = area.try_alloc(len).ok_or(SendError::NoLargeRoom)?;
        write_parts(area.payload_mut(&block), parts);
        let mut p = producer.lock().unwrap();
        let p = &mut *p;
        match p.ring.try_reserve(NOTE_TAG, NOTE_LEN) {
            Ok(mut slot) => {
                slot.payload_mut().copy_from_slice(&block.note());
                slot.commit();
                p.taken += 1;
                Ok(())
            }
            Err(_) => {
                area.unalloc(block);
                Err(SendError::Full)
            }
        }
    }

    /// Sends the frame `parts` (`len` bytes) in the staged block it was
    /// written in (rule S of `README.md`), if it was: one of its parts
    /// lies in a staged block exactly where the frame puts it (the staged
    /// bytes, not copied), and the others, copied around it, lie outside
    /// that block. `None` if not (or if the block cannot grow to the
    /// frame): the frame goes in a block of its own, as any. `Full` if
    /// the ring has no room for the note (the block stays staged, the
    /// frame written in it).
    fn send_staged(
        &self,
        area: &mut Outbound,
        parts: &[&[u8]],
        len: usize,
        producer: &Mutex<Outgoing>,
    ) -> Option<Result<(), SendError>> {
        let mut at = 0;
        let stage = parts.iter().find_map(|part| {
            let held = area.staged_holding(part.as_ptr() as usize, part.len());
            let found = held.and_then(|(stage, pos)| (pos == at).then_some(stage));
            at += part.len();
            found
        })?;
        let (payload, room) = area.staged_payload(stage)?;
        let payload = payload.as_ptr() as usize;
        let block = payload..payload + room.max(len);
        let mut at = 0;
        for part in parts {
            let p = part.as_ptr() as usize;
            if !part.is_empty()
                && p < block.end
                && block.start < p + part.len()
                && p != payload + at
            {
                // Bytes of the block, not where the frame puts them.
                return None;
            }
            at += part.len();
        }
        if !area.resize_staged(stage, len) {
            return None;
        }
        let mut at = 0;
        for part in parts {
            if part.as_ptr() as usize != payload + at {
                // SAFETY: the block's payload is `len` bytes at `payload`,
                // ours alone while it is staged (`resize_staged` made it
                // that long); this part lies outside it (checked above),
                // and `at + part.len() <= len`.
                unsafe {
                    crate::copy::copy_raw(part.as_ptr(), (payload + at) as *mut u8, part.len())
                };
            }
            at += part.len();
        }
        let mut p = producer.lock().unwrap();
        let p = &mut *p;
        let Ok(mut slot) = p.ring.try_reserve(NOTE_TAG, NOTE_LEN) else {
            return Some(Err(SendError::Full));
        };
        // Numbered now, under the area's lock: its note is the next.
        let block = area.send_staged(stage);
        slot.payload_mut().copy_from_slice(&block.note());
        slot.commit();
        p.taken += 1;
        STAGED_SENT.fetch_add(1, Ordering::Relaxed);
        Some(Ok(()))
    }

    /// The block a note from `src` names, checked, lent to the receiver.
    fn lend_block(&self, src: usize, net: Network, note: &[u8]) -> Result<Lent, String> {
        let Some(inbound) = self.bulk_in.get(src).and_then(Option::as_ref) else {
            return Err("a block's note, but rendezvous is off".into());
        };
        let taken = inbound
            .lock()
            .unwrap()
            .check(&self.region, net as usize, note)?;
        let ptr = self.region.ptr(Area::new(taken.payload, taken.len));
        // SAFETY: the block was checked to lie in `src`'s area for us and
        // to be WRITTEN: its sender wrote it before the note (which the
        // ring's Acquire made visible) and writes it again only after the
        // Lent's drop stores TAKEN in its state word (`Blocks`), reading
        // nothing of it before; the region is mapped writable, from a raw
        // pointer (`Region::ptr`), and stays mapped while `self.blocks`
        // (held by the Lent) lives.
        Ok(unsafe { Lent::new(ptr, taken.len, self.blocks.clone(), taken.state) })
    }

    /// The frame a return note from `src` names (a block of ours, sent to
    /// `src`, handed back with its reply written in it), checked against
    /// our records of the area, lent to the receiver: its drop takes the
    /// block back.
    fn lend_returned(&self, src: usize, note: &[u8]) -> Result<Lent, String> {
        let (Some(area), Some(owner)) = (
            self.bulk_out.get(src).and_then(Option::as_ref),
            self.returned.get(src).and_then(Option::as_ref),
        ) else {
            return Err("a block's return, but rendezvous is off".into());
        };
        let r = area.lock().unwrap().check_return(note)?;
        // SAFETY: `check_return` found the frame inside a block of ours
        // that `src` was sent and returned, and holds the block (`held`):
        // `reclaim` reuses it only after the Lent's drop
        // (`Returned::take_back`) lets it go, whatever `src` writes to its
        // state word; `src` wrote the frame before the note, which the
        // ring's Acquire made visible, and writes the block no more (it
        // gave it up). The region stays mapped while `owner` (held by the
        // Lent) lives.
        Ok(unsafe { Lent::new(r.frame, r.len, owner.clone(), r.block) })
    }

    /// The region, to share with a locale being started.
    pub(crate) fn region(&self) -> &Region {
        &self.region
    }

    fn doorbell(&self, locale: usize) -> &AtomicU32 {
        self.region.atomic_u32(self.lines[locale])
    }

    fn sleeping(&self, locale: usize) -> &AtomicU32 {
        self.region.atomic_u32(self.lines[locale] + 4)
    }

    /// Rings `locale`'s doorbell if it sleeps (or is about to).
    fn wake_if_sleeping(&self, locale: usize) {
        // SeqCst fence: the store-buffer pattern with `park`. Our frame's
        // commit (a Release store of the ring's tail) comes before this
        // fence and our load of `sleeping` after it; `park` stores
        // `sleeping` before its own fence and loads the tails after. So
        // either we see it sleeping and ring, or it sees our frame.
        fence(Ordering::SeqCst);
        if self.sleeping(locale).load(Ordering::Relaxed) != 0 {
            self.ring_doorbell(locale);
        }
    }

    fn ring_doorbell(&self, locale: usize) {
        // Release: a parked locale that wakes and reads the new value has
        // the frames committed before.
        self.doorbell(locale).fetch_add(1, Ordering::Release);
        futex_wake(self.doorbell(locale), 1);
    }

    /// Blocks the calling thread until a frame may have arrived in a ring
    /// to this locale, `also_ready()` holds (frames another transport of
    /// this locale received: the MPI ranks of a node, `comm/mpi/route.rs`,
    /// whose MPI side then calls [`wake_own_if_sleeping`](Self::wake_own_if_sleeping)
    /// after publishing them), `unpark` was called, or `timeout` passed.
    /// Returns whether it took an `unpark`'s token.
    pub(crate) fn park_until(
        &self,
        timeout: Option<Duration>,
        also_ready: &dyn Fn() -> bool,
    ) -> bool {
        let bell = self.doorbell(self.here);
        // Acquire: pairs with `ring_doorbell`'s Release increment.
        let seen = bell.load(Ordering::Acquire);
        self.sleeping(self.here).store(1, Ordering::Relaxed);
        // SeqCst fence: pairs with the one in `wake_if_sleeping` (see
        // there): a sender that misses our flag committed its frame (or
        // published what `also_ready` reads) before its fence, so the
        // checks below see it.
        fence(Ordering::SeqCst);
        let mut unparked = self.unpark_token.swap(false, Ordering::AcqRel);
        if !unparked && !self.ready() && !also_ready() {
            // A doorbell rung since we read `seen` makes this return at
            // once (the kernel compares the word).
            let _ = futex_wait(bell, seen, timeout);
            unparked = self.unpark_token.swap(false, Ordering::AcqRel);
        }
        self.sleeping(self.here).store(0, Ordering::Relaxed);
        unparked
    }

    /// Wakes this locale's own `park_until`, if it sleeps: for a thread of
    /// this process that published something `also_ready` reads (the
    /// store-buffer pattern of `wake_if_sleeping`, whose fence it makes).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn wake_own_if_sleeping(&self) {
        self.wake_if_sleeping(self.here);
    }
}

/// Copies `parts` one after another into `buf` (exactly their total
/// length): a frame's bytes, into a ring slot or a rendezvous block.
/// Frames this process sent from staged blocks (`__test::staged_frames`).
static STAGED_SENT: AtomicU64 = AtomicU64::new(0);

/// Frames this process sent from blocks staged for them (rule S), for
/// tests.
pub(crate) fn staged_frames() -> u64 {
    STAGED_SENT.load(Ordering::Relaxed)
}

/// A staged block of one of our areas (`Transport::stage`): given back
/// when dropped, unless it was sent (`ShmTransport::send_staged`).
struct ShmStage {
    area: Arc<Mutex<Outbound>>,
    /// Keeps the block's memory mapped while the room may be written.
    _region: Arc<Region>,
    /// Its stage number in the area.
    stage: u64,
    /// Its payload's length (as this room last made it).
    len: usize,
    /// The longest frame a block takes.
    max: usize,
}

impl ShmStage {
    fn area(&self) -> std::sync::MutexGuard<'_, Outbound> {
        self.area.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl StagedFrame for ShmStage {
    fn as_mut_ptr(&self) -> *mut u8 {
        self.area()
            .staged_payload(self.stage)
            .expect("a staged block is written only before it is sent")
            .0
            .as_ptr()
    }

    fn len(&self) -> usize {
        self.len
    }

    fn resize(&mut self, len: usize) -> bool {
        let done = len <= self.max && self.area().resize_staged(self.stage, len);
        if done {
            self.len = len;
        }
        done
    }
}

impl Drop for ShmStage {
    fn drop(&mut self) {
        self.area().unstage(self.stage);
    }
}

fn write_parts(buf: &mut [u8], parts: &[&[u8]]) {
    let mut at = 0;
    for part in parts {
        crate::copy::copy(&mut buf[at..at + part.len()], part);
        at += part.len();
    }
}

// SAFETY: the areas are carved by `Plan`, after the rings and apart from
// them and from one another, at offsets aligned to AREA_ALIGN of the
// region, which is mapped at a page boundary, in bounds (`open` checks
// the region holds the plan); every locale computes the same plan from
// the same `JobInfo`, and maps the same memfd, fresh (zero) when locale 0
// created it; the mapping lives as long as `self`.
unsafe impl SymmetricAreas for ShmTransport {
    fn areas(&self) -> Areas {
        Areas {
            here: self.here,
            locales: self.locales,
            control: self.region.ptr(self.pgas_control),
            scratch: self
                .pgas_scratch
                .iter()
                .map(|&a| self.region.ptr(a))
                .collect(),
            heaps: self.heaps.iter().map(|&a| self.region.ptr(a)).collect(),
            heap_bytes: self.heap_bytes,
        }
    }
}

impl Transport for ShmTransport {
    fn here(&self) -> usize {
        self.here
    }

    fn locales(&self) -> usize {
        self.locales
    }

    fn max_frame(&self) -> usize {
        self.max_frame
    }

    fn eager_frame(&self) -> usize {
        self.ring_frame
    }

    fn stage(&self, dest: usize, need: usize, want: usize) -> Option<Staged> {
        if need <= self.ring_frame || need > self.max_frame {
            return None;
        }
        let area = self.bulk_out.get(dest)?.as_ref()?;
        let len = want.clamp(need, self.max_frame);
        let stage = area.lock().unwrap().stage(len)?;
        Some(Box::new(ShmStage {
            area: area.clone(),
            _region: self.region.clone(),
            stage,
            len,
            max: self.max_frame,
        }))
    }

    fn try_send(&self, dest: usize, net: Network, parts: &[&[u8]]) -> Result<(), SendError> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let producer = match self.out.get(dest).and_then(|o| o[net as usize].as_ref()) {
            Some(p) => p,
            None => {
                return Err(SendError::Failed(Error::new(
                    ErrorKind::Locale,
                    format!(
                        "cantus: locale {} cannot send to locale {dest} (the job has locales 0 to {})",
                        self.here,
                        self.locales - 1
                    ),
                )));
            }
        };
        if len > self.max_frame {
            return Err(SendError::Failed(Error::new(
                ErrorKind::InvalidConfig,
                format!(
                    "cantus: a {len}-byte message is larger than the largest the shared-memory \
                     transport carries ({} bytes); raise CANTUS_RENDEZVOUS_BYTES (a block may \
                     take a quarter of an area) or CANTUS_RING_BYTES (a frame may take half a ring), or \
                     send less at once",
                    self.max_frame
                ),
            )));
        }
        if len > self.ring_frame {
            self.send_block(dest, parts, len, producer)?;
        } else {
            let mut p = producer.lock().unwrap();
            let p = &mut *p;
            let mut slot = p.ring.try_reserve(0, len).map_err(|_| SendError::Full)?;
            write_parts(slot.payload_mut(), parts);
            slot.commit();
            p.taken += 1;
        }
        self.wake_if_sleeping(dest);
        Ok(())
    }

    fn try_send_returning(
        &self,
        dest: usize,
        net: Network,
        head: &[&[u8]],
        lent: Lent,
        array: std::ops::Range<usize>,
        tail: &[&[u8]],
    ) -> Result<(), Lent> {
        // A block `dest` sent us (its state word's offset is the token).
        let Some(state) = lent.token_from(&self.blocks) else {
            return Err(lent);
        };
        let Some(area) = self
            .bulk_in
            .get(dest)
            .and_then(Option::as_ref)
            .map(|i| i.lock().unwrap())
            .filter(|i| i.contains(state))
            .map(|i| i.offset())
        else {
            return Err(lent);
        };
        let head_len: usize = head.iter().map(|p| p.len()).sum();
        let tail_len: usize = tail.iter().map(|p| p.len()).sum();
        if array.end > lent.len() || head_len > array.start || tail_len > lent.len() - array.end {
            return Err(lent);
        }
        let Some(producer) = self.out.get(dest).and_then(|o| o[net as usize].as_ref()) else {
            return Err(lent);
        };
        let start = array.start - head_len;
        let len = head_len + array.len() + tail_len;
        // The frame's offset in the sender's area: its block's payload
        // follows the header at `state`.
        let at = state - area + rendezvous::BLOCK_HEADER + start;
        let note = rendezvous::return_note(at, len, rendezvous::block_number(&self.region, state));
        let mut p = producer.lock().unwrap();
        let p = &mut *p;
        let Ok(mut slot) = p.ring.try_reserve(RETURN_TAG, NOTE_LEN) else {
            return Err(lent);
        };
        let base = lent.as_mut_ptr();
        // SAFETY: `lent` is ours alone (given by value; a `Lent` is never
        // cloned) and its bytes ours to write (`Lent::as_mut_ptr`); the
        // head ends where the array starts, the tail starts where it ends,
        // both inside `lent` (checked above), so neither overlaps the
        // array or the parts (which the caller holds apart from `lent`'s
        // bytes outside the array).
        unsafe {
            write_parts(
                std::slice::from_raw_parts_mut(base.add(start), head_len),
                head,
            );
            write_parts(
                std::slice::from_raw_parts_mut(base.add(array.end), tail_len),
                tail,
            );
        }
        slot.payload_mut().copy_from_slice(&note);
        // Release: the array's bytes (changed in place by their reader),
        // the head and the tail are visible to `dest` before the note.
        slot.commit();
        p.taken += 1;
        // The block is its sender's again: no take-back from here.
        lent.hand_over();
        self.wake_if_sleeping(dest);
        Ok(())
    }

    fn poll(
        &self,
        nets: Nets,
        budget: usize,
        deliver: &mut dyn FnMut(Arrival<'_>),
    ) -> Result<usize, Error> {
        let unusable = |src: usize, net: Network, e: &dyn std::fmt::Display| {
            Error::new(
                ErrorKind::SharedMemory,
                format!(
                    "cantus: locale {}: the {net:?} ring from locale {src} is unusable: {e}",
                    self.here
                ),
            )
        };
        let n = self.locales;
        // Only one thread polls at a time (the `Transport` contract), so a
        // load and a store rotate the starting ring; were that broken, the
        // rotation would only be less fair, never wrong.
        let start = self.next_src.load(Ordering::Relaxed) % n;
        self.next_src.store(start + 1, Ordering::Relaxed);
        let mut handled = 0;
        // Replies first: they complete work that already waits.
        for net in [Network::Reply, Network::Request] {
            if !nets.includes(net) {
                continue;
            }
            for k in 0..n {
                let src = (start + k) % n;
                let Some(ring) = &self.inc[src][net as usize] else {
                    continue;
                };
                // An empty ring is passed over without touching its lock:
                // an empty poll makes no read-modify-write at all.
                if !ring.unread() {
                    continue;
                }
                let Ok(mut c) = ring.consumer.try_lock() else {
                    continue;
                };
                let before = handled;
                while handled < budget {
                    let frame = c.try_peek().map_err(|e| unusable(src, net, &e))?;
                    let Some(frame) = frame else { break };
                    match frame.tag() {
                        0 => deliver(Arrival {
                            src,
                            net,
                            bytes: frame.payload(),
                            lent: None,
                            lendable: None,
                        }),
                        tag @ (NOTE_TAG | RETURN_TAG) => {
                            let lent = if tag == NOTE_TAG {
                                self.lend_block(src, net, frame.payload())
                            } else {
                                self.lend_returned(src, frame.payload())
                            }
                            .map_err(|e| unusable(src, net, &e))?;
                            deliver(Arrival {
                                src,
                                net,
                                bytes: &[],
                                lent: Some(lent),
                                lendable: None,
                            });
                        }
                        tag => {
                            return Err(unusable(src, net, &format!("a frame with tag {tag}")));
                        }
                    }
                    frame.release();
                    handled += 1;
                }
                if handled > before {
                    // Hand the room back now: a sender may be waiting.
                    c.publish();
                }
            }
        }
        Ok(handled)
    }

    fn ready(&self) -> bool {
        self.inc.iter().flatten().flatten().any(Incoming::unread)
    }

    fn frames_taken(&self) -> u64 {
        self.out
            .iter()
            .flatten()
            .flatten()
            .map(|o| o.lock().unwrap().taken)
            .sum()
    }

    fn park(&self, timeout: Option<Duration>) {
        self.park_until(timeout, &|| false);
    }

    fn unpark(&self) {
        self.unpark_token.store(true, Ordering::Release);
        self.ring_doorbell(self.here);
    }
}
