//! `<qthread/hash.h>`: `qt_hash64` (a 64-bit key to a well-mixed 64-bit
//! hash) and `qt_hash_bytes` (a byte string and a seed to a hash), the
//! hash functions Qthreads offers for its dictionary's users. Same
//! contract as Qthreads' (deterministic, every input bit changes about half
//! the output bits), cantus's own functions: the values differ from
//! Qthreads' (which uses Bob Jenkins' lookup2 mix), so nothing may depend
//! on particular hash values. Neither needs a runtime.

use crate::ffi::error::{self, Fail};
use std::ffi::c_void;

/// 2⁶⁴/φ, odd: the multiplier that spreads a counter over 64 bits (also
/// Qthreads' `GOLDEN_RATIO`, which the header defines for seeds).
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// A bijective 64-bit finalizer (xor-shift / multiply rounds; the
/// constants of Stafford's "Mix13" variant of the MurmurHash3 finalizer):
/// every input bit flips each output bit with probability close to 1/2.
pub(crate) fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The hash of `bytes` seeded with `state`: each 8-byte little-endian word
/// (the last one zero-padded) is folded in with a full [`mix64`] round;
/// the length is folded in first and last, so zero-padding never makes
/// two different strings equal before the final round.
pub(crate) fn hash_bytes(bytes: &[u8], state: u64) -> u64 {
    let len = bytes.len() as u64;
    let mut h = state ^ GOLDEN.wrapping_mul(len.wrapping_add(1));
    for word in bytes.chunks(8) {
        let mut w = [0u8; 8];
        w[..word.len()].copy_from_slice(word);
        h = mix64(h ^ u64::from_le_bytes(w)).wrapping_add(GOLDEN);
    }
    mix64(h ^ len)
}

/// qt_hash64: a well-mixed 64-bit hash of `key` (a bijection: different
/// keys never collide). Needs no runtime.
#[unsafe(no_mangle)]
pub extern "C" fn qt_hash64(key: u64) -> u64 {
    error::guarded(key, || mix64(key))
}

/// qt_hash_bytes: the hash of the `bytes` bytes at `key_ptr`, seeded with
/// `state` (equal strings and seeds give equal hashes). `key_ptr` NULL
/// with `bytes > 0` is reported in `cantus_last_error` and gives `state`.
///
/// # Safety
/// `key_ptr` points at `bytes` readable bytes (anything when `bytes` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_hash_bytes(key_ptr: *mut c_void, bytes: usize, state: u64) -> u64 {
    let call = "qt_hash_bytes";
    let mut out = state;
    let _: crate::ffi::Code = error::boundary(call, || {
        if bytes == 0 {
            out = hash_bytes(&[], state);
            return Ok(error::OK);
        }
        if key_ptr.is_null() {
            return Err(Fail::null(call, "key_ptr"));
        }
        // SAFETY: non-null, and the caller promises `bytes` readable bytes.
        let data = unsafe { std::slice::from_raw_parts(key_ptr.cast::<u8>(), bytes) };
        out = hash_bytes(data, state);
        Ok(error::OK)
    });
    out
}

#[cfg(test)]
mod tests {
    use super::{hash_bytes, mix64};

    #[test]
    fn mix_is_deterministic_and_spreads_nearby_keys() {
        assert_eq!(mix64(12345), mix64(12345));
        let mut seen = std::collections::HashSet::new();
        for k in 0..10_000u64 {
            assert!(seen.insert(mix64(k)));
        }
        // One flipped input bit flips about half the output bits.
        let flips: u32 = (0..64)
            .map(|b| (mix64(7) ^ mix64(7 ^ (1 << b))).count_ones())
            .sum();
        let mean = f64::from(flips) / 64.0;
        assert!((24.0..40.0).contains(&mean), "mean flipped bits {mean}");
    }

    #[test]
    fn byte_hashes_depend_on_every_byte_the_length_and_the_seed() {
        let a = hash_bytes(b"k1", 1);
        assert_eq!(a, hash_bytes(b"k1", 1));
        assert_ne!(a, hash_bytes(b"k2", 1));
        assert_ne!(a, hash_bytes(b"k1", 2));
        assert_ne!(hash_bytes(b"ab", 0), hash_bytes(b"ab\0", 0));
        assert_ne!(hash_bytes(b"", 0), hash_bytes(b"\0", 0));
        let long = [7u8; 33];
        let mut other = long;
        other[32] = 8;
        assert_ne!(hash_bytes(&long, 0), hash_bytes(&other, 0));
    }
}
