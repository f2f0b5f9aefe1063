//! `<qthread/qalloc.h>`: Qthreads' persistent allocator. A *map* is a
//! file mapped into memory (`mmap`, `MAP_SHARED`), whose allocator state
//! lives in the file itself, so a program can allocate in it, store data
//! (pointers into the map included), `qalloc_checkpoint`, exit, and a
//! later run loads the file again (`qalloc_loadmap`, or a `make*map` of
//! the existing file) with its blocks and free space as they were.
//!
//! A map is mapped again at the address where it was first mapped (the
//! address is in the file), so pointers stored in it stay valid; if that
//! address is taken, the load fails (NULL) rather than relocate (Qthreads
//! aborts the program). Loads use `MAP_FIXED_NOREPLACE`, so the same file
//! cannot be mapped twice at once in one process either.
//!
//! File layout (native 64-bit words): word 0 a magic, then the version,
//! the kind, the base address, the file size, the item size (static) or
//! granule (dynamic), the stream count, the offset of the data area, the
//! number of items or granules, the static map's high-water mark; then a
//! word per stream; a dynamic map then has its use bitmap; the data area
//! starts on a 64-byte boundary.
//!
//! - **Static maps** hold items of one size (rounded up to 8 bytes, as
//!   each free item holds the offset of the next). Each stream is a free
//!   list (its head in the stream's word); items never handed out are
//!   taken from the high-water mark, so making a map costs nothing per
//!   item. A thread allocates from its stream, then the unused tail,
//!   then the other streams; it frees into its stream.
//! - **Dynamic maps** hand out runs of 64-byte granules, tracked by the
//!   bitmap; a block starts with a 16-byte header (its length and a tag
//!   derived from its place, cleared when it is freed, so a double free
//!   or a foreign pointer is refused). Each stream's word is where its
//!   next search for free granules starts (spread over the map at
//!   creation), so threads of different streams allocate in different
//!   areas; the bitmap is under one lock.
//!
//! A thread's stream is its shepherd's number in a task, else a number
//! given to the thread, modulo the map's streams (Qthreads uses
//! `pthread_self() % streams`). The locks are the process's, not in the
//! file: one process uses a map at a time. No runtime is needed.

use crate::ffi::error::{self, Fail, boundary_void};
use std::ffi::{CStr, c_char, c_void};
use std::fs::{File, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::boundary_ptr;

/// `mapinfo_t`: a static map's handle, as C names it (a `Map`).
pub struct StatMap {
    _opaque: [u8; 0],
}

/// `dynmapinfo_t`: a dynamic map's handle, as C names it (a `Map`).
pub struct DynMap {
    _opaque: [u8; 0],
}

/// Word 0 of every map file.
const MAGIC: u64 = u64::from_le_bytes(*b"cantusQA");
/// The layout's version (word 1).
const VERSION: u64 = 1;
/// The kind (word 2) of a static map.
const STATIC: u64 = 1;
/// The kind of a dynamic map.
const DYNAMIC: u64 = 2;
/// Header words before the per-stream words.
const FIXED_WORDS: usize = 10;
/// Word indices of the header fields.
const W_BASE: usize = 3;
const W_SIZE: usize = 4;
const W_ITEM: usize = 5;
const W_STREAMS: usize = 6;
const W_DATA: usize = 7;
const W_COUNT: usize = 8;
const W_BUMP: usize = 9;
/// A dynamic map's unit of allocation.
const GRANULE: usize = 64;
/// A dynamic block's header: its granule count and its tag.
const BLOCK_HEADER: usize = 16;
/// The tag of a live dynamic block is this, xor its first granule.
const TAG: u64 = 0x7161_6c6c_6f63_2121;
/// The most streams a map may have.
const MAX_STREAMS: usize = 4096;

/// A mapped map file.
struct Map {
    /// Where the file is mapped.
    base: usize,
    /// The file's (and the mapping's) length.
    size: usize,
    /// `STATIC` or `DYNAMIC`.
    kind: u64,
    /// Static: bytes per item; dynamic: `GRANULE`.
    item: usize,
    /// The number of streams.
    streams: usize,
    /// Offset of the data area.
    data: usize,
    /// Items (static) or granules (dynamic) in the data area.
    count: usize,
    /// Static: a lock per stream's free list.
    stream_locks: Box<[Mutex<()>]>,
    /// Static: the high-water mark; dynamic: the bitmap and the streams'
    /// search starts.
    tail: Mutex<()>,
}

/// Locks `m` (it guards no Rust data: a poisoned lock is just a lock).
fn lock(m: &Mutex<()>) -> MutexGuard<'_, ()> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Map {
    /// Word `i` of the file.
    fn word(&self, i: usize) -> *mut u64 {
        (self.base + i * 8) as *mut u64
    }

    /// Reads word `i`.
    fn get(&self, i: usize) -> u64 {
        debug_assert!((i + 1) * 8 <= self.data);
        // SAFETY: header words lie inside the mapping (below `data`),
        // 8-aligned (the mapping is page-aligned); callers hold the lock
        // that guards the word.
        unsafe { self.word(i).read() }
    }

    /// Writes word `i`.
    fn set(&self, i: usize, v: u64) {
        debug_assert!((i + 1) * 8 <= self.data);
        // SAFETY: as for `get`.
        unsafe { self.word(i).write(v) }
    }

    /// The stream of the calling thread.
    fn stream(&self) -> usize {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local! {
            static THREAD: usize = NEXT.fetch_add(1, Ordering::Relaxed);
        }
        let n = crate::query::current_worker().unwrap_or_else(|| THREAD.with(|t| *t));
        n % self.streams
    }

    /// The word of the bitmap holding granule `g`'s bit.
    fn bitmap_word(&self, g: usize) -> usize {
        FIXED_WORDS + self.streams + g / 64
    }

    /// Whether granule `g` is in use (the bitmap lock held).
    fn used(&self, g: usize) -> bool {
        self.get(self.bitmap_word(g)) & (1 << (g % 64)) != 0
    }

    /// Marks granules `from..from + n` used or free (the lock held).
    fn mark(&self, from: usize, n: usize, used: bool) {
        for g in from..from + n {
            let w = self.bitmap_word(g);
            let bit = 1 << (g % 64);
            let v = self.get(w);
            self.set(w, if used { v | bit } else { v & !bit });
        }
    }

    /// The first run of `n` free granules that starts in `from..to`.
    fn find_run(&self, from: usize, to: usize, n: usize) -> Option<usize> {
        let (mut g, mut start, mut run) = (from, from, 0);
        while g < self.count {
            if run == 0 && g >= to {
                return None;
            }
            if run == 0 && g % 64 == 0 && self.get(self.bitmap_word(g)) == u64::MAX {
                g += 64;
                continue;
            }
            if self.used(g) {
                run = 0;
            } else {
                if run == 0 {
                    start = g;
                }
                run += 1;
                if run == n {
                    return Some(start);
                }
            }
            g += 1;
        }
        None
    }

    /// Whether `off` is the offset of a static item handed out so far.
    fn is_item(&self, off: usize) -> bool {
        let handed_out = {
            let _t = lock(&self.tail);
            self.get(W_BUMP) as usize
        };
        off >= self.data
            && (off - self.data) % self.item == 0
            && (off - self.data) / self.item < handed_out
    }

    /// A static item, or `None` if the map is full.
    fn stat_alloc(&self) -> Option<usize> {
        let me = self.stream();
        for k in 0..self.streams {
            let s = (me + k) % self.streams;
            {
                let _g = lock(&self.stream_locks[s]);
                let head = self.get(FIXED_WORDS + s) as usize;
                if head != 0 && !self.is_item(head) {
                    // The list was overwritten (a freed item written to,
                    // or a damaged file): drop it rather than follow it
                    // out of the data area.
                    self.set(FIXED_WORDS + s, 0);
                } else if head != 0 {
                    let item = self.base + head;
                    // SAFETY: `head` is an item of the data area (checked
                    // just above), at least 8 bytes and 8-aligned.
                    let next = unsafe { (item as *const u64).read() };
                    self.set(FIXED_WORDS + s, next);
                    return Some(item);
                }
            }
            if k == 0 {
                let _t = lock(&self.tail);
                let mark = self.get(W_BUMP) as usize;
                if mark < self.count {
                    self.set(W_BUMP, mark as u64 + 1);
                    return Some(self.base + self.data + mark * self.item);
                }
            }
        }
        None
    }

    /// Returns the static item at `block` to the caller's stream.
    fn stat_free(&self, call: &str, block: usize) -> Result<(), Fail> {
        if block < self.base || !self.is_item(block - self.base) {
            return Err(Fail::new(
                error::EINVAL,
                format!("{call}: {block:#x} is not an item of this static map"),
            ));
        }
        let s = self.stream();
        let _g = lock(&self.stream_locks[s]);
        // SAFETY: `block` is an item of the data area (checked above), at
        // least 8 bytes and 8-aligned; the caller gives it back.
        unsafe { (block as *mut u64).write(self.get(FIXED_WORDS + s)) };
        self.set(FIXED_WORDS + s, (block - self.base) as u64);
        Ok(())
    }

    /// A dynamic block of at least `size` bytes, or `None` if no run of
    /// free granules is long enough.
    fn dyn_alloc(&self, size: usize) -> Option<usize> {
        let n = size.max(1).checked_add(BLOCK_HEADER)?.div_ceil(GRANULE);
        if n > self.count {
            return None;
        }
        let s = self.stream();
        let _t = lock(&self.tail);
        let rover = (self.get(FIXED_WORDS + s) as usize).min(self.count - 1);
        let g = self
            .find_run(rover, self.count, n)
            .or_else(|| self.find_run(0, rover, n))?;
        self.mark(g, n, true);
        self.set(FIXED_WORDS + s, ((g + n) % self.count) as u64);
        let at = self.base + self.data + g * GRANULE;
        // SAFETY: granules g..g+n lie in the data area, now ours; the
        // header is two aligned words at their start.
        unsafe {
            (at as *mut u64).write(n as u64);
            (at as *mut u64).add(1).write(TAG ^ g as u64);
        }
        Some(at + BLOCK_HEADER)
    }

    /// Returns the dynamic block at `block` to the map.
    fn dyn_free(&self, call: &str, block: usize) -> Result<(), Fail> {
        let bad = || {
            Fail::new(
                error::EINVAL,
                format!("{call}: {block:#x} is not a live block of this dynamic map"),
            )
        };
        let at = block.wrapping_sub(BLOCK_HEADER);
        let off = at.wrapping_sub(self.base + self.data);
        if block < self.base + self.data + BLOCK_HEADER
            || off % GRANULE != 0
            || off / GRANULE >= self.count
        {
            return Err(bad());
        }
        let g = off / GRANULE;
        let _t = lock(&self.tail);
        // SAFETY: granule g lies in the data area (checked above); its
        // first two words are its header if it starts a block.
        let (n, tag) = unsafe { ((at as *const u64).read(), (at as *const u64).add(1).read()) };
        let n = n as usize;
        if tag != TAG ^ g as u64
            || n == 0
            || n > self.count - g
            || !(g..g + n).all(|i| self.used(i))
        {
            return Err(bad());
        }
        // SAFETY: as above; clearing the tag makes a second free fail.
        unsafe { (at as *mut u64).add(1).write(0) };
        self.mark(g, n, false);
        Ok(())
    }

    /// Writes the map to its file (`msync`).
    fn sync(&self) -> Result<(), Fail> {
        // SAFETY: base..base+size is this map's mapping.
        let r = unsafe { libc::msync(self.base as *mut c_void, self.size, libc::MS_SYNC) };
        if r != 0 {
            return Err(Fail::new(
                error::EOS,
                format!(
                    "qalloc_checkpoint: msync: {}",
                    std::io::Error::last_os_error()
                ),
            ));
        }
        Ok(())
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: base..base+size was mapped for this Map and nothing
        // refers to it once the last Arc is gone.
        unsafe { libc::munmap(self.base as *mut c_void, self.size) };
    }
}

/// Every map this process has loaded and not cleaned up; a handle is the
/// address of its `Map`.
static MAPS: Mutex<Vec<Arc<Map>>> = Mutex::new(Vec::new());

/// The registry of maps.
fn maps() -> MutexGuard<'static, Vec<Arc<Map>>> {
    // Pushes and drains only: a poisoned registry is still consistent.
    MAPS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The loaded map behind `handle` (of kind `kind`, if given).
fn find(call: &str, handle: *const c_void, kind: Option<u64>) -> Result<Arc<Map>, Fail> {
    if handle.is_null() {
        return Err(Fail::null(call, "map"));
    }
    let map = maps()
        .iter()
        .find(|m| Arc::as_ptr(m).cast() == handle)
        .cloned()
        .ok_or_else(|| {
            Fail::new(
                error::EINVAL,
                format!("{call}: {handle:p} is not a loaded map (cleaned up?)"),
            )
        })?;
    if kind.is_some_and(|k| k != map.kind) {
        return Err(Fail::new(
            error::EINVAL,
            format!("{call}: the map is of the other kind (static/dynamic)"),
        ));
    }
    Ok(map)
}

/// What a map file's layout must hold: data offset and item count for
/// `size` bytes, `streams` streams and `item`-byte items (static) or
/// granules (dynamic).
fn layout(kind: u64, size: usize, item: usize, streams: usize) -> (usize, usize) {
    let meta = (FIXED_WORDS + streams) * 8;
    if kind == STATIC {
        let data = meta.next_multiple_of(64);
        return (data, size.saturating_sub(data) / item);
    }
    let mut g = size.saturating_sub(meta.next_multiple_of(64)) * 8 / (GRANULE * 8 + 1);
    loop {
        let data = (meta + g.div_ceil(64) * 8).next_multiple_of(64);
        if data + g * GRANULE <= size || g == 0 {
            return (data, g);
        }
        g -= 1;
    }
}

/// An OS error of `call` as a failure.
fn os(call: &str, what: &str, e: std::io::Error) -> Fail {
    Fail::new(error::EOS, format!("{call}: {what}: {e}"))
}

/// What a make or load call asks for.
struct Want {
    /// `STATIC` or `DYNAMIC`; `None` to take the file's (`loadmap`).
    kind: Option<u64>,
    /// The file's size (a new file is made this long).
    size: i64,
    /// Where to map it (NULL: anywhere for a new file, its own address
    /// for an existing one).
    addr: *mut c_void,
    /// The static item size asked for (0 for dynamic maps and loads).
    item: usize,
    /// The streams asked for (a new file's; an existing file keeps its).
    streams: usize,
}

/// Opens or creates the map file `filename` and maps it; returns the
/// handle.
fn open_map(call: &str, filename: *const c_char, want: Want) -> Result<*mut c_void, Fail> {
    if filename.is_null() {
        return Err(Fail::null(call, "filename"));
    }
    // SAFETY: a non-null filename is a NUL-terminated string per the
    // header's contract.
    let name = unsafe { CStr::from_ptr(filename) };
    let path = std::path::Path::new(std::ffi::OsStr::from_bytes(name.to_bytes()));
    let file: File = OpenOptions::new()
        .read(true)
        .write(true)
        .create(want.kind.is_some())
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|e| os(call, &format!("open {}", path.display()), e))?;
    let len = file.metadata().map_err(|e| os(call, "fstat", e))?.len();
    let fresh = len == 0;
    let mut hdr = [0u64; FIXED_WORDS];
    let (kind, size, mut addr, item, streams);
    if fresh {
        let Some(k) = want.kind else {
            return Err(Fail::new(
                error::EINVAL,
                format!("{call}: {} is empty", path.display()),
            ));
        };
        if want.streams == 0 || want.streams > MAX_STREAMS {
            return Err(Fail::new(
                error::EINVAL,
                format!("{call}: {} streams (1 to {MAX_STREAMS})", want.streams),
            ));
        }
        if want.size <= 0 || usize::try_from(want.size).is_err() {
            return Err(Fail::new(
                error::EINVAL,
                format!("{call}: file size {}", want.size),
            ));
        }
        (kind, size, addr, streams) = (k, want.size as usize, want.addr as usize, want.streams);
        item = if k == STATIC {
            want.item.max(8).next_multiple_of(8)
        } else {
            GRANULE
        };
        if k == STATIC && want.item == 0 {
            return Err(Fail::new(error::EINVAL, format!("{call}: item size 0")));
        }
        file.set_len(size as u64)
            .map_err(|e| os(call, "setting the file's size", e))?;
    } else {
        let mut bytes = [0u8; FIXED_WORDS * 8];
        if len < bytes.len() as u64 {
            return Err(Fail::new(
                error::EINVAL,
                format!(
                    "{call}: {} is not a qalloc map file (too short)",
                    path.display()
                ),
            ));
        }
        file.read_exact_at(&mut bytes, 0)
            .map_err(|e| os(call, &format!("reading {}'s header", path.display()), e))?;
        for (w, b) in hdr.iter_mut().zip(bytes.chunks_exact(8)) {
            *w = u64::from_ne_bytes(b.try_into().expect("8 bytes"));
        }
        let foreign =
            |why: String| Fail::new(error::EINVAL, format!("{call}: {} {why}", path.display()));
        if hdr[0] != MAGIC || hdr[1] != VERSION || !(hdr[2] == STATIC || hdr[2] == DYNAMIC) {
            return Err(foreign("is not a qalloc map file of this version".into()));
        }
        (kind, size, item, streams) = (
            hdr[2],
            hdr[W_SIZE] as usize,
            hdr[W_ITEM] as usize,
            hdr[W_STREAMS] as usize,
        );
        addr = hdr[W_BASE] as usize;
        if hdr[W_SIZE] != len || want.kind.is_some() && want.size as u64 != len {
            return Err(foreign(format!(
                "is {len} bytes, its header says {}, the call {}",
                hdr[W_SIZE], want.size
            )));
        }
        if want.kind.is_some_and(|k| k != kind) {
            return Err(foreign(
                "is a map of the other kind (static/dynamic)".into(),
            ));
        }
        if kind == STATIC && want.kind.is_some() && want.item.max(8).next_multiple_of(8) != item {
            return Err(foreign(format!(
                "holds items of {item} bytes, not {}",
                want.item
            )));
        }
        if !want.addr.is_null() && want.addr as usize != addr {
            return Err(foreign(format!(
                "was made at {addr:#x}, not {:p}",
                want.addr
            )));
        }
        let (data, count) = layout(kind, size, item, streams);
        if streams == 0
            || streams > MAX_STREAMS
            || item == 0
            || (kind == DYNAMIC && item != GRANULE)
            || hdr[W_DATA] as usize != data
            || hdr[W_COUNT] as usize != count
        {
            return Err(foreign("has a damaged header".into()));
        }
    }
    let (data, count) = layout(kind, size, item, streams);
    if count == 0 {
        return Err(Fail::new(
            error::EINVAL,
            format!("{call}: {size} bytes hold no item after the map's header"),
        ));
    }
    let flags = libc::MAP_SHARED
        | if addr != 0 {
            libc::MAP_FIXED_NOREPLACE
        } else {
            0
        };
    // SAFETY: maps `size` bytes of the open file; MAP_FIXED_NOREPLACE
    // never replaces an existing mapping.
    let base = unsafe {
        libc::mmap(
            addr as *mut c_void,
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            file.as_raw_fd(),
            0,
        )
    };
    if base == libc::MAP_FAILED {
        let e = std::io::Error::last_os_error();
        return Err(os(call, &format!("mmap at {addr:#x}"), e));
    }
    let map = Arc::new(Map {
        base: base as usize,
        size,
        kind,
        item,
        streams,
        data,
        count,
        stream_locks: (0..streams).map(|_| Mutex::new(())).collect(),
        tail: Mutex::new(()),
    });
    if addr != 0 && base as usize != addr {
        // An old kernel took MAP_FIXED_NOREPLACE as a hint: the map is
        // elsewhere, and pointers stored in it would be wrong. `map`
        // unmaps it as it drops.
        return Err(Fail::new(
            error::EOS,
            format!("{call}: the address {addr:#x} is taken"),
        ));
    }
    if fresh {
        addr = base as usize;
        let words = [
            MAGIC,
            VERSION,
            kind,
            addr as u64,
            size as u64,
            item as u64,
            streams as u64,
            data as u64,
            count as u64,
            0,
        ];
        for (i, w) in words.into_iter().enumerate() {
            map.set(i, w);
        }
        for s in 0..streams {
            // Static: empty free lists; dynamic: searches spread out.
            let start = if kind == STATIC {
                0
            } else {
                s * count / streams
            };
            map.set(FIXED_WORDS + s, start as u64);
        }
        // The bitmap is zero: a new file reads as zeros.
        map.sync()?;
    }
    let handle = Arc::as_ptr(&map).cast_mut().cast();
    maps().push(map);
    Ok(handle)
}

/// qalloc_makestatmap: loads the static map in `filename`, or makes one
/// of `filesize` bytes (for items of `itemsize` bytes, `streams` free
/// lists) if the file is empty or new. `addr`: where to map a new file
/// (NULL: anywhere), or the address an existing one must have. NULL on
/// failure (with `cantus_last_error`): a file of another size or kind,
/// items of another size, its address taken, an OS error.
///
/// # Safety
/// `filename` is NULL or a NUL-terminated string; `addr` is NULL or an
/// address range the program does not use otherwise.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qalloc_makestatmap(
    filesize: i64,
    addr: *mut c_void,
    filename: *const c_char,
    itemsize: usize,
    streams: usize,
) -> *mut c_void {
    let call = "qalloc_makestatmap";
    boundary_ptr(call, || {
        open_map(
            call,
            filename,
            Want {
                kind: Some(STATIC),
                size: filesize,
                addr,
                item: itemsize,
                streams,
            },
        )
    })
}

/// qalloc_makedynmap: as `qalloc_makestatmap` for a dynamic map (blocks
/// of any size).
///
/// # Safety
/// As for `qalloc_makestatmap`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qalloc_makedynmap(
    filesize: i64,
    addr: *mut c_void,
    filename: *const c_char,
    streams: usize,
) -> *mut c_void {
    let call = "qalloc_makedynmap";
    boundary_ptr(call, || {
        open_map(
            call,
            filename,
            Want {
                kind: Some(DYNAMIC),
                size: filesize,
                addr,
                item: 0,
                streams,
            },
        )
    })
}

/// qalloc_loadmap: loads an existing map file of either kind, with the
/// size, kind, item size and streams its header records, at its address.
///
/// # Safety
/// `filename` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qalloc_loadmap(filename: *const c_char) -> *mut c_void {
    let call = "qalloc_loadmap";
    boundary_ptr(call, || {
        open_map(
            call,
            filename,
            Want {
                kind: None,
                size: 0,
                addr: std::ptr::null_mut(),
                item: 0,
                streams: 1,
            },
        )
    })
}

/// qalloc_checkpoint: writes every loaded map to its file (`msync`).
#[unsafe(no_mangle)]
pub extern "C" fn qalloc_checkpoint() {
    boundary_void("qalloc_checkpoint", || {
        let all: Vec<Arc<Map>> = maps().clone();
        all.iter().try_for_each(|m| m.sync())
    })
}

/// qalloc_cleanup: checkpoints, then unmaps every loaded map; their
/// handles and blocks are invalid afterwards (the files keep them).
#[unsafe(no_mangle)]
pub extern "C" fn qalloc_cleanup() {
    boundary_void("qalloc_cleanup", || {
        let all = std::mem::take(&mut *maps());
        // Each map unmaps as its last Arc drops (a call in flight on
        // another thread holds one until it returns).
        all.iter().try_for_each(|m| m.sync())
    })
}

/// The static map behind `map` and an item of it.
fn stat_malloc(call: &str, map: *const c_void) -> Result<*mut c_void, Fail> {
    let m = find(call, map, Some(STATIC))?;
    m.stat_alloc()
        .map(|a| a as *mut c_void)
        .ok_or_else(|| Fail::new(error::EOS, format!("{call}: the static map is full")))
}

/// A block of `size` bytes of the dynamic map behind `map`.
fn dyn_malloc(call: &str, map: *const c_void, size: usize) -> Result<*mut c_void, Fail> {
    let m = find(call, map, Some(DYNAMIC))?;
    m.dyn_alloc(size).map(|a| a as *mut c_void).ok_or_else(|| {
        Fail::new(
            error::EOS,
            format!("{call}: no {size} free bytes in one run in the dynamic map"),
        )
    })
}

/// qalloc_statmalloc: an item of the static map `map` (of the map's item
/// size, 8-byte aligned); NULL if it is full or `map` is not a loaded
/// static map.
#[unsafe(no_mangle)]
pub extern "C" fn qalloc_statmalloc(map: *mut StatMap) -> *mut c_void {
    let call = "qalloc_statmalloc";
    boundary_ptr(call, || stat_malloc(call, map.cast()))
}

/// qalloc_dynmalloc: a block of at least `size` bytes (16-byte aligned)
/// of the dynamic map `map`; NULL if no run of free space is long enough
/// or `map` is not a loaded dynamic map.
#[unsafe(no_mangle)]
pub extern "C" fn qalloc_dynmalloc(map: *mut DynMap, size: usize) -> *mut c_void {
    let call = "qalloc_dynmalloc";
    boundary_ptr(call, || dyn_malloc(call, map.cast(), size))
}

/// qalloc_malloc: `qalloc_statmalloc` (`size` ignored) or
/// `qalloc_dynmalloc`, by the kind of `map`.
#[unsafe(no_mangle)]
pub extern "C" fn qalloc_malloc(map: *mut c_void, size: usize) -> *mut c_void {
    let call = "qalloc_malloc";
    boundary_ptr(call, || {
        if find(call, map, None)?.kind == STATIC {
            stat_malloc(call, map)
        } else {
            dyn_malloc(call, map, size)
        }
    })
}

/// Frees `block` into `map` (of `kind`, if given).
fn free_into(call: &str, block: *mut c_void, map: *const c_void, kind: Option<u64>) {
    boundary_void(call, || {
        if block.is_null() {
            return Err(Fail::null(call, "block"));
        }
        let m = find(call, map, kind)?;
        if m.kind == STATIC {
            m.stat_free(call, block as usize)
        } else {
            m.dyn_free(call, block as usize)
        }
    })
}

/// qalloc_statfree: returns `block`, an item of the static map `map`, to
/// it. Misuse (NULL, a pointer that is not an item handed out by the map,
/// a map that is not a loaded static map) is reported on stderr and in
/// `cantus_last_error` and ignored.
///
/// # Safety
/// `block` is NULL, or not in the map, or an item of it not in use after
/// this call (freeing an item twice is undefined).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qalloc_statfree(block: *mut c_void, map: *mut StatMap) {
    free_into("qalloc_statfree", block, map.cast(), Some(STATIC));
}

/// qalloc_dynfree: returns `block` of the dynamic map `map` to it. Misuse
/// (NULL, a pointer that is not a live block of the map, a double free,
/// a map that is not a loaded dynamic map) is reported and ignored.
///
/// # Safety
/// `block` is not used after this call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qalloc_dynfree(block: *mut c_void, map: *mut DynMap) {
    free_into("qalloc_dynfree", block, map.cast(), Some(DYNAMIC));
}

/// qalloc_free: `qalloc_statfree` or `qalloc_dynfree` by the kind of
/// `map`.
///
/// # Safety
/// As for those.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qalloc_free(block: *mut c_void, map: *mut c_void) {
    free_into("qalloc_free", block, map, None);
}
