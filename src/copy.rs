//! Copying bytes at memory speed, around one trap of glibc's `memcpy`:
//! it moves a few KiB to a few hundred KiB with `rep movsb`, which some
//! machines run about 20 times slower when the destination lies 1 to 63
//! bytes past the source modulo 4 KiB (measured on an AMD EPYC VM: a
//! 64 KiB copy at 1.5 GB/s instead of 30-40). Two buffers of one size
//! that `malloc` hands out one after the other sit exactly so (its
//! 16-byte chunk header), and so do a message's buffer and the vector it
//! is decoded into. [`copy`] gives such a copy (up to [`PIECES_UP_TO`]
//! bytes) to `memcpy` in pieces of [`PIECE`] bytes, which it moves with
//! vector instructions whatever their distance; every other copy is one
//! `memcpy`.

/// The pieces of a copy at a bad distance: below glibc's smallest
/// `rep movsb` threshold (2 KiB, for SSE2; 4 KiB with AVX2), so each
/// piece takes `memcpy`'s vector loop.
pub(crate) const PIECE: usize = 1024;

/// The longest copy given in pieces: past it glibc leaves `rep movsb`
/// for its large-copy loops, which the trap does not slow (measured: a
/// 1 MiB copy at a bad distance ran at 19-32 GB/s, and in pieces no
/// faster in the transfer rows).
pub(crate) const PIECES_UP_TO: usize = 256 << 10;

/// Whether one `memcpy` of `len` bytes from `src` to `dst` may fall into
/// the slow case: long enough for `rep movsb` and short enough to stay
/// in it, with the destination 1 to 63 bytes past the source modulo a
/// page.
#[inline]
fn bad_distance(dst: *const u8, src: *const u8, len: usize) -> bool {
    len > PIECE
        && len <= PIECES_UP_TO
        && (1..64).contains(&((dst as usize).wrapping_sub(src as usize) % 4096))
}

/// Copies `src` into `dst` (of one length).
///
/// # Panics
/// If the lengths differ, as `copy_from_slice`.
#[inline]
pub(crate) fn copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(
        dst.len(),
        src.len(),
        "source and destination slices have different lengths"
    );
    // SAFETY: `src` is readable and `dst` writable for their common
    // length, and a shared and a mutable borrow never overlap.
    unsafe { copy_raw(src.as_ptr(), dst.as_mut_ptr(), src.len()) }
}

/// Copies `len` bytes from `src` to `dst`, as [`copy`].
///
/// # Safety
/// As `std::ptr::copy_nonoverlapping`: `src` valid for reads and `dst`
/// for writes of `len` bytes, the two not overlapping.
#[inline]
pub(crate) unsafe fn copy_raw(src: *const u8, dst: *mut u8, len: usize) {
    if bad_distance(dst, src, len) {
        let mut at = 0;
        while at < len {
            let n = PIECE.min(len - at);
            // SAFETY: within the caller's ranges (`at + n <= len`).
            unsafe { std::ptr::copy_nonoverlapping(src.add(at), dst.add(at), n) };
            at += n;
        }
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
    }
}

/// Copies `len` bytes from `src` to `dst`, which may overlap (as
/// `std::ptr::copy`); apart, as [`copy`].
///
/// # Safety
/// As `std::ptr::copy`: `src` valid for reads and `dst` for writes of
/// `len` bytes.
#[inline]
pub(crate) unsafe fn move_raw(src: *const u8, dst: *mut u8, len: usize) {
    let (s, d) = (src as usize, dst as usize);
    if d >= s.wrapping_add(len) || s >= d.wrapping_add(len) {
        // SAFETY: the caller's ranges, which do not overlap.
        unsafe { copy_raw(src, dst, len) }
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy(src, dst, len) }
    }
}

/// Appends `data` to `out`, as `extend_from_slice` but copying as
/// [`copy`].
#[inline]
pub(crate) fn extend(out: &mut Vec<u8>, data: &[u8]) {
    if data.len() <= PIECE {
        out.extend_from_slice(data);
        return;
    }
    out.reserve(data.len());
    let at = out.len();
    // SAFETY: `reserve` made room for `data.len()` bytes past `at`;
    // `data` is a shared borrow, so it cannot overlap `out`'s spare room
    // (which `out` owns exclusively); after the copy those bytes are
    // initialized, so the new length covers only written bytes.
    unsafe {
        copy_raw(data.as_ptr(), out.as_mut_ptr().add(at), data.len());
        out.set_len(at + data.len());
    }
}

/// The concatenation of `parts` in a new vector, each copied as
/// [`copy`].
pub(crate) fn concat(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        extend(&mut out, p);
    }
    out
}

/// `data` in a new vector, copied as [`copy`].
#[inline]
pub(crate) fn to_vec(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    extend(&mut out, data);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_exact_at_every_distance_and_length() {
        let src: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut room = vec![0u8; 20_000 + 8192];
        for len in [0, 1, PIECE - 1, PIECE, PIECE + 1, 4096, 4097, 19_999] {
            for dist in [0usize, 1, 16, 31, 63, 64, 2048, 4095] {
                // A destination `dist` bytes past the source modulo 4 KiB.
                let apart = (room.as_ptr() as usize).wrapping_sub(src.as_ptr() as usize) % 4096;
                let at = (dist + 4096 - apart) % 4096;
                let dst = &mut room[at..at + len];
                copy(dst, &src[..len]);
                assert_eq!(dst, &src[..len], "len {len}, distance {dist}");
                let mut v = vec![9u8; 3];
                extend(&mut v, &src[..len]);
                assert_eq!(&v[3..], &src[..len]);
                assert_eq!(&v[..3], &[9, 9, 9]);
            }
        }
    }

    #[test]
    fn only_long_copies_a_little_past_their_source_go_in_pieces() {
        let p = 0x10_0000 as *const u8;
        assert!(bad_distance(p.wrapping_add(16), p, 65_536));
        assert!(bad_distance(p.wrapping_add(4096 + 63), p, 65_536));
        assert!(!bad_distance(p.wrapping_add(64), p, 65_536));
        assert!(!bad_distance(p.wrapping_add(4096), p, 65_536));
        assert!(!bad_distance(p.wrapping_sub(16), p, 65_536));
        assert!(!bad_distance(p.wrapping_add(16), p, PIECE));
        assert!(!bad_distance(p.wrapping_add(16), p, PIECES_UP_TO + 1));
    }
}
