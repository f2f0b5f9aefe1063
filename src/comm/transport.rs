//! The `Transport` trait: how frames move between locales.
//!
//! A transport moves opaque frames (byte strings up to
//! [`Transport::max_frame`]) from one locale to another, on one of two
//! networks, in order per (source, destination, network). It knows
//! nothing of handlers, replies or tasks: the active-message layer above
//! (`remote/`) gives frames their meaning, and [`CommDriver`](super::driver)
//! plugs the transport into the scheduler's driver seam
//! (`sched/driver/README.md`), so whichever worker polls the driver polls
//! the transport.
//!
//! Two transports implement it: shared memory between processes on one
//! machine (`shm/`, the embedded default), and MPI, whose calls are made
//! by an MPI thread or, inline, by the threads that send and poll, under
//! a try-lock (`mpi/README.md`). The trait is shaped so that both fit:
//! `try_send` never blocks and may only queue the frame (for that thread,
//! or for the lock's holder); `poll` may only drain what was already
//! received (and, inline, make a pass first); `park`/`unpark` let the
//! last idle worker sleep until the transport has something.
//!
//! Two networks, after Berkeley UPC's shared-memory active messages (seed
//! 003, "Pthreads or Processes", section 4.3.2): requests and replies
//! travel apart, and a sender that finds no room *polls* instead of
//! waiting, so two locales that flood each other with requests still
//! drain each other's queues. A sender blocked on a *reply* polls only the
//! reply network: handling new requests then would only create more
//! replies to send.

use crate::error::{Error, ErrorKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

/// One of the two networks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub(crate) enum Network {
    /// Requests: frames that may create work (and replies) at the target.
    Request = 0,
    /// Replies (and other frames that never cause a send at the target).
    Reply = 1,
}

impl Network {
    /// Both networks, requests first.
    pub(crate) const ALL: [Network; 2] = [Network::Request, Network::Reply];
}

/// Which networks a poll drains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Nets {
    /// Requests and replies: ordinary progress.
    Both,
    /// Replies only: the poller is itself blocked sending a reply.
    Replies,
}

impl Nets {
    /// Whether `net` is drained by this poll.
    #[inline]
    pub(crate) fn includes(self, net: Network) -> bool {
        self == Nets::Both || net == Network::Reply
    }
}

/// Why a frame was not sent.
#[derive(Debug)]
pub(crate) enum SendError {
    /// No room now. Poll (see the module docs for which networks), then
    /// try again; the frame was not sent and nothing was lost.
    Full,
    /// The frame is longer than [`Transport::eager_frame`], and the memory
    /// that carries such frames to the destination has no room now (on
    /// shared memory, the pair's rendezvous area, whose blocks their
    /// receiver may keep for as long as it reads them). Nothing was sent.
    /// Poll and try again as for `Full`, or send the frame in pieces of
    /// at most `eager_frame` bytes, which need none of that memory: a
    /// sender never waits on what a receiver keeps.
    NoLargeRoom,
    /// The frame can never be sent: it is larger than `max_frame`, the
    /// destination does not exist, or it is gone. The error says which.
    Failed(Error),
}

/// Room a transport reserved for one frame ([`Transport::stage`]): its
/// bytes from the frame's first, written by the sender before it sends
/// the frame. Dropped, the room goes back to the transport, unless the
/// frame was sent from it.
pub(crate) type Staged = Box<dyn StagedFrame>;

/// What [`Staged`] room can do.
pub(crate) trait StagedFrame: Send + Sync {
    /// The room's first byte: the frame's.
    fn as_mut_ptr(&self) -> *mut u8;

    /// The room's length in bytes.
    fn len(&self) -> usize;

    /// Makes the room `len` bytes long, keeping its first bytes, if the
    /// transport can (false, the room unchanged, if not).
    fn resize(&mut self, len: usize) -> bool;
}

/// A frame handed to `poll`'s callback: where it came from, on which
/// network, and its bytes: borrowed for the callback only, or lent until
/// the receiver lets them go.
pub(crate) struct Arrival<'a> {
    /// The sending locale.
    pub(crate) src: usize,
    /// The network it travelled on.
    #[allow(dead_code)] // the shm transport's frames say it themselves
    pub(crate) net: Network,
    /// The frame as sent, valid only during the callback (empty when the
    /// frame is `lent`).
    pub(crate) bytes: &'a [u8],
    /// The frame as sent, when the transport lends it past the callback
    /// (a block of shared memory, `shm/README.md`, "Rendezvous"; the
    /// buffer MPI received a large frame into, `mpi/README.md`,
    /// "Messages"): the receiver may keep it (its request's arguments,
    /// its reply) and read it in place; the memory is freed when it is
    /// dropped.
    pub(crate) lent: Option<Lent>,
    /// A frame the transport can lend on request where it did not lend
    /// it already ([`Lendable::lend`]): a short frame of a batch that MPI
    /// received, the batch's buffer shared by the frames lent from it
    /// (`mpi/README.md`, "Messages", 7). Lending one keeps its whole batch,
    /// so the transport offers it only for a frame that is a large enough
    /// share of that batch; the receiver takes it where it keeps the frame
    /// anyway (a Chant message waiting in its mailbox), instead of copying
    /// it out of `bytes`. Once lent, `bytes` is not read again.
    pub(crate) lendable: Option<Lendable<'a>>,
}

/// A frame its transport lends on request ([`Arrival::lendable`]).
pub(crate) struct Lendable<'a> {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    owner: &'a std::sync::Arc<dyn TakeBack>,
}

impl<'a> Lendable<'a> {
    /// The `len` bytes at `ptr`, lent on request with `owner` keeping them
    /// alive.
    ///
    /// # Safety
    ///
    /// As [`Lent::new`]'s, from the moment [`lend`](Self::lend) is called:
    /// the bytes stay valid while `owner` lives, and once lent nobody but
    /// the receiver reads or writes them (the transport reads them only
    /// before, to hand them on); `ptr` may be written through.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) unsafe fn new(
        ptr: std::ptr::NonNull<u8>,
        len: usize,
        owner: &'a std::sync::Arc<dyn TakeBack>,
    ) -> Lendable<'a> {
        Lendable { ptr, len, owner }
    }

    /// Lends the frame past the callback: held until the `Lent` is
    /// dropped. The caller reads the arrival's `bytes` no more.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn lend(self) -> Lent {
        // SAFETY: `new`'s contract: the bytes stay valid while `owner`
        // lives (the `Lent` holds a clone of it), and from now on only the
        // `Lent`'s holder reads or writes them; the token is unused by such
        // owners (their memory goes when the last holder does).
        unsafe { Lent::new(self.ptr, self.len, self.owner.clone(), 0) }
    }
}

/// Where a transport takes back the memory of a frame it lent
/// ([`Lent`]).
pub(crate) trait TakeBack: Send + Sync {
    /// The receiver is done with the lent frame `token`: no read of it
    /// follows.
    fn take_back(&self, token: usize);
}

/// Bytes of an arrived frame that the transport lends past the poll that
/// delivered them: they stay valid and unchanged until this is dropped,
/// from any thread, which hands their memory back to the transport
/// ([`TakeBack`]; the transport's memory stays alive as long as this does,
/// since it holds the owner), or hands back the buffer they lie in (a message
/// received into a buffer of its own, [`Lent::recycled`]).
pub(crate) struct Lent {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    keep: Keep,
}

/// What a [`Lent`] keeps alive, and lets go when dropped.
enum Keep {
    /// Memory of the transport, handed back as `token`.
    Transport {
        owner: std::sync::Arc<dyn TakeBack>,
        token: usize,
    },
    /// A buffer of this process (its heap block does not move when the
    /// `Vec` does), handed to the function when the `Lent` goes (a
    /// transport's spare blocks, `Lent::recycled`).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    Buffer(Vec<u8>, fn(Vec<u8>)),
}

// SAFETY: a `Lent` gives shared reads of bytes that nobody else writes
// while it lives (the contract of `Lent::new`); writes through
// `as_mut_ptr` are its holders' own, made where one alone reads (its
// caller's contract); and its drop calls `TakeBack::take_back`, which is
// `Send + Sync`; so it may move to and be shared by any thread.
unsafe impl Send for Lent {}
// SAFETY: as for Send: `&Lent` reads only (writes go through a raw
// pointer, under its caller's own exclusion).
unsafe impl Sync for Lent {}

impl Lent {
    /// Lends the `len` bytes at `ptr`, handed back to `owner` as `token`
    /// when dropped.
    ///
    /// # Safety
    ///
    /// The bytes stay readable and writable by the receiver, and nobody
    /// else reads or writes them, until `owner`'s `take_back(token)` is
    /// called (which only this value's drop does), as long as `owner`
    /// lives; `ptr` may be written through (it is not made from a shared
    /// borrow).
    pub(crate) unsafe fn new(
        ptr: std::ptr::NonNull<u8>,
        len: usize,
        owner: std::sync::Arc<dyn TakeBack>,
        token: usize,
    ) -> Lent {
        Lent {
            ptr,
            len,
            keep: Keep::Transport { owner, token },
        }
    }

    /// Lends `buffer[range]` (a frame received into a buffer of its own),
    /// handing the buffer to `give_back` when dropped (a transport keeping
    /// its blocks for later messages; `drop` frees it), from whichever
    /// thread drops it.
    ///
    /// # Panics
    ///
    /// If `range` does not lie in `buffer`.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn recycled(
        mut buffer: Vec<u8>,
        range: std::ops::Range<usize>,
        give_back: fn(Vec<u8>),
    ) -> Lent {
        let len = buffer[range.clone()].len();
        // From the vector's own pointer, not a shared borrow of it, so the
        // receiver may write the bytes where it alone holds them
        // (`as_mut_ptr`).
        let ptr = std::ptr::NonNull::new(buffer.as_mut_ptr().wrapping_add(range.start))
            .expect("a vector's bytes are never at null");
        Lent {
            ptr,
            len,
            keep: Keep::Buffer(buffer, give_back),
        }
    }
}

impl Lent {
    /// The token it goes back to `owner` with, if `owner` lent it.
    pub(crate) fn token_from(&self, owner: &std::sync::Arc<dyn TakeBack>) -> Option<usize> {
        match &self.keep {
            // By address alone: two `Arc<dyn _>` of one value may carry
            // different vtables.
            Keep::Transport { owner: o, token } => {
                std::ptr::addr_eq(std::sync::Arc::as_ptr(o), std::sync::Arc::as_ptr(owner))
                    .then_some(*token)
            }
            Keep::Buffer(..) => None,
        }
    }

    /// Lets it go without handing its memory back: the transport has
    /// passed the memory on (a block returned to its sender,
    /// [`Transport::try_send_returning`]).
    pub(crate) fn hand_over(self) {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is never used or dropped again, so `keep` is read
        // out once and dropped here (its `Arc` or buffer freed, without
        // the take-back that `Lent`'s own drop would make).
        drop(unsafe { std::ptr::read(&me.keep) });
    }

    /// The bytes' address, from which their receiver may write them where
    /// it alone reads them (a `Bulk` received in place,
    /// `remote/bulk.rs`): the transport neither reads nor writes a lent
    /// frame's bytes until it is handed back (for shared memory, the
    /// sender's area is mapped writable in every locale; for a buffer, it
    /// is this process's own).
    pub(crate) fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl std::ops::Deref for Lent {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: for `new`, its contract: the bytes stay valid and
        // unwritten until the drop below, and the owner (held here) keeps
        // their memory alive; for `recycled`, they lie in the heap block of
        // the vector held here, which nothing writes, resizes or frees
        // while it is held (moving a `Vec` does not move its block).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        match &mut self.keep {
            Keep::Transport { owner, token } => owner.take_back(*token),
            // The bytes are not read after this (`self` is going): the
            // block may be reused.
            Keep::Buffer(buffer, give_back) => give_back(std::mem::take(buffer)),
        }
    }
}

impl std::fmt::Debug for Lent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lent({} bytes)", self.len)
    }
}

/// A message its receiver expects straight into a place of its choosing
/// ([`Transport::expect_landing`]): not a frame, not counted, not in the
/// order of any network; its sender learned `key` from the receiver (in a
/// request) and sends it with [`Transport::try_send_landing`].
pub(crate) struct Landing {
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) src: usize,
    /// What its sender names it by.
    pub(crate) key: u32,
    /// What the transport names it by.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) id: u32,
    state: Arc<AtomicU8>,
}

/// How the receiver of a landing's message knows it
/// ([`Transport::try_send_landing`]).
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) enum LandingKey {
    /// It expects it under this key, which it picked
    /// ([`Transport::expect_landing`]).
    Expected(u32),
    /// Its sender picked this key ([`Transport::claim_key`]); the
    /// receiver claims the message once a request names it
    /// ([`Transport::claim_landing`]).
    Claimed(u32),
}

/// A [`Landing`]'s state: waiting for its message.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) const LANDING_WAITING: u8 = 0;
/// Its message was received into its place, whole.
pub(crate) const LANDED: u8 = 1;
/// A message came for it with another length: dropped, its place
/// untouched.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) const LANDING_REFUSED: u8 = 2;

impl Landing {
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn new(src: usize, key: u32, id: u32, state: Arc<AtomicU8>) -> Landing {
        Landing {
            src,
            key,
            id,
            state,
        }
    }

    /// [`LANDING_WAITING`], [`LANDED`] or [`LANDING_REFUSED`] (Acquire:
    /// once it reads `LANDED`, the place holds the message).
    pub(crate) fn state(&self) -> u8 {
        self.state.load(Ordering::Acquire)
    }
}

/// Moves frames between the locales of one job.
///
/// Contract:
/// - **Order**: frames from one source to one destination on one network
///   arrive in the order `try_send` accepted them; nothing is duplicated
///   or lost while both locales live.
/// - **Never blocks**: `try_send` returns `Full` rather than waiting; any
///   thread of the locale may call it, concurrently.
/// - **One poller**: `poll` is never called by two threads at once (the
///   driver's poll token, or a caller's own lock, ensures it).
/// - **Visibility**: a frame accepted by `try_send` is seen by a `ready`
///   or `poll` at the destination that starts after the destination was
///   woken for it (`try_send` wakes a parked destination itself).
pub(crate) trait Transport: Send + Sync + 'static {
    /// This locale's index, `0..locales()`.
    fn here(&self) -> usize;

    /// The number of locales in the job.
    fn locales(&self) -> usize;

    /// The largest frame `try_send` accepts for every destination, in
    /// bytes: the size long transfers are cut to where a piece must fit
    /// whichever way it goes (the global address space's pieces over
    /// messages).
    fn max_frame(&self) -> usize;

    /// The largest frame `try_send` accepts for `dest`: at least
    /// [`max_frame`](Self::max_frame), more where the way to `dest`
    /// carries a large frame whole (over MPI, as a message of its own:
    /// `comm/mpi/README.md`, Messages 2). The engine cuts only messages
    /// larger than this into fragments, which the receiver copies back
    /// together.
    fn max_frame_to(&self, _dest: usize) -> usize {
        self.max_frame()
    }

    /// The largest frame that never needs the memory of
    /// [`SendError::NoLargeRoom`] (on shared memory, a ring frame): a
    /// sender told `NoLargeRoom` can always go on in frames of this size.
    fn eager_frame(&self) -> usize {
        self.max_frame()
    }

    /// Sends the concatenation of `parts` to `dest` on `net` as one frame.
    fn try_send(&self, dest: usize, net: Network, parts: &[&[u8]]) -> Result<(), SendError>;

    /// Sends the frame made of `parts` as [`try_send`](Self::try_send)
    /// does, but may read `parts` after it returns instead of copying them
    /// first (MPI, for a frame sent alone as a message of its own): then it
    /// returns the flag it sets (Release) once it is done with them, and
    /// the caller waits for it, polling (the frame may wait queued until
    /// that wait's first poll, to leave with the frames offered after it).
    /// `None`: the parts were copied.
    ///
    /// # Safety
    ///
    /// Where it returns `Some(done)`, every byte of `parts` stays valid,
    /// unmoved and unwritten until `done` reads true (Acquire).
    unsafe fn try_send_borrowed(
        &self,
        dest: usize,
        net: Network,
        parts: &[&[u8]],
    ) -> Result<Option<std::sync::Arc<std::sync::atomic::AtomicBool>>, SendError> {
        self.try_send(dest, net, parts).map(|()| None)
    }

    /// [`try_send`](Self::try_send), but the transport may hold the
    /// frame back, to send it together with the frames its sender offers
    /// next (a Chant window's sends, `chant::window`): it leaves at the
    /// latest at the next [`flush`](Self::flush), or once enough are held
    /// to fill a batch, or with any pass that sends what is queued. Order
    /// is `try_send`'s. By default, `try_send` itself.
    fn try_send_held(&self, dest: usize, net: Network, parts: &[&[u8]]) -> Result<(), SendError> {
        self.try_send(dest, net, parts)
    }

    /// Sends every frame [`try_send_held`](Self::try_send_held) held back
    /// (as `try_send` would have sent each). By default, nothing to do.
    fn flush(&self) {}

    /// Sends to `dest` on `net` the frame `head`, `lent[array]`, `tail`
    /// without copying the array: where `lent` is a frame this transport
    /// lent from `dest`'s memory (on shared memory, a rendezvous block
    /// `dest` sent) and the rest fits around the array inside it, the
    /// transport writes `head` and `tail` there and hands the whole block
    /// back to `dest`, which receives the frame in place (lent to it, as
    /// any large frame). Counted, ordered and refused like
    /// [`try_send`](Self::try_send)'s frames. Otherwise (another transport,
    /// no room around the array, the ring full) nothing is sent and
    /// `lent` comes back, unchanged but for bytes outside `array`; the
    /// caller then sends the frame as any other. By default, it always
    /// comes back.
    ///
    /// The caller gives `lent` up by value: no other holder reads or
    /// writes it (a `Lent` is never cloned), and `array` lies in it.
    fn try_send_returning(
        &self,
        _dest: usize,
        _net: Network,
        _head: &[&[u8]],
        lent: Lent,
        _array: std::ops::Range<usize>,
        _tail: &[&[u8]],
    ) -> Result<(), Lent> {
        Err(lent)
    }

    /// Reserves room for a frame to `dest` of at least `need` bytes, and
    /// up to `want` if the transport takes frames that long, which its
    /// sender writes in place (its encoding, straight into the memory the
    /// frame is sent from) and then sends as any frame, with the staged
    /// bytes among its parts *where they lie* in the room: the transport
    /// copies the other parts around them and nothing else. On shared
    /// memory a rendezvous block (`comm/shm/README.md`, "Rendezvous",
    /// rule S): `None` unless `need` is more than a ring frame and no more
    /// than a block, and the pair's area has room.
    /// Dropped unsent, the room is given back. By default, `None`.
    fn stage(&self, _dest: usize, _need: usize, _want: usize) -> Option<Staged> {
        None
    }

    /// Whether [`try_send_borrowed`](Self::try_send_borrowed) sends a
    /// `len`-byte frame to `dest` from its parts (its sender then waits
    /// until the transport is done with them) rather than copying it.
    fn sends_borrowed(&self, _dest: usize, _len: usize) -> bool {
        false
    }

    /// Expects one message of `len` bytes from `src`, to be received
    /// straight into `place` (no buffer of the transport's, no copy out of
    /// one): its key goes to `src` in a request, whose handler sends the
    /// bytes with [`try_send_landing`](Self::try_send_landing). `None`
    /// where the transport has no such path to `src` (then frames carry
    /// the bytes), or no key is free.
    ///
    /// # Safety
    ///
    /// `place` stays valid for writes of `len` bytes, which nothing else
    /// reads or writes, until the landing's state leaves
    /// `LANDING_WAITING` or [`withdraw_landing`](Self::withdraw_landing)
    /// returned.
    unsafe fn expect_landing(&self, _src: usize, _place: *mut u8, _len: usize) -> Option<Landing> {
        None
    }

    /// Withdraws `landing`: on return nothing writes its place any more
    /// (its message may have landed meanwhile: its state says so). A
    /// message that comes for it later is dropped, with a note.
    fn withdraw_landing(&self, _landing: &Landing) {}

    /// A key to send a landing's message to `dest` under, before the
    /// request that names it ([`LandingKey::Claimed`]); `None` where the
    /// transport has no landings to `dest` or no key is free. Held until
    /// [`release_claim_key`](Self::release_claim_key).
    fn claim_key(&self, _dest: usize) -> Option<u32> {
        None
    }

    /// Frees a key of [`claim_key`](Self::claim_key) once the request that
    /// named it was answered (its message was claimed or refused).
    fn release_claim_key(&self, _dest: usize, _key: u32) {}

    /// Claims the message `src` sent (or sends) under claimed `key`, into
    /// `len` bytes at `place`: it lands there, whether it came before or
    /// comes after; the landing's state says when. `None` where the
    /// transport has no landings from `src`.
    ///
    /// # Safety
    ///
    /// As [`expect_landing`](Self::expect_landing)'s, until the state
    /// leaves `LANDING_WAITING` (a claim is not withdrawn).
    unsafe fn claim_landing(
        &self,
        _src: usize,
        _key: u32,
        _place: *mut u8,
        _len: usize,
    ) -> Option<Landing> {
        None
    }

    /// Refuses the message `src` sent (or sends) under claimed `key`: it
    /// is dropped (its request failed).
    fn refuse_landing(&self, _src: usize, _key: u32) {}

    /// Sends the concatenation of `parts` to `dest` as the message of
    /// landing `key`, from where the parts lie, as
    /// [`try_send_borrowed`](Self::try_send_borrowed) does: the caller
    /// waits for the flag it returns. Outside the networks' order and
    /// credit (its receiver has the place ready, or parks the message
    /// until its request claims it).
    ///
    /// # Safety
    ///
    /// As `try_send_borrowed`'s, for the flag returned.
    unsafe fn try_send_landing(
        &self,
        dest: usize,
        _key: LandingKey,
        _parts: &[&[u8]],
    ) -> Result<Arc<std::sync::atomic::AtomicBool>, SendError> {
        Err(SendError::Failed(Error::new(
            ErrorKind::Locale,
            format!("cantus: no landing path to locale {dest} (only MPI has one)"),
        )))
    }

    /// Hands up to `budget` arrived frames, from the networks in `nets`,
    /// to `deliver`, in arrival order per source and network. Returns how
    /// many it handed over. A malformed frame at this level (a corrupt
    /// ring) is an `Err` naming the source: the job cannot go on.
    fn poll(
        &self,
        nets: Nets,
        budget: usize,
        deliver: &mut dyn FnMut(Arrival<'_>),
    ) -> Result<usize, Error>;

    /// Whether `poll(Nets::Both, ..)` would find a frame now (cheap).
    fn ready(&self) -> bool;

    /// Whether a thread of this process beside the workers moves the
    /// frames (an MPI thread), which may share a core with them: a task
    /// that waits by spinning must give the core away (`sched_yield`)
    /// between its checks, or that thread cannot move its frame.
    fn has_progress_thread(&self) -> bool {
        false
    }

    /// A hint that frames are expected from other locales at any moment
    /// (a balanced computation runs: requests for work may come while
    /// every thread here computes): `true` raises a count, `false` lowers
    /// it. While it is above zero, a transport whose progress thread
    /// sleeps when idle keeps it awake (yielding instead), so an arrival
    /// is not held up by a sleep. The default does nothing.
    fn expect_arrivals(&self, _on: bool) {}

    /// Hands the transport a way to poll the driver from a thread of its
    /// own (the MPI transport's helper in its inline mode, when no worker
    /// polls). Called once, after the runtime started; the default
    /// ignores it.
    fn attach_poller(&self, _poller: crate::sched::driver::DriverPoller) {}

    /// Frames `try_send` has taken so far, to every destination on both
    /// networks: a count that only grows (termination detection's
    /// messages sent, counted where sending is serialized anyway, so that
    /// a send pays no shared counter of its own).
    fn frames_taken(&self) -> u64;

    /// Blocks the calling thread until a frame may have arrived, `unpark`
    /// was called (before or during the park: a token), or `timeout`
    /// passed.
    fn park(&self, timeout: Option<Duration>);

    /// Ends the current or next `park` of this locale.
    fn unpark(&self);
}
