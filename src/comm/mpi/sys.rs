//! The MPI calls the transport makes, over rsmpi's raw bindings
//! (`mpi::ffi`): each returns a cantus error carrying MPI's own error
//! string. Only the thread that holds the MPI state calls them (the MPI
//! thread, `progress.rs`, or the holder of the inline mode's lock,
//! `inline.rs`), except [`abort`], the last resort of a fatal error.
//!
//! Our communicator's error handler is `MPI_ERRORS_RETURN`, so errors on
//! it come back as codes instead of aborting inside MPI.

use crate::error::{Error, ErrorKind};
use mpi::ffi;
use std::os::raw::{c_char, c_int, c_void};

use ffi::MPI_Datatype;
pub(super) use ffi::{MPI_Comm, MPI_Message, MPI_Request, MPI_Status};

/// MPI's text for error `code`.
pub(super) fn error_text(code: c_int) -> String {
    let mut buf = vec![0 as c_char; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: `buf` holds MPI_MAX_ERROR_STRING characters and more, as
    // MPI_Error_string requires; `len` is a valid out-parameter. It may be
    // called at any time, even before MPI_Init.
    let rc = unsafe { ffi::MPI_Error_string(code, buf.as_mut_ptr(), &mut len) };
    if rc != ffi::MPI_SUCCESS as c_int {
        return format!("MPI error code {code}");
    }
    let bytes: Vec<u8> = buf[..len.clamp(0, buf.len() as c_int) as usize]
        .iter()
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `Ok` for `MPI_SUCCESS`, else an error naming the call and MPI's text.
pub(super) fn check(rc: c_int, call: &str) -> Result<(), Error> {
    if rc == ffi::MPI_SUCCESS as c_int {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::Locale,
            format!("cantus: {call} failed: {}", error_text(rc)),
        ))
    }
}

/// `MPI_THREAD_*` levels, in order.
pub(super) fn thread_level_name(level: c_int) -> &'static str {
    // SAFETY: reading constants rsmpi's C shim defines; never written.
    let (single, funneled, serialized, multiple) = unsafe {
        (
            ffi::RSMPI_THREAD_SINGLE,
            ffi::RSMPI_THREAD_FUNNELED,
            ffi::RSMPI_THREAD_SERIALIZED,
            ffi::RSMPI_THREAD_MULTIPLE,
        )
    };
    match level {
        l if l == single => "MPI_THREAD_SINGLE",
        l if l == funneled => "MPI_THREAD_FUNNELED",
        l if l == serialized => "MPI_THREAD_SERIALIZED",
        l if l == multiple => "MPI_THREAD_MULTIPLE",
        _ => "an unknown thread level",
    }
}

/// `MPI_THREAD_FUNNELED` and `MPI_THREAD_MULTIPLE`.
pub(super) fn funneled_and_multiple() -> (c_int, c_int) {
    // SAFETY: constants of rsmpi's C shim.
    unsafe { (ffi::RSMPI_THREAD_FUNNELED, ffi::RSMPI_THREAD_MULTIPLE) }
}

/// `MPI_THREAD_SERIALIZED`.
pub(super) fn serialized() -> c_int {
    // SAFETY: a constant of rsmpi's C shim.
    unsafe { ffi::RSMPI_THREAD_SERIALIZED }
}

/// Whether MPI was initialized, and whether it was finalized.
pub(super) fn init_state() -> Result<(bool, bool), Error> {
    let (mut init, mut fin) = (0, 0);
    // SAFETY: both may be called at any time, from any thread; the
    // out-parameters are valid.
    unsafe {
        check(ffi::MPI_Initialized(&mut init), "MPI_Initialized")?;
        check(ffi::MPI_Finalized(&mut fin), "MPI_Finalized")?;
    }
    Ok((init != 0, fin != 0))
}

/// `MPI_Init_thread` asking for `required`; returns the level provided.
pub(super) fn init_thread(required: c_int) -> Result<c_int, Error> {
    let mut provided: c_int = 0;
    // SAFETY: MPI allows null argc/argv; called once per process, before
    // any other MPI call but the ones above (the caller checked that MPI
    // was not initialized).
    let rc = unsafe {
        ffi::MPI_Init_thread(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            required,
            &mut provided,
        )
    };
    check(rc, "MPI_Init_thread")?;
    Ok(provided)
}

/// The thread level of an MPI that someone else initialized.
pub(super) fn query_thread() -> Result<c_int, Error> {
    let mut provided: c_int = 0;
    // SAFETY: MPI is initialized (checked by the caller); valid out-param.
    let rc = unsafe { ffi::MPI_Query_thread(&mut provided) };
    check(rc, "MPI_Query_thread")?;
    Ok(provided)
}

/// `MPI_COMM_WORLD`.
pub(super) fn world() -> MPI_Comm {
    // SAFETY: a constant handle of rsmpi's C shim.
    unsafe { ffi::RSMPI_COMM_WORLD }
}

/// A duplicate of `comm` whose errors return codes instead of aborting.
pub(super) fn dup_returning_errors(comm: MPI_Comm) -> Result<MPI_Comm, Error> {
    let mut new = std::mem::MaybeUninit::<MPI_Comm>::uninit();
    // SAFETY: `comm` is a valid communicator; `new` is written by MPI on
    // success before we read it.
    let new = unsafe {
        check(ffi::MPI_Comm_dup(comm, new.as_mut_ptr()), "MPI_Comm_dup")?;
        new.assume_init()
    };
    // SAFETY: `new` is the valid communicator just made; the handler is a
    // constant of rsmpi's shim.
    let rc = unsafe { ffi::MPI_Comm_set_errhandler(new, ffi::RSMPI_ERRORS_RETURN) };
    check(rc, "MPI_Comm_set_errhandler")?;
    Ok(new)
}

/// This process's rank in `comm`, and the size of `comm`.
pub(super) fn rank_and_size(comm: MPI_Comm) -> Result<(usize, usize), Error> {
    let (mut rank, mut size) = (0, 0);
    // SAFETY: a valid communicator and valid out-parameters.
    unsafe {
        check(ffi::MPI_Comm_rank(comm, &mut rank), "MPI_Comm_rank")?;
        check(ffi::MPI_Comm_size(comm, &mut size), "MPI_Comm_size")?;
    }
    Ok((rank as usize, size as usize))
}

/// The processes of `comm` on this process's node, as a communicator
/// of their own (`MPI_Comm_split_type`, `MPI_COMM_TYPE_SHARED`; ranked
/// as in `comm`). Free it with [`free`].
pub(super) fn split_node(comm: MPI_Comm) -> Result<MPI_Comm, Error> {
    let mut node = std::mem::MaybeUninit::<MPI_Comm>::uninit();
    // SAFETY: a valid communicator; constants of rsmpi's shim; `node` is
    // written on success before we read it.
    unsafe {
        check(
            ffi::MPI_Comm_split_type(
                comm,
                ffi::RSMPI_COMM_TYPE_SHARED,
                0,
                ffi::RSMPI_INFO_NULL,
                node.as_mut_ptr(),
            ),
            "MPI_Comm_split_type",
        )?;
        Ok(node.assume_init())
    }
}

/// The processes of `comm` that passed the same `color`, ranked by `key`
/// (`MPI_Comm_split`). Free it with [`free`].
pub(super) fn split(comm: MPI_Comm, color: usize, key: usize) -> Result<MPI_Comm, Error> {
    let mut part = std::mem::MaybeUninit::<MPI_Comm>::uninit();
    // SAFETY: a valid communicator; `part` is written on success before
    // we read it.
    unsafe {
        check(
            ffi::MPI_Comm_split(comm, color as c_int, key as c_int, part.as_mut_ptr()),
            "MPI_Comm_split",
        )?;
        Ok(part.assume_init())
    }
}

/// Every process's `values` (each the same length), concatenated in rank
/// order, on every process of `comm` (`MPI_Allgather` of u64s).
pub(super) fn all_gather(values: &[u64], comm: MPI_Comm) -> Result<Vec<u64>, Error> {
    let (_, size) = rank_and_size(comm)?;
    let mut all = vec![0u64; values.len() * size];
    // SAFETY: the send buffer holds `values.len()` u64s and the receive
    // buffer that many per process of `comm`; constants of rsmpi's shim.
    unsafe {
        check(
            ffi::MPI_Allgather(
                values.as_ptr().cast::<c_void>(),
                values.len() as c_int,
                ffi::RSMPI_UINT64_T,
                all.as_mut_ptr().cast::<c_void>(),
                values.len() as c_int,
                ffi::RSMPI_UINT64_T,
                comm,
            ),
            "MPI_Allgather",
        )?;
    }
    Ok(all)
}

/// Rank 0's `values`, into `values` on every process of `comm`
/// (`MPI_Bcast` of u64s; every process passes the same length).
pub(super) fn broadcast(values: &mut [u64], comm: MPI_Comm) -> Result<(), Error> {
    // SAFETY: a buffer of `values.len()` u64s, valid for the call; a
    // valid communicator; constants of rsmpi's shim.
    unsafe {
        check(
            ffi::MPI_Bcast(
                values.as_mut_ptr().cast::<c_void>(),
                values.len() as c_int,
                ffi::RSMPI_UINT64_T,
                0,
                comm,
            ),
            "MPI_Bcast",
        )
    }
}

/// Frees a communicator made by [`dup_returning_errors`], [`split_node`]
/// or [`split`].
pub(super) fn free(comm: &mut MPI_Comm) -> Result<(), Error> {
    // SAFETY: `comm` is a communicator we made, with no pending request
    // (the caller completed every one), freed once.
    check(unsafe { ffi::MPI_Comm_free(comm) }, "MPI_Comm_free")
}

/// `MPI_Finalize`.
pub(super) fn finalize() -> Result<(), Error> {
    // SAFETY: called once, after every request completed and our
    // communicator was freed, by the thread that initialized MPI (the MPI
    // thread; inline, the thread that finishes the runtime, which is the
    // one that started it unless a program drops its runtime on another
    // thread: the MPI standard asks for the initializing thread, and
    // Open MPI does not check it).
    check(unsafe { ffi::MPI_Finalize() }, "MPI_Finalize")
}

/// Starts sending `buf` to `dest` with `tag`; the buffer must stay put
/// and unchanged until the request completes.
///
/// # Safety
///
/// `buf` must not be moved, freed or written until [`test_some`] reports
/// the returned request complete.
pub(super) unsafe fn isend(
    buf: &[u8],
    dest: usize,
    tag: c_int,
    comm: MPI_Comm,
) -> Result<MPI_Request, Error> {
    let mut req = std::mem::MaybeUninit::<MPI_Request>::uninit();
    // SAFETY: `buf` is valid for `buf.len()` bytes and, by the caller's
    // contract, stays so until the request completes; the count fits an
    // int (frames and batches are far below 2 GiB, checked by the caller);
    // the datatype is a constant of rsmpi's shim; `req` is written on
    // success before we read it.
    unsafe {
        check(
            ffi::MPI_Isend(
                buf.as_ptr().cast::<c_void>(),
                buf.len() as c_int,
                ffi::RSMPI_UINT8_T,
                dest as c_int,
                tag,
                comm,
                req.as_mut_ptr(),
            ),
            "MPI_Isend",
        )?;
        Ok(req.assume_init())
    }
}

/// Starts sending the concatenation of `parts` (each a start address and
/// a length, in order) to `dest` with `tag`, as one message read where the
/// parts lie (an MPI datatype of their places, relative to the first): the
/// receiver sees the same bytes as from [`isend`] of their concatenation.
///
/// # Safety
///
/// Every part must stay valid, unmoved and unwritten until [`test_some`]
/// reports the returned request complete; `parts` is not empty and its
/// lengths add up to less than 2 GiB.
pub(super) unsafe fn isend_parts(
    parts: &[(usize, usize)],
    dest: usize,
    tag: c_int,
    comm: MPI_Comm,
) -> Result<MPI_Request, Error> {
    let base = parts[0].0;
    let lengths: Vec<c_int> = parts.iter().map(|&(_, len)| len as c_int).collect();
    let places: Vec<ffi::MPI_Aint> = parts
        .iter()
        .map(|&(at, _)| at.wrapping_sub(base) as ffi::MPI_Aint)
        .collect();
    let mut datatype = std::mem::MaybeUninit::<MPI_Datatype>::uninit();
    let mut req = std::mem::MaybeUninit::<MPI_Request>::uninit();
    // SAFETY: the lengths and places are arrays of `parts.len()` entries
    // (an int's worth: frames are far below 2 GiB), the base type a
    // constant of rsmpi's shim, `datatype` written on success before it is
    // committed, used and freed (freeing a datatype a pending send uses is
    // allowed: MPI frees it once the send is done). The parts, at `base`
    // plus their places, stay valid until the request completes (the
    // caller's contract); `req` is written on success before we read it.
    unsafe {
        check(
            ffi::MPI_Type_create_hindexed(
                parts.len() as c_int,
                lengths.as_ptr(),
                places.as_ptr(),
                ffi::RSMPI_UINT8_T,
                datatype.as_mut_ptr(),
            ),
            "MPI_Type_create_hindexed",
        )?;
        let mut datatype = datatype.assume_init();
        check(ffi::MPI_Type_commit(&mut datatype), "MPI_Type_commit")?;
        let sent = check(
            ffi::MPI_Isend(
                base as *const c_void,
                1,
                datatype,
                dest as c_int,
                tag,
                comm,
                req.as_mut_ptr(),
            ),
            "MPI_Isend",
        );
        check(ffi::MPI_Type_free(&mut datatype), "MPI_Type_free")?;
        sent?;
        Ok(req.assume_init())
    }
}

/// Starts an all-gather of `send` into `recv` (`send.len()` bytes from
/// each process of `comm`, in rank order).
///
/// # Safety
///
/// `send` and `recv` must not be moved, freed or touched until [`test`]
/// reports the request complete; `recv` holds `send.len()` bytes per
/// process of `comm`.
pub(super) unsafe fn iall_gather(
    send: &[u8],
    recv: &mut [u8],
    comm: MPI_Comm,
) -> Result<MPI_Request, Error> {
    let mut req = std::mem::MaybeUninit::<MPI_Request>::uninit();
    // SAFETY: both buffers are valid for their lengths and, by the
    // caller's contract, stay so until the request completes (`recv` has
    // room for every process's part); the counts fit an int (the
    // collectives' records and values, checked by the caller); `req` is
    // written on success before we read it.
    unsafe {
        check(
            ffi::MPI_Iallgather(
                send.as_ptr().cast::<c_void>(),
                send.len() as c_int,
                ffi::RSMPI_UINT8_T,
                recv.as_mut_ptr().cast::<c_void>(),
                send.len() as c_int,
                ffi::RSMPI_UINT8_T,
                comm,
                req.as_mut_ptr(),
            ),
            "MPI_Iallgather",
        )?;
        Ok(req.assume_init())
    }
}

/// The arrays an all-to-all was started with. MPI reads them until the
/// operation completes (MPI 3.1, 5.12: a non-blocking collective's
/// arrays are not to be changed before it completes; Open MPI 4.1 reads
/// the type arrays again at completion), so they live with the request.
pub(super) struct ExchangeArgs {
    send_counts: Vec<c_int>,
    send_displs: Vec<c_int>,
    send_types: Vec<MPI_Datatype>,
    recv_counts: Vec<c_int>,
    recv_displs: Vec<c_int>,
    recv_types: Vec<MPI_Datatype>,
    /// The receive types made for this operation, freed once it is done.
    made: Vec<MPI_Datatype>,
}

impl ExchangeArgs {
    /// Frees the types made for the operation; call once it completed.
    pub(super) fn free(&mut self) {
        for mut t in self.made.drain(..) {
            // SAFETY: a type `iall_to_all` created and committed, freed
            // once (drained), after the operation that used it completed.
            unsafe { ffi::MPI_Type_free(&mut t) };
        }
    }
}

/// Starts an exchange between every pair of processes of `comm`
/// (`MPI_Ialltoallw`): the `send[p]` bytes go to process `p`, and process
/// `p`'s part lands in `recv[p]`. Every part is reached through a datatype
/// of its own that names its address relative to the first part's, so
/// that no part is copied into a staging buffer, nor received into one.
///
/// # Safety
///
/// Every `send` part must stay valid and unchanged, and every `recv`
/// allocation and the [`ExchangeArgs`] returned with the request must not
/// be moved (their heap arrays), freed or touched, until [`test`] reports
/// the request complete (then [`ExchangeArgs::free`]); `recv[p].1` is the
/// length process `p` sends this one; every length fits an int (checked
/// by the caller).
pub(super) unsafe fn iall_to_all(
    send: &[(*const u8, usize)],
    recv: &[(*mut u8, usize)],
    comm: MPI_Comm,
) -> Result<(MPI_Request, ExchangeArgs), Error> {
    let n = send.len();
    assert!(recv.len() == n && n > 0, "a part each way per process");
    // SAFETY: a constant MPI handle, set before main and never written.
    let byte = unsafe { ffi::RSMPI_UINT8_T };
    let mut args = ExchangeArgs {
        send_counts: vec![0; n],
        send_displs: vec![0; n],
        send_types: vec![byte; n],
        recv_counts: vec![0; n],
        recv_displs: vec![0; n],
        recv_types: vec![byte; n],
        made: Vec::with_capacity(2 * n),
    };
    // Neither buffer may be an empty part's dangling pointer: 0x1 is
    // Open MPI's MPI_IN_PLACE. The types are relative to the first part
    // that holds bytes.
    static NOTHING: u8 = 0;
    let nothing = (&raw const NOTHING).cast_mut();
    let send_base = send
        .iter()
        .find(|s| s.1 > 0)
        .map_or(nothing, |s| s.0.cast_mut());
    let recv_base = recv.iter().find(|r| r.1 > 0).map_or(nothing, |r| r.0);
    let recv_parts: Vec<(*const u8, usize)> =
        recv.iter().map(|r| (r.0.cast_const(), r.1)).collect();
    for (side, parts, base) in [(0, send, send_base), (1, &recv_parts[..], recv_base)] {
        for (p, &(ptr, len)) in parts.iter().enumerate() {
            if len == 0 {
                continue;
            }
            let t = match part_type(ptr, len, base, byte) {
                Ok(t) => t,
                Err(e) => {
                    args.free();
                    return Err(e);
                }
            };
            args.made.push(t);
            let (counts, types) = if side == 0 {
                (&mut args.send_counts, &mut args.send_types)
            } else {
                (&mut args.recv_counts, &mut args.recv_types)
            };
            types[p] = t;
            counts[p] = 1;
        }
    }
    let mut req = std::mem::MaybeUninit::<MPI_Request>::uninit();
    // SAFETY: the arrays hold one entry per process of `comm` and stay
    // put with the request (the caller's contract); each type covers
    // exactly its part, at its address relative to its side's base, and
    // the parts stay valid until the request completes; `req` is written
    // on success before we read it.
    let r = unsafe {
        check(
            ffi::MPI_Ialltoallw(
                send_base.cast::<c_void>(),
                args.send_counts.as_ptr(),
                args.send_displs.as_ptr(),
                args.send_types.as_ptr(),
                recv_base.cast::<c_void>(),
                args.recv_counts.as_ptr(),
                args.recv_displs.as_ptr(),
                args.recv_types.as_ptr(),
                comm,
                req.as_mut_ptr(),
            ),
            "MPI_Ialltoallw",
        )
        // SAFETY: written by the call that just succeeded.
        .map(|()| req.assume_init())
    };
    match r {
        Ok(req) => Ok((req, args)),
        Err(e) => {
            args.free();
            Err(e)
        }
    }
}

/// A committed datatype of the `len` bytes at `ptr`, relative to `base`.
fn part_type(
    ptr: *const u8,
    len: usize,
    base: *mut u8,
    byte: MPI_Datatype,
) -> Result<MPI_Datatype, Error> {
    let block = c_int::try_from(len).map_err(|_| {
        Error::new(
            ErrorKind::Locale,
            format!("an exchange's part of {len} bytes is beyond what one MPI call moves"),
        )
    })?;
    let displacement = (ptr as ffi::MPI_Aint).wrapping_sub(base as ffi::MPI_Aint);
    let mut t = std::mem::MaybeUninit::<MPI_Datatype>::uninit();
    // SAFETY: one block of `len` bytes at a displacement from `base`; `t`
    // is written on success before it is read.
    unsafe {
        check(
            ffi::MPI_Type_create_hindexed(1, &block, &displacement, byte, t.as_mut_ptr()),
            "MPI_Type_create_hindexed",
        )?;
        let mut t = t.assume_init();
        if let Err(e) = check(ffi::MPI_Type_commit(&mut t), "MPI_Type_commit") {
            ffi::MPI_Type_free(&mut t);
            return Err(e);
        }
        Ok(t)
    }
}

/// Starts a broadcast of `buf` from `root` to every process of `comm`.
///
/// # Safety
///
/// `buf` must not be moved, freed or touched until [`test`] reports the
/// request complete.
pub(super) unsafe fn ibroadcast(
    buf: &mut [u8],
    root: usize,
    comm: MPI_Comm,
) -> Result<MPI_Request, Error> {
    let mut req = std::mem::MaybeUninit::<MPI_Request>::uninit();
    // SAFETY: `buf` is valid for its length and, by the caller's
    // contract, stays so until the request completes; the count fits an
    // int (checked by the caller); `req` is written on success first.
    unsafe {
        check(
            ffi::MPI_Ibcast(
                buf.as_mut_ptr().cast::<c_void>(),
                buf.len() as c_int,
                ffi::RSMPI_UINT8_T,
                root as c_int,
                comm,
                req.as_mut_ptr(),
            ),
            "MPI_Ibcast",
        )?;
        Ok(req.assume_init())
    }
}

/// Tests one request: whether it completed (it then becomes
/// `MPI_REQUEST_NULL`).
pub(super) fn test(req: &mut MPI_Request) -> Result<bool, Error> {
    let mut flag: c_int = 0;
    // SAFETY: `req` is a valid (or null) request; the status is ignored
    // (rsmpi's STATUS_IGNORE).
    unsafe {
        check(
            ffi::MPI_Test(req, &mut flag, ffi::RSMPI_STATUS_IGNORE),
            "MPI_Test",
        )?;
    }
    Ok(flag != 0)
}

/// Tests `reqs`; returns the indices of those that completed (their
/// entries become `MPI_REQUEST_NULL`).
pub(super) fn test_some(reqs: &mut [MPI_Request], done: &mut Vec<c_int>) -> Result<(), Error> {
    done.clear();
    if reqs.is_empty() {
        return Ok(());
    }
    done.resize(reqs.len(), 0);
    let mut out: c_int = 0;
    // SAFETY: `reqs` holds valid (or null) requests; `done` has room for
    // as many indices; statuses are ignored (rsmpi's STATUSES_IGNORE).
    unsafe {
        check(
            ffi::MPI_Testsome(
                reqs.len() as c_int,
                reqs.as_mut_ptr(),
                &mut out,
                done.as_mut_ptr(),
                ffi::RSMPI_STATUSES_IGNORE,
            ),
            "MPI_Testsome",
        )?;
    }
    // MPI_UNDEFINED (negative) when no request was active.
    done.truncate(out.max(0) as usize);
    Ok(())
}

/// A message that arrived: who sent it, its tag, its bytes.
pub(super) struct Received {
    pub(super) src: usize,
    pub(super) tag: c_int,
    /// The message is `bytes[start..]` (a large one is received past a
    /// few bytes, to place it: [`receive_probed`]).
    pub(super) bytes: Vec<u8>,
    pub(super) start: usize,
}

/// Messages longer than this are received placed ([`receive_probed`]).
const PLACED_FROM: usize = 64 << 10;

/// A message matched by a probe ([`probe_any`]): received exactly once,
/// by [`receive_probed`] or [`receive_probed_into`].
pub(super) struct Probed {
    msg: MPI_Message,
    pub(super) src: usize,
    pub(super) tag: c_int,
    /// Its length in bytes.
    pub(super) len: usize,
}

// SAFETY: a matched message's handle (a pointer in Open MPI) is only
// passed to MPI by whoever makes the locale's MPI calls (the MPI thread,
// or the holder of the inline pass lock), one at a time; between those
// calls it is plain data, which may move to another thread.
unsafe impl Send for Probed {}

impl super::landing::Probe for Probed {
    fn header(&self) -> (usize, c_int, usize) {
        (self.src, self.tag, self.len)
    }
}

/// Matches one message that arrived on `comm`, if any, from any source
/// with any tag (`MPI_Improbe`): no other receive can take it, and its
/// receiver chooses where it goes knowing its source, tag and length.
pub(super) fn probe_any(comm: MPI_Comm) -> Result<Option<Probed>, Error> {
    let mut flag: c_int = 0;
    let mut msg = std::mem::MaybeUninit::<MPI_Message>::uninit();
    let mut status = std::mem::MaybeUninit::<MPI_Status>::zeroed();
    // SAFETY: valid communicator, constants of rsmpi's shim, valid
    // out-parameters; `msg` and `status` are read only if `flag` says a
    // message matched.
    unsafe {
        check(
            ffi::MPI_Improbe(
                ffi::RSMPI_ANY_SOURCE,
                ffi::RSMPI_ANY_TAG,
                comm,
                &mut flag,
                msg.as_mut_ptr(),
                status.as_mut_ptr(),
            ),
            "MPI_Improbe",
        )?;
    }
    if flag == 0 {
        return Ok(None);
    }
    // SAFETY: written by the matching probe.
    let (msg, status) = unsafe { (msg.assume_init(), status.assume_init()) };
    let mut count: c_int = 0;
    // SAFETY: a status from a matched probe; valid out-parameter.
    unsafe {
        check(
            ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count),
            "MPI_Get_count",
        )?;
    }
    Ok(Some(Probed {
        msg,
        src: status.MPI_SOURCE as usize,
        tag: status.MPI_TAG,
        len: count.max(0) as usize,
    }))
}

/// An empty buffer with room for a `len`-byte message and the offset to
/// receive it at: past a few bytes for one longer than 64 KiB, so that
/// its byte `align_at` lies at a multiple of 64 bytes ([`receive_probed`]).
fn placed_buffer(len: usize, align_at: usize) -> (Vec<u8>, usize) {
    let room = if len > PLACED_FROM { 64 } else { 0 };
    // A spare block if one fits (`spare.rs`): reused warm, not faulted in
    // again.
    let bytes: Vec<u8> = super::spare::buffer(room + len);
    let start = if room > 0 {
        (64 - (bytes.as_ptr() as usize).wrapping_add(align_at) % 64) % 64
    } else {
        0
    };
    (bytes, start)
}

/// Receives the probed message into a new buffer. A message longer than
/// 64 KiB (a frame alone) is received so that its byte `align_at` lies
/// at a multiple of 64 bytes: an array in the frame, padded to 64 bytes
/// from its start, can then be read in place, aligned
/// (`remote/bulk.rs`). The buffer is not filled with zeros first: MPI
/// writes every byte of it.
pub(super) fn receive_probed(probed: Probed, align_at: usize) -> Result<Received, Error> {
    let len = probed.len;
    let (mut bytes, start) = placed_buffer(len, align_at);
    let (src, tag) = (probed.src, probed.tag);
    // SAFETY: `bytes` has room for `start` bytes, zeroed here, and the
    // message's `len` bytes after them, which MPI writes on success (all
    // of them: the length is the probed message's own), before the
    // vector's length covers them.
    unsafe {
        bytes.as_mut_ptr().write_bytes(0, start);
        receive_probed_into(probed, bytes.as_mut_ptr().add(start))?;
        bytes.set_len(start + len);
    }
    Ok(Received {
        src,
        tag,
        start,
        bytes,
    })
}

/// A probed message being received into a buffer of its own
/// (`MPI_Imrecv`, [`start_receive_probed`]), until [`Receiving::test`]
/// says it is there.
pub(super) struct Receiving {
    pub(super) src: usize,
    pub(super) tag: c_int,
    /// Its length in bytes.
    len: usize,
    /// Where the message starts in `bytes`, whose capacity holds it.
    start: usize,
    bytes: Vec<u8>,
    /// `MPI_REQUEST_NULL` once complete.
    req: MPI_Request,
}

// SAFETY: as `Probed`: the request is passed to MPI only by whoever makes
// the locale's MPI calls, one at a time; the buffer it writes is owned
// here and moves with it (moving a Vec does not move its block).
unsafe impl Send for Receiving {}

/// Starts receiving the probed message into a new buffer, placed as
/// [`receive_probed`] places it (`MPI_Imrecv`): returns at once; MPI
/// writes the buffer as the message comes, while the locale's passes go
/// on (a large message's rendezvous needs its sender's progress: a
/// blocking receive would hold the pass until it is all there).
pub(super) fn start_receive_probed(probed: Probed, align_at: usize) -> Result<Receiving, Error> {
    let len = probed.len;
    let (mut bytes, start) = placed_buffer(len, align_at);
    let mut msg = probed.msg;
    // SAFETY: reads an extern static that rsmpi's shim initialized to MPI's
    // constant and nothing writes; MPI_Imrecv below overwrites the copy.
    let mut req: MPI_Request = unsafe { ffi::RSMPI_REQUEST_NULL };
    // SAFETY: `bytes` has room for `start` bytes and the message's `len`
    // after them; its block is not read, written, moved or freed until the
    // request completes (`Receiving::test`; a `Receiving` dropped before
    // leaks its block: `Drop`). `msg` is the matched message, received
    // exactly once (`Probed` is consumed).
    unsafe {
        check(
            ffi::MPI_Imrecv(
                bytes.as_mut_ptr().add(start).cast::<c_void>(),
                len as c_int,
                ffi::RSMPI_UINT8_T,
                &mut msg,
                &mut req,
            ),
            "MPI_Imrecv",
        )?;
    }
    Ok(Receiving {
        src: probed.src,
        tag: probed.tag,
        len,
        start,
        bytes,
        req,
    })
}

impl Receiving {
    /// Whether the message is all there (`MPI_Test`); then
    /// [`take`](Self::take) gives it.
    pub(super) fn test(&mut self) -> Result<bool, Error> {
        if is_null(self.req) {
            return Ok(true);
        }
        test(&mut self.req)
    }

    /// The message's length in bytes.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The message received, once [`test`](Self::test) said so.
    pub(super) fn take(mut self) -> Received {
        assert!(is_null(self.req), "a message taken before it was received");
        let mut bytes = std::mem::take(&mut self.bytes);
        // SAFETY: the request completed: MPI wrote the message's `len`
        // bytes after `start`; the first `start` bytes are zeroed here.
        unsafe {
            bytes.as_mut_ptr().write_bytes(0, self.start);
            bytes.set_len(self.start + self.len);
        }
        Received {
            src: self.src,
            tag: self.tag,
            start: self.start,
            bytes,
        }
    }
}

/// Whether `req` is `MPI_REQUEST_NULL` (a completed request).
fn is_null(req: MPI_Request) -> bool {
    // SAFETY: reads an extern static that rsmpi's shim initialized to MPI's
    // constant and nothing writes.
    req == unsafe { ffi::RSMPI_REQUEST_NULL }
}

impl Drop for Receiving {
    fn drop(&mut self) {
        if !is_null(self.req) {
            // MPI may still write the block: leaked, never freed under it
            // (only on a path that gives up on MPI: a fatal error).
            std::mem::forget(std::mem::take(&mut self.bytes));
        }
    }
}

/// Receives the probed message at `place` (`MPI_Mrecv`), its
/// `probed.len` bytes; returns once they are there.
///
/// # Safety
///
/// `place` is valid for writes of `probed.len` bytes, which nothing else
/// reads or writes meanwhile.
pub(super) unsafe fn receive_probed_into(probed: Probed, place: *mut u8) -> Result<(), Error> {
    let mut msg = probed.msg;
    // SAFETY: `msg` is the matched message, received exactly once here
    // (`Probed` is consumed); `place` holds its `len` bytes (the caller's
    // contract), the count its probed length.
    unsafe {
        check(
            ffi::MPI_Mrecv(
                place.cast::<c_void>(),
                probed.len as c_int,
                ffi::RSMPI_UINT8_T,
                &mut msg,
                ffi::RSMPI_STATUS_IGNORE,
            ),
            "MPI_Mrecv",
        )
    }
}

/// Every process of `comm` sends each one `counts[dest]` and receives
/// theirs: `MPI_Alltoall` of one u64 each (at shutdown).
pub(super) fn all_to_all(counts: &[u64], comm: MPI_Comm) -> Result<Vec<u64>, Error> {
    let mut theirs = vec![0u64; counts.len()];
    // SAFETY: both buffers hold one u64 per process of `comm` (the caller
    // passes `size` entries); constants of rsmpi's shim.
    unsafe {
        check(
            ffi::MPI_Alltoall(
                counts.as_ptr().cast::<c_void>(),
                1,
                ffi::RSMPI_UINT64_T,
                theirs.as_mut_ptr().cast::<c_void>(),
                1,
                ffi::RSMPI_UINT64_T,
                comm,
            ),
            "MPI_Alltoall",
        )?;
    }
    Ok(theirs)
}

/// Rank 0's `value`, on every process of `comm` (`MPI_Bcast` of one
/// u64, as the job starts).
pub(super) fn broadcast_from_0(value: u64, comm: MPI_Comm) -> Result<u64, Error> {
    let mut v = [value];
    broadcast(&mut v, comm)?;
    Ok(v[0])
}

/// Ends every process of the job (`MPI_Abort` on `MPI_COMM_WORLD`).
pub(super) fn abort(code: c_int) -> ! {
    // SAFETY: MPI_Abort may be called with any valid communicator; it does
    // not return when MPI works. (Under MPI_THREAD_FUNNELED only the MPI
    // thread may call MPI; a fatal error on another thread calls this
    // only after the MPI thread did not, as a last resort.)
    unsafe {
        ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, code);
    }
    std::process::abort()
}
