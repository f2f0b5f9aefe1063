//! `<qthread/dictionary.h>`: `qt_dictionary`, Qthreads' concurrent hash
//! map from `void *` keys to `void *` values under the user's equality
//! and hash functions, with a cleanup callback and iterators over its
//! `list_entry` records.
//!
//! Layout: `SHARDS` shards, each a mutex over an ordered map from the
//! *spread* hash (the user's hash through `mix64`, a bijection) to the
//! chain of entries with that hash, linked by `list_entry.next` in
//! insertion order. The shard of a key is the top bits of its spread hash,
//! so the shards in order, each in key order, visit the entries in
//! ascending spread hash: an iterator's place is (spread hash, entry), and
//! it finds its successor again after any concurrent put or delete (an
//! entry deleted under it makes it go on with the next hash). The user's
//! hash function runs outside every lock, the equality function under the
//! key's shard lock (so it must not wait for other tasks), the cleanup
//! function after the entry left the map, outside the lock.

use crate::ffi::error::{self, Fail};
use crate::ffi::lifecycle::require_runtime;
use crossbeam_utils::CachePadded;
use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::ops::Bound;
use std::ptr;
use std::sync::{Mutex, MutexGuard};

use super::hash::mix64;

/// Number of shards (a power of two): 64 independent locks.
const SHARDS: usize = 64;
/// `SHARDS == 1 << SHARD_BITS`.
const SHARD_BITS: u32 = SHARDS.trailing_zeros();

/// Qthreads' `ERROR`: `(void *)-1`, what the iterator calls return for a
/// NULL (or destroyed) iterator or dictionary.
fn error_ptr<T>() -> *mut T {
    usize::MAX as *mut T
}

/// `list_entry`: one key/value pair, as the header lays it out. The map
/// owns it; `next` links the entries whose keys have the same hash.
#[repr(C)]
pub struct ListEntry {
    value: *mut c_void,
    key: *mut c_void,
    /// The user's hash of `key`, widened as C widens an `int` to `uint64_t`.
    hashed_key: u64,
    next: *mut ListEntry,
}

/// `qt_dict_key_equals_f`: 1 if two keys are equal, else 0.
pub type QtDictKeyEqualsF = Option<unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int>;
/// `qt_dict_hash_f`: the hash of a key (equal keys, equal hashes).
pub type QtDictHashF = Option<unsafe extern "C" fn(*mut c_void) -> c_int>;
/// `qt_dict_cleanup_f`: called with (key, value) of an entry that leaves
/// the map (value NULL on `qt_dictionary_delete`, which returns it).
pub type QtDictCleanupF = Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>;

/// One shard: spread hash → first entry of that hash's chain.
struct Shard {
    chains: BTreeMap<u64, *mut ListEntry>,
    entries: usize,
}

// SAFETY: the entries a shard points at are owned by the shard (boxed,
// freed only by the holder of the shard's lock after unlinking them), so
// moving the shard's map between threads moves that ownership with it.
unsafe impl Send for Shard {}

/// `qt_dictionary`.
pub struct QtDictionary {
    eq: unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int,
    hash: unsafe extern "C" fn(*mut c_void) -> c_int,
    cleanup: QtDictCleanupF,
    shards: Box<[CachePadded<Mutex<Shard>>]>,
}

/// Where an iterator stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pos {
    /// Before the first entry (just created).
    Start,
    /// At `entry`, whose key's spread hash is `spread`.
    At { spread: u64, entry: *mut ListEntry },
    /// Past the last entry.
    End,
}

/// `qt_dictionary_iterator`.
pub struct DictIterator {
    dict: *const QtDictionary,
    pos: Pos,
}

/// How a put treats a key that is there already.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Put {
    /// Replace the value (`qt_dictionary_put`).
    Always,
    /// Keep the value (`qt_dictionary_put_if_absent`).
    IfAbsent,
}

impl QtDictionary {
    /// The shard that holds spread hash `spread`.
    fn shard(&self, spread: u64) -> MutexGuard<'_, Shard> {
        self.lock((spread >> (64 - SHARD_BITS)) as usize)
    }

    /// Shard `i`, locked.
    fn lock(&self, i: usize) -> MutexGuard<'_, Shard> {
        // Only user equality functions run under the lock, and they are C
        // (they cannot unwind), so a poisoned lock still holds a whole map.
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The user's hash of `key` (as `hashed_key`) and its spread hash.
    fn hash_of(&self, key: *mut c_void) -> (u64, u64) {
        // SAFETY: the user's hash function, called with a key the user
        // passed (the header's contract: it accepts every key it is given).
        let h = unsafe { (self.hash)(key) };
        let hashed = i64::from(h) as u64;
        (hashed, mix64(hashed))
    }

    /// The entry of `key` in `shard`'s chain for `spread`, if any.
    fn find(&self, shard: &Shard, spread: u64, key: *mut c_void) -> *mut ListEntry {
        let mut e = shard
            .chains
            .get(&spread)
            .copied()
            .unwrap_or(ptr::null_mut());
        while !e.is_null() {
            // SAFETY: `e` is in the chain of a shard whose lock we hold, so
            // it is a live entry; the equality function is the user's.
            unsafe {
                if (self.eq)((*e).key, key) != 0 {
                    return e;
                }
                e = (*e).next;
            }
        }
        ptr::null_mut()
    }

    /// Puts `key` → `value`; the value the key has afterwards.
    fn put(&self, key: *mut c_void, value: *mut c_void, mode: Put) -> *mut c_void {
        let (hashed, spread) = self.hash_of(key);
        let mut shard = self.shard(spread);
        let found = self.find(&shard, spread, key);
        if !found.is_null() {
            // SAFETY: a live entry of the locked shard.
            unsafe {
                if mode == Put::Always {
                    (*found).value = value;
                }
                return (*found).value;
            }
        }
        let new = Box::into_raw(Box::new(ListEntry {
            value,
            key,
            hashed_key: hashed,
            next: ptr::null_mut(),
        }));
        match shard.chains.get(&spread).copied() {
            None => {
                shard.chains.insert(spread, new);
            }
            Some(mut tail) => {
                // SAFETY: live entries of the locked shard.
                unsafe {
                    while !(*tail).next.is_null() {
                        tail = (*tail).next;
                    }
                    (*tail).next = new;
                }
            }
        }
        shard.entries += 1;
        value
    }

    /// The value of `key`, or NULL.
    fn get(&self, key: *mut c_void) -> *mut c_void {
        let (_, spread) = self.hash_of(key);
        let shard = self.shard(spread);
        let e = self.find(&shard, spread, key);
        // SAFETY: NULL or a live entry of the locked shard.
        unsafe { e.as_ref() }.map_or(ptr::null_mut(), |e| e.value)
    }

    /// Removes `key`; its entry, unlinked (NULL if absent).
    fn remove(&self, key: *mut c_void) -> *mut ListEntry {
        let (_, spread) = self.hash_of(key);
        let mut shard = self.shard(spread);
        let e = self.find(&shard, spread, key);
        if e.is_null() {
            return e;
        }
        let head = shard.chains[&spread];
        // SAFETY: `e` and the chain are live entries of the locked shard.
        unsafe {
            if head == e {
                if (*e).next.is_null() {
                    shard.chains.remove(&spread);
                } else {
                    shard.chains.insert(spread, (*e).next);
                }
            } else {
                let mut prev = head;
                while (*prev).next != e {
                    prev = (*prev).next;
                }
                (*prev).next = (*e).next;
            }
        }
        shard.entries -= 1;
        e
    }

    /// The first entry whose spread hash is past `bound`, in iteration
    /// order.
    fn first_after(&self, bound: Bound<u64>) -> Pos {
        let first_shard = match bound {
            Bound::Unbounded => 0,
            Bound::Included(s) | Bound::Excluded(s) => (s >> (64 - SHARD_BITS)) as usize,
        };
        let mut bound = bound;
        for i in first_shard..SHARDS {
            let shard = self.lock(i);
            if let Some((&spread, &entry)) = shard.chains.range((bound, Bound::Unbounded)).next() {
                return Pos::At { spread, entry };
            }
            bound = Bound::Unbounded;
        }
        Pos::End
    }

    /// The position after `pos`.
    fn next(&self, pos: Pos) -> Pos {
        match pos {
            Pos::Start => self.first_after(Bound::Unbounded),
            Pos::End => Pos::End,
            Pos::At { spread, entry } => {
                {
                    let shard = self.shard(spread);
                    let mut e = shard
                        .chains
                        .get(&spread)
                        .copied()
                        .unwrap_or(ptr::null_mut());
                    // Only addresses are compared until `entry` is found in
                    // the chain (it may have been deleted and freed).
                    while !e.is_null() && e != entry {
                        // SAFETY: a live entry of the locked shard.
                        e = unsafe { (*e).next };
                    }
                    if !e.is_null() {
                        // SAFETY: `e == entry` is a live entry of the locked shard.
                        let next = unsafe { (*e).next };
                        if !next.is_null() {
                            return Pos::At {
                                spread,
                                entry: next,
                            };
                        }
                    }
                }
                self.first_after(Bound::Excluded(spread))
            }
        }
    }

    /// Empties the map, handing each entry's key and value to the cleanup
    /// function.
    fn clear(&self) {
        for i in 0..SHARDS {
            let chains = {
                let mut s = self.lock(i);
                s.entries = 0;
                std::mem::take(&mut s.chains)
            };
            for (_, mut e) in chains {
                while !e.is_null() {
                    // SAFETY: the entries were unlinked from the map above and
                    // are owned here; each came from Box::into_raw in `put`.
                    let entry = unsafe { Box::from_raw(e) };
                    e = entry.next;
                    if let Some(cleanup) = self.cleanup {
                        // SAFETY: the user's cleanup function with the
                        // key and value the user stored.
                        unsafe { cleanup(entry.key, entry.value) };
                    }
                }
            }
        }
    }
}

/// Runs `body` at the C boundary; its value, or `fallback` on an error
/// (recorded for `cantus_last_error`).
fn answer<T>(call: &str, fallback: T, body: impl FnOnce() -> Result<T, Fail>) -> T {
    let mut out = None;
    let _: crate::ffi::Code = error::boundary(call, || {
        out = Some(body()?);
        Ok(error::OK)
    });
    out.unwrap_or(fallback)
}

/// The dictionary behind `d`.
///
/// # Safety
/// `d` is NULL or a live dictionary from `qt_dictionary_create`.
unsafe fn dict_at<'a>(call: &str, d: *mut QtDictionary) -> Result<&'a QtDictionary, Fail> {
    // SAFETY: per the contract.
    unsafe { d.as_ref() }.ok_or_else(|| Fail::null(call, "dict"))
}

/// qt_dictionary_create: an empty dictionary comparing keys with `eq`,
/// hashing them with `hash`; `cleanup` (may be NULL) sees each entry that
/// leaves it. NULL (with `cantus_last_error`) for a NULL `eq` or `hash`,
/// or without a runtime (Qthreads asserts it is initialized).
#[unsafe(no_mangle)]
pub extern "C" fn qt_dictionary_create(
    eq: QtDictKeyEqualsF,
    hash: QtDictHashF,
    cleanup: QtDictCleanupF,
) -> *mut QtDictionary {
    let call = "qt_dictionary_create";
    answer(call, ptr::null_mut(), || {
        require_runtime(call)?;
        let eq = eq.ok_or_else(|| Fail::null(call, "eq"))?;
        let hash = hash.ok_or_else(|| Fail::null(call, "hash"))?;
        let shards = (0..SHARDS)
            .map(|_| {
                CachePadded::new(Mutex::new(Shard {
                    chains: BTreeMap::new(),
                    entries: 0,
                }))
            })
            .collect();
        Ok(Box::into_raw(Box::new(QtDictionary {
            eq,
            hash,
            cleanup,
            shards,
        })))
    })
}

/// qt_dictionary_destroy: frees `d`, first handing every entry still in
/// it to the cleanup function as (key, value), as Qthreads does. NULL
/// does nothing.
///
/// # Safety
/// `d` is NULL or a live dictionary that nothing else uses any more (its
/// iterators included).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_dictionary_destroy(d: *mut QtDictionary) {
    error::boundary_void("qt_dictionary_destroy", || {
        if d.is_null() {
            return Ok(());
        }
        // SAFETY: per the contract, a live dictionary from Box::into_raw
        // that nobody else uses.
        let d = unsafe { Box::from_raw(d) };
        d.clear();
        Ok(())
    })
}

/// qt_dictionary_put: maps `key` to `value`, replacing the value of an
/// equal key already there (the entry keeps its first key); returns
/// `value`. NULL for a NULL dictionary.
///
/// # Safety
/// `dict` is NULL or a live dictionary; `key` is one its functions accept.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_dictionary_put(
    dict: *mut QtDictionary,
    key: *mut c_void,
    value: *mut c_void,
) -> *mut c_void {
    let call = "qt_dictionary_put";
    answer(call, ptr::null_mut(), || {
        // SAFETY: forwarded contract.
        Ok(unsafe { dict_at(call, dict)? }.put(key, value, Put::Always))
    })
}

/// qt_dictionary_put_if_absent: maps `key` to `value` unless an equal key
/// is there; returns the value the key has afterwards (the old one if it
/// was there). NULL for a NULL dictionary.
///
/// # Safety
/// As `qt_dictionary_put`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_dictionary_put_if_absent(
    dict: *mut QtDictionary,
    key: *mut c_void,
    value: *mut c_void,
) -> *mut c_void {
    let call = "qt_dictionary_put_if_absent";
    answer(call, ptr::null_mut(), || {
        // SAFETY: forwarded contract.
        Ok(unsafe { dict_at(call, dict)? }.put(key, value, Put::IfAbsent))
    })
}

/// qt_dictionary_get: the value of `key`, NULL if absent (or `dict` NULL).
///
/// # Safety
/// As `qt_dictionary_put`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_dictionary_get(
    dict: *mut QtDictionary,
    key: *mut c_void,
) -> *mut c_void {
    let call = "qt_dictionary_get";
    answer(call, ptr::null_mut(), || {
        // SAFETY: forwarded contract.
        Ok(unsafe { dict_at(call, dict)? }.get(key))
    })
}

/// qt_dictionary_delete: removes `key`; its value, or NULL if absent (or
/// `dict` NULL). The cleanup function sees (key, NULL), as in Qthreads:
/// the value goes back to the caller.
///
/// # Safety
/// As `qt_dictionary_put`; no iterator may stand on the entry and no
/// caller may read it afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_dictionary_delete(
    dict: *mut QtDictionary,
    key: *mut c_void,
) -> *mut c_void {
    let call = "qt_dictionary_delete";
    answer(call, ptr::null_mut(), || {
        // SAFETY: forwarded contract.
        let d = unsafe { dict_at(call, dict)? };
        let e = d.remove(key);
        if e.is_null() {
            return Ok(ptr::null_mut());
        }
        // SAFETY: `remove` unlinked the entry, which came from
        // Box::into_raw in `put`: it is ours alone now.
        let entry = unsafe { Box::from_raw(e) };
        if let Some(cleanup) = d.cleanup {
            // SAFETY: the user's cleanup function with the stored key.
            unsafe { cleanup(entry.key, ptr::null_mut()) };
        }
        Ok(entry.value)
    })
}

/// A new iterator on `dict` standing at `pos`.
fn iterator(dict: *const QtDictionary, pos: Pos) -> *mut DictIterator {
    Box::into_raw(Box::new(DictIterator { dict, pos }))
}

/// qt_dictionary_iterator_create: an iterator before the first entry of
/// `dict` (the first `next` moves it onto the first entry). `ERROR` for a
/// NULL dictionary.
///
/// # Safety
/// `dict` is NULL or a live dictionary, which outlives the iterator.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_dictionary_iterator_create(
    dict: *mut QtDictionary,
) -> *mut DictIterator {
    let call = "qt_dictionary_iterator_create";
    answer(call, error_ptr(), || {
        // SAFETY: forwarded contract.
        unsafe { dict_at(call, dict)? };
        Ok(iterator(dict, Pos::Start))
    })
}

/// qt_dictionary_iterator_destroy: frees `it` (NULL does nothing).
///
/// # Safety
/// `it` is NULL or a live iterator, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_dictionary_iterator_destroy(it: *mut DictIterator) {
    error::guarded((), || {
        if !it.is_null() && it != error_ptr() {
            // SAFETY: per the contract, a live iterator from Box::into_raw.
            drop(unsafe { Box::from_raw(it) });
        }
    })
}

/// The iterator behind `it` (`ERROR` too is refused).
///
/// # Safety
/// `it` is NULL, `ERROR` or a live iterator.
unsafe fn iter_at<'a>(call: &str, it: *mut DictIterator) -> Result<&'a mut DictIterator, Fail> {
    if it == error_ptr() {
        return Err(Fail::new(
            error::EINVAL,
            format!("{call}: the iterator is ERROR"),
        ));
    }
    // SAFETY: per the contract.
    unsafe { it.as_mut() }.ok_or_else(|| Fail::null(call, "it"))
}

/// The entry an iterator stands on (NULL before the first and past the
/// last).
fn entry_of(pos: Pos) -> *mut ListEntry {
    match pos {
        Pos::At { entry, .. } => entry,
        Pos::Start | Pos::End => ptr::null_mut(),
    }
}

/// qt_dictionary_iterator_next: moves `it` to the next entry and returns
/// it; NULL when there are no more (the iterator then equals
/// `qt_dictionary_end`'s), `ERROR` for a NULL iterator. Entries come in
/// ascending (spread) hash order, equal hashes in insertion order. Puts
/// and deletes meanwhile are allowed: an entry put behind the iterator is
/// not seen, one ahead is; if its own entry was deleted it goes on with
/// the next hash.
///
/// # Safety
/// `it` is NULL, `ERROR` or a live iterator of a live dictionary.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_dictionary_iterator_next(it: *mut DictIterator) -> *mut ListEntry {
    let call = "qt_dictionary_iterator_next";
    answer(call, error_ptr(), || {
        // SAFETY: forwarded contract.
        let it = unsafe { iter_at(call, it)? };
        // SAFETY: the iterator's dictionary outlives it (create's contract).
        let d = unsafe { &*it.dict };
        it.pos = d.next(it.pos);
        Ok(entry_of(it.pos))
    })
}

/// qt_dictionary_iterator_get: the entry `it` stands on (NULL before the
/// first `next` and past the last entry), `ERROR` for a NULL iterator.
/// The entry stays valid until its key is deleted or the dictionary
/// destroyed; its `value` may change under a concurrent put.
///
/// # Safety
/// `it` is NULL, `ERROR` or a live iterator.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_dictionary_iterator_get(it: *const DictIterator) -> *mut ListEntry {
    let call = "qt_dictionary_iterator_get";
    answer(call, error_ptr(), || {
        // SAFETY: forwarded contract.
        let it = unsafe { iter_at(call, it.cast_mut())? };
        Ok(entry_of(it.pos))
    })
}

/// qt_dictionary_end: a new iterator past the last entry of `dict` (what
/// an iterator equals once `next` returned NULL). NULL for a NULL
/// dictionary.
///
/// # Safety
/// As `qt_dictionary_iterator_create`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_dictionary_end(dict: *mut QtDictionary) -> *mut DictIterator {
    let call = "qt_dictionary_end";
    answer(call, ptr::null_mut(), || {
        // SAFETY: forwarded contract.
        unsafe { dict_at(call, dict)? };
        Ok(iterator(dict, Pos::End))
    })
}

/// qt_dictionary_iterator_equals: 1 if `a` and `b` walk the same
/// dictionary and stand at the same place (both before the first entry,
/// on the same entry, or past the last), else 0; two NULLs are equal, as
/// in Qthreads.
///
/// # Safety
/// `a` and `b` are NULL or live iterators.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_dictionary_iterator_equals(
    a: *mut DictIterator,
    b: *mut DictIterator,
) -> c_int {
    error::guarded(0, || {
        if a.is_null() || b.is_null() {
            return c_int::from(a == b);
        }
        // SAFETY: per the contract, live iterators.
        let (a, b) = unsafe { (&*a, &*b) };
        c_int::from(a.dict == b.dict && a.pos == b.pos)
    })
}

/// qt_dictionary_iterator_copy: a new iterator at the same place as `b`;
/// NULL for a NULL iterator.
///
/// # Safety
/// `b` is NULL or a live iterator.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_dictionary_iterator_copy(b: *mut DictIterator) -> *mut DictIterator {
    let call = "qt_dictionary_iterator_copy";
    answer(call, ptr::null_mut(), || {
        // SAFETY: forwarded contract.
        let b = unsafe { iter_at(call, b)? };
        Ok(iterator(b.dict, b.pos))
    })
}

/// qt_dictionary_printbuckets: prints, on the C library's stdout (so in
/// order with the program's own `printf`s), each non-empty shard's entry
/// and hash-chain counts and the totals.
///
/// # Safety
/// `dict` is NULL or a live dictionary.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_dictionary_printbuckets(dict: *mut QtDictionary) {
    let call = "qt_dictionary_printbuckets";
    error::boundary_void(call, || {
        // SAFETY: forwarded contract.
        let d = unsafe { dict_at(call, dict)? };
        let (mut total, mut used) = (0, 0);
        let mut lines = Vec::new();
        for i in 0..SHARDS {
            let s = d.lock(i);
            if s.entries > 0 {
                used += 1;
                total += s.entries;
                lines.push(format!(
                    "Shard {i} has {} elements in {} hash chains.",
                    s.entries,
                    s.chains.len()
                ));
            }
        }
        lines.push(format!("used_shards = {used}; total elements = {total};"));
        for l in lines {
            let l = std::ffi::CString::new(l).unwrap_or_default();
            // SAFETY: a NUL-terminated string; puts writes to the C
            // library's stdout.
            unsafe { libc::puts(l.as_ptr()) };
        }
        Ok(())
    })
}
