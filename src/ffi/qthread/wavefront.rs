//! `<qthread/wavefront.h>`: the wavefront recurrence `R[c][r] =
//! f(R[c-1][r], R[c-1][r-1], R[c][r-1])` over blocks of cells. A block
//! reads the boundary row below it (a *slat*, with the cell left of its
//! first) and the boundary column left of it (a *strut*) and writes its
//! own top row and right column, the next blocks' boundaries; each block
//! counts the blocks it waits for and is forked (to the owner of `below`'s
//! segment under it) by the one that finishes last. The boundaries are
//! the lattice the call returns.

use super::buf::AlignedBuf;
use super::qarray::{Owned, QArray, owned};
use super::{NO_SHEPHERD, place};
use crate::ffi::error::{self, Fail, boundary_void};
use crate::ffi::lifecycle::require_runtime;
use crate::sync::end_count::EndCount;
use crate::sync::wait::BlockKind;
use std::ffi::{c_int, c_ushort, c_void};
use std::io::Write;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// `wave_comp_f`.
pub type WaveCompF = Option<
    unsafe extern "C" fn(
        left: *const c_void,
        leftdown: *const c_void,
        down: *const c_void,
        out: *mut c_void,
    ),
>;

/// The C function itself.
type Comp = unsafe extern "C" fn(*const c_void, *const c_void, *const c_void, *mut c_void);

/// `qt_wavefront_lattice`: the boundaries of every block.
pub struct WavefrontLattice {
    /// Bytes per cell.
    unit: usize,
    /// Where each block column starts (columns of R), then the end.
    col_starts: Vec<usize>,
    /// Where each block row starts (rows of R), then the end.
    row_starts: Vec<usize>,
    /// `slats[i][bc]`: row `row_starts[i] - 1` of R over block column bc,
    /// from column `col_starts[bc] - 1` (i = 0: the `below` edge).
    slats: Vec<Vec<AlignedBuf>>,
    /// `struts[j][br]`: column `col_starts[j] - 1` of R over block row br
    /// (j = 0: the `left` edge).
    struts: Vec<Vec<AlignedBuf>>,
}

/// A computation in progress, shared by its block tasks.
struct Wave {
    func: Comp,
    unit: usize,
    col_starts: Vec<usize>,
    row_starts: Vec<usize>,
    /// As the lattice's, each written once.
    slats: Vec<Vec<OnceLock<AlignedBuf>>>,
    struts: Vec<Vec<OnceLock<AlignedBuf>>>,
    /// Per block (bc * rows + br): the blocks it still waits for.
    waiting: Vec<AtomicUsize>,
    /// The shepherd of each block column.
    sheps: Vec<usize>,
    /// Blocks forked and not yet done (a block counts its successors
    /// before it counts itself done, so zero means all are done).
    done: Arc<EndCount>,
}

impl Wave {
    fn block_cols(&self) -> usize {
        self.col_starts.len() - 1
    }

    fn block_rows(&self) -> usize {
        self.row_starts.len() - 1
    }

    /// Computes block (bc, br), publishes its boundaries, and forks the
    /// blocks this one was the last to wait for.
    fn run(self: &Arc<Wave>, bc: usize, br: usize) {
        let u = self.unit;
        let (c0, c1) = (self.col_starts[bc], self.col_starts[bc + 1]);
        let (r0, r1) = (self.row_starts[br], self.row_starts[br + 1]);
        let (w, h) = (c1 - c0, r1 - r0);
        let below = self.slats[br][bc]
            .get()
            .expect("wavefront: slat before its block");
        let left = self.struts[bc][br]
            .get()
            .expect("wavefront: strut before its block");
        let mut prev = left.clone();
        let mut cur = AlignedBuf::zeroed(h * u);
        let mut top = AlignedBuf::zeroed((w + 1) * u);
        let at = |b: &AlignedBuf, i: usize| b.as_ptr().wrapping_add(i * u).cast::<c_void>();
        for j in 0..w {
            for i in 0..h {
                let (leftdown, down) = if i == 0 {
                    (at(below, j), at(below, j + 1))
                } else {
                    (at(&prev, i - 1), at(&cur, i - 1))
                };
                let out = cur.as_mut_ptr().wrapping_add(i * u).cast::<c_void>();
                // SAFETY: every pointer is a whole cell of `u` bytes inside
                // its buffer (i < h, j + 1 <= w); `out` is in `cur`, which
                // no input pointer reads at index i; the caller promises
                // func may run on any shepherd.
                unsafe { (self.func)(at(&prev, i), leftdown, down, out) };
            }
            // SAFETY: cell h - 1 of `cur` and cell j + 1 of `top` are inside
            // their buffers, which are distinct.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    cur.as_ptr().add((h - 1) * u),
                    top.as_mut_ptr().add((j + 1) * u),
                    u,
                )
            };
            std::mem::swap(&mut prev, &mut cur);
        }
        // SAFETY: cell h - 1 of `left` and cell 0 of `top` are inside their
        // distinct buffers.
        unsafe {
            std::ptr::copy_nonoverlapping(left.as_ptr().add((h - 1) * u), top.as_mut_ptr(), u)
        };
        let _ = self.slats[br + 1][bc].set(top);
        let _ = self.struts[bc + 1][br].set(prev);
        if bc + 1 < self.block_cols() {
            self.release(bc + 1, br);
        }
        if br + 1 < self.block_rows() {
            self.release(bc, br + 1);
        }
    }

    /// Block (bc, br) waits for one block fewer; forks it at the last.
    fn release(self: &Arc<Wave>, bc: usize, br: usize) {
        // AcqRel: the last releaser sees every earlier one's boundaries.
        if self.waiting[bc * self.block_rows() + br].fetch_sub(1, Ordering::AcqRel) == 1 {
            fork(self.clone(), bc, br);
        }
    }
}

/// Forks block (bc, br) to its shepherd. The task drops its handle on
/// the computation before it counts itself done, so once the count is
/// zero the caller holds the only one.
fn fork(wave: Arc<Wave>, bc: usize, br: usize) {
    let shep = wave.sheps[bc].min(usize::from(NO_SHEPHERD) - 1) as c_ushort;
    let done = wave.done.clone();
    done.add(1);
    let body = {
        let done = done.clone();
        move || {
            let r = panic::catch_unwind(AssertUnwindSafe(|| {
                crate::sched::body_may_go_away(|| wave.run(bc, br))
            }));
            drop(wave);
            if let Err(p) = r {
                // Its successors are never forked, so never counted.
                done.record_panic(p);
            }
            done.done_one();
        }
    };
    if let Err(f) = place("qt_wavefront", shep, body) {
        done.record_panic(Box::new(f.message));
        done.done_one();
    }
}

/// Block starts over `n` cells, `size` per block, then `n`.
fn starts(n: usize, size: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).step_by(size.max(1)).collect();
    v.push(n);
    v
}

/// A copy of elements `[lo, hi)` of an array.
fn copy_range(a: &Owned, lo: usize, hi: usize) -> AlignedBuf {
    let u = a.public.unit_size;
    let mut b = AlignedBuf::zeroed((hi - lo) * u);
    for i in lo..hi {
        // SAFETY: element i (< count) has unit_size bytes; cell i - lo is
        // inside `b`.
        unsafe { std::ptr::copy_nonoverlapping(a.elem(i), b.as_mut_ptr().add((i - lo) * u), u) };
    }
    b
}

/// qt_wavefront: computes the lattice of `func` over the edges `left`
/// and `below` (see wavefront.h); NULL on misuse.
///
/// # Safety
/// The arrays are NULL or live; `func` may run on any shepherd.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_wavefront(
    left: *mut QArray,
    below: *mut QArray,
    func: WaveCompF,
) -> *mut WavefrontLattice {
    const CALL: &str = "qt_wavefront";
    let mut out = std::ptr::null_mut();
    boundary_void(CALL, || {
        require_runtime(CALL)?;
        // SAFETY: the caller's contract.
        let l = unsafe { owned(CALL, left)? };
        // SAFETY: the caller's contract.
        let b = unsafe { owned(CALL, below)? };
        let func = func.ok_or_else(|| Fail::null(CALL, "func"))?;
        let unit = l.public.unit_size;
        if b.public.unit_size != unit || b.public.count < 2 {
            return Err(Fail::new(
                error::EINVAL,
                format!(
                    "{CALL}: `below` needs at least 2 elements ({}) of left's unit_size ({unit}, \
                     below's {})",
                    b.public.count, b.public.unit_size
                ),
            ));
        }
        let (cols, rows) = (b.public.count - 1, l.public.count);
        let col_starts = starts(cols, b.public.segment_size);
        let row_starts = starts(rows, l.public.segment_size);
        let (nbc, nbr) = (col_starts.len() - 1, row_starts.len() - 1);
        let cells = |n| (0..n).map(|_| OnceLock::new()).collect::<Vec<_>>();
        let slats: Vec<Vec<OnceLock<AlignedBuf>>> = (0..=nbr).map(|_| cells(nbc)).collect();
        let struts: Vec<Vec<OnceLock<AlignedBuf>>> = (0..=nbc).map(|_| cells(nbr)).collect();
        for bc in 0..nbc {
            // R[c0 - 1 .. c1][-1] = below[c0 .. c1 + 1].
            let _ = slats[0][bc].set(copy_range(b, col_starts[bc], col_starts[bc + 1] + 1));
        }
        for br in 0..nbr {
            let _ = struts[0][br].set(copy_range(l, row_starts[br], row_starts[br + 1]));
        }
        let waiting = (0..nbc * nbr)
            .map(|k| AtomicUsize::new(usize::from(k / nbr > 0) + usize::from(k % nbr > 0)))
            .collect();
        let sheps = (0..nbc)
            .map(|bc| b.owner((col_starts[bc] + 1) / b.public.segment_size))
            .collect();
        let wave = Arc::new(Wave {
            func,
            unit,
            col_starts,
            row_starts,
            slats,
            struts,
            waiting,
            sheps,
            done: Arc::new(EndCount::new(0)),
        });
        let done = wave.done.clone();
        fork(wave.clone(), 0, 0);
        done.wait_blocking(BlockKind::GroupWait);
        if let Some(p) = done.take_panic() {
            panic::resume_unwind(p);
        }
        // Every block task dropped its handle before counting itself done.
        let Some(wave) = Arc::into_inner(wave) else {
            return Err(Fail::new(
                error::EPANIC,
                format!("{CALL}: a block outlived the call"),
            ));
        };
        let take = |v: Vec<Vec<OnceLock<AlignedBuf>>>| -> Option<Vec<Vec<AlignedBuf>>> {
            v.into_iter()
                .map(|row| row.into_iter().map(OnceLock::into_inner).collect())
                .collect()
        };
        let (Some(slats), Some(struts)) = (take(wave.slats), take(wave.struts)) else {
            return Err(Fail::new(
                error::EPANIC,
                format!("{CALL}: a block left no boundary"),
            ));
        };
        out = Box::into_raw(Box::new(WavefrontLattice {
            unit,
            col_starts: wave.col_starts,
            row_starts: wave.row_starts,
            slats,
            struts,
        }));
        Ok(())
    });
    out
}

/// Writes one cell: as a double if the unit is 8 bytes, else in hex.
fn cell(out: &mut impl Write, b: &AlignedBuf, i: usize, unit: usize) -> std::io::Result<()> {
    // SAFETY: cell i of `b` is inside it (callers index below its length).
    let bytes = unsafe { std::slice::from_raw_parts(b.as_ptr().add(i * unit), unit) };
    if unit == 8 {
        let v = f64::from_ne_bytes(bytes.try_into().expect("8 bytes"));
        write!(out, "{v:9.3} ")
    } else {
        for x in bytes {
            write!(out, "{x:02x}")?;
        }
        write!(out, " ")
    }
}

fn print(l: &WavefrontLattice) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let u = l.unit;
    writeln!(
        out,
        "wavefront lattice: rows of R at the block boundaries (top first)"
    )?;
    for i in (0..l.slats.len()).rev() {
        let r = l.row_starts[i] as i64 - 1;
        write!(out, "R[*][{r}]:")?;
        for s in &l.slats[i] {
            write!(out, " |")?;
            for k in 0..s.len() / u {
                cell(&mut out, s, k, u)?;
            }
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "columns of R at the block boundaries (left first, bottom up)"
    )?;
    for (j, col) in l.struts.iter().enumerate() {
        let c = l.col_starts[j] as i64 - 1;
        write!(out, "R[{c}][*]:")?;
        for s in col {
            write!(out, " |")?;
            for k in 0..s.len() / u {
                cell(&mut out, s, k, u)?;
            }
        }
        writeln!(out)?;
    }
    out.flush()
}

/// qt_wavefront_print_lattice: prints the lattice on stdout.
///
/// # Safety
/// `lattice` is NULL or from `qt_wavefront`, not destroyed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_wavefront_print_lattice(lattice: *const WavefrontLattice) {
    const CALL: &str = "qt_wavefront_print_lattice";
    boundary_void(CALL, || {
        if lattice.is_null() {
            return Err(Fail::null(CALL, "L"));
        }
        // SAFETY: flushing every C stream first keeps what the program
        // printed before this in order; fflush(NULL) has no precondition.
        unsafe { libc::fflush(std::ptr::null_mut()) };
        // SAFETY: a live lattice (contract).
        print(unsafe { &*lattice })
            .map_err(|e| Fail::new(error::EOS, format!("{CALL}: writing stdout: {e}")))
    });
}

/// qt_wavefront_destroy_lattice: frees the lattice (NULL: nothing).
///
/// # Safety
/// `lattice` is NULL or from `qt_wavefront`, destroyed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_wavefront_destroy_lattice(lattice: *mut WavefrontLattice) {
    error::guarded((), || {
        if !lattice.is_null() {
            // SAFETY: from Box::into_raw in qt_wavefront, freed once
            // (contract).
            drop(unsafe { Box::from_raw(lattice) });
        }
    });
}

/// `int *const *`: the rows of `qt_basic_wavefront`'s matrix.
pub type IntRows = *const *mut c_int;

/// qt_basic_wavefront: the recurrence in place on `R[col][row]`, col in
/// `1..cols`, row in `1..rows`, sequentially.
///
/// # Safety
/// `matrix` (`R`) holds `cols` pointers to `rows` ints each; func reads its three
/// inputs and writes its output.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_basic_wavefront(
    matrix: IntRows,
    cols: usize,
    rows: usize,
    func: WaveCompF,
) {
    const CALL: &str = "qt_basic_wavefront";
    boundary_void(CALL, || {
        let f = func.ok_or_else(|| Fail::null(CALL, "func"))?;
        if cols < 2 || rows < 2 {
            return Ok(());
        }
        if matrix.is_null() {
            return Err(Fail::null(CALL, "R"));
        }
        for col in 1..cols {
            // SAFETY: `matrix` holds `cols` row pointers (contract).
            let (prev, cur) = unsafe { (*matrix.add(col - 1), *matrix.add(col)) };
            for row in 1..rows {
                // SAFETY: each row holds `rows` ints (contract); row and
                // row - 1 are below rows.
                unsafe {
                    f(
                        prev.add(row).cast_const().cast(),
                        prev.add(row - 1).cast_const().cast(),
                        cur.add(row - 1).cast_const().cast(),
                        cur.add(row).cast(),
                    )
                };
            }
        }
        Ok(())
    });
}
