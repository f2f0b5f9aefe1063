//! LU(n) (seed 001, Muraoka et al., "An MPI-based Implementation of the
//! Tascell Task-Parallel Programming Language": "LU(n) computes the LU
//! decomposition of an n x n matrix using a cache-oblivious recursive
//! algorithm"), three ways, all the same blocked right-looking LU without
//! pivoting:
//!
//! - [`lu_balanced`]: the matrix lies in the global address space
//!   (`cantus::pgas`, a global array, block by block, spread over the
//!   locales two-dimensionally block-cyclic: [`GlobalTiles`]) and each
//!   block step's panel solves, then its trailing update, is one
//!   computation of `cantus::balance`: splittable work that is a list of
//!   block coordinates ([`PanelGets`], [`SchurGets`]), split in halves,
//!   a thief of another locale given the blocks its locale owns
//!   (`split_for`) and each piece running its own locale's blocks first;
//!   wherever a piece runs it works in place on the blocks this process
//!   maps (`GlobalPtr::mapped_ptr`: on one machine, all of them) and
//!   gets the others by one-sided get and puts them back (across nodes),
//!   and its result is a count;
//! - [`lu_pieces`]: the same steps as pieces that carry the input blocks
//!   they need ([`Panel`], [`Schur`]) and return the updated blocks
//!   (merged by concatenation), written back by the caller: what
//!   `lu_balanced` did before the pieces fetched their blocks, kept to
//!   drive pieces by hand (tests) and as the carrying peer
//!   ([`lu_carried`]);
//! - [`lu_join`]: the same block jobs run in parallel with `cantus::join`
//!   (the peer on one locale);
//! - [`lu_seq`]: the same blocked algorithm on one thread, in place (the
//!   reference).
//!
//! The matrix ([`Matrix::generate`]) is strictly diagonally dominant, so
//! no pivoting is needed. Within a block, the kernels are cache-oblivious
//! recursions (halving the largest dimension down to [`LEAF`]): the LU of
//! the diagonal block, the two triangular solves and the multiply-subtract
//! of the trailing update. Every version applies the same kernel to the
//! same blocks, so they give the same factors bit for bit
//! ([`checksum`]); [`check`] measures how far L*U is from A.
//!
//! Shared by the examples, tests and benchmarks (the workspace crate
//! `cantus-programs`), each of which uses a part of it.

// The crate's rust-version (1.85) predates `is_multiple_of`, which the
// bench crate's lints (no rust-version) would have.
#![allow(clippy::manual_is_multiple_of)]

use cantus::Bulk;
use cantus::balance::{Balance, LocaleStats, Splittable};
use cantus::pgas::{GetHandle, GlobalArray, GlobalPtr};
use serde::{Deserialize, Serialize};
use std::sync::Mutex;

/// The block size by default: a 64 x 64 block of `f64` is 32 KiB.
pub const B: usize = 64;

/// The kernels' recursions stop at this size (each dimension at most
/// this, then plain loops).
pub const LEAF: usize = 32;

/// The seed of the matrix the programs factor by default.
pub const SEED: u64 = 1;

/// A dense n x n matrix, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    /// Rows (and columns).
    pub n: usize,
    /// `n * n` entries, row after row.
    pub data: Vec<f64>,
}

/// splitmix64's finalizer (Steele, Lea, Flood, 2014): 64 well-mixed bits
/// of `x`.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Matrix {
    /// The matrix of `seed`: entry (i, j) uniform in [-1, 1), a function
    /// of (seed, i, j) alone, plus `n` on the diagonal. Each row's
    /// off-diagonal entries sum to less than `n - 1` in magnitude, so the
    /// matrix is strictly diagonally dominant: LU without pivoting exists
    /// and is stable.
    pub fn generate(n: usize, seed: u64) -> Matrix {
        let mut data = Vec::with_capacity(n * n);
        for i in 0..n {
            for j in 0..n {
                let bits = mix(mix(seed ^ mix(i as u64)) ^ j as u64);
                // 53 random bits to [0, 1), then to [-1, 1).
                let u = (bits >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
                let mut x = 2.0 * u - 1.0;
                if i == j {
                    x += n as f64;
                }
                data.push(x);
            }
        }
        Matrix { n, data }
    }

    /// Entry (i, j).
    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.data[i * self.n + j]
    }
}

/// FNV-1a over the bits of every entry, row by row: equal for two
/// factorizations only if (barring a collision) they are equal bit for
/// bit.
pub fn checksum(m: &Matrix) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for x in &m.data {
        for byte in x.to_bits().to_le_bytes() {
            h = (h ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// How far the factors in `lu` (L unit lower below the diagonal, U on and
/// above it) are from `a`: max |(L*U)_ij - a_ij| over max |a_ij|, the
/// largest error relative to the matrix's largest entry (an error
/// relative to each entry would blow up on entries near zero). About
/// 1e-16 times a small multiple of n for a diagonally dominant matrix.
pub fn check(a: &Matrix, lu: &Matrix) -> f64 {
    assert_eq!(a.n, lu.n, "check: matrices of different sizes");
    let n = a.n;
    let scale = a.data.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let mut row = vec![0.0; n];
    let mut worst = 0.0f64;
    for i in 0..n {
        // Row i of L*U: the sum over p <= i of L_ip times row p of U
        // (from column p on), with L_ii = 1.
        row.fill(0.0);
        for p in 0..=i {
            let l = if p == i { 1.0 } else { lu.get(i, p) };
            let u = &lu.data[p * n + p..(p + 1) * n];
            for (r, u) in row[p..].iter_mut().zip(u) {
                *r += l * u;
            }
        }
        for (j, r) in row.iter().enumerate() {
            worst = worst.max((r - a.get(i, j)).abs());
        }
    }
    if scale == 0.0 { worst } else { worst / scale }
}

// ---------------------------------------------------------------------
// The kernels: cache-oblivious recursions on views of row-major blocks.

/// A view of a row-major matrix: its first entry and the distance between
/// its rows. The recursions halve views into quarters of the same
/// memory, which slices cannot express (two halves of the same rows), so
/// the kernels take views and make row slices only of parts they know to
/// be disjoint. A view made of a shared slice is only read.
#[derive(Clone, Copy)]
struct View {
    p: *mut f64,
    ld: usize,
}

impl View {
    /// A view of `s`, rows `ld` apart.
    fn of(s: &mut [f64], ld: usize) -> View {
        View {
            p: s.as_mut_ptr(),
            ld,
        }
    }

    /// A view of `s` that the kernels only read.
    fn of_read(s: &[f64], ld: usize) -> View {
        View {
            p: s.as_ptr().cast_mut(),
            ld,
        }
    }

    /// The view starting at entry (i, j).
    ///
    /// # Safety
    /// (i, j) is inside the viewed matrix.
    unsafe fn at(self, i: usize, j: usize) -> View {
        View {
            // SAFETY: inside the viewed allocation (the caller's promise).
            p: unsafe { self.p.add(i * self.ld + j) },
            ld: self.ld,
        }
    }

    /// Entry (i, j).
    ///
    /// # Safety
    /// (i, j) is inside the viewed matrix, and not written meanwhile
    /// through a slice.
    unsafe fn get(self, i: usize, j: usize) -> f64 {
        // SAFETY: the caller's promise.
        unsafe { *self.p.add(i * self.ld + j) }
    }

    /// The first `len` entries of row i, to write.
    ///
    /// # Safety
    /// They are inside a view made by [`View::of`], and nothing else
    /// reads or writes them while the slice lives.
    #[allow(clippy::mut_from_ref)]
    unsafe fn row_mut<'a>(self, i: usize, len: usize) -> &'a mut [f64] {
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.p.add(i * self.ld), len) }
    }

    /// The first `len` entries of row i, to read.
    ///
    /// # Safety
    /// They are inside the view, and nothing writes them while the slice
    /// lives.
    unsafe fn row<'a>(self, i: usize, len: usize) -> &'a [f64] {
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts(self.p.add(i * self.ld), len) }
    }
}

/// C -= A * B, with C m x n, A m x k, B k x n: halves the largest of the
/// three dimensions until all are at most [`LEAF`].
///
/// # Safety
/// The three views cover matrices of those shapes; C is writable and
/// disjoint from A and B.
unsafe fn gemm(c: View, a: View, b: View, m: usize, n: usize, k: usize) {
    // SAFETY: for every call and view below, the halves are parts of the
    // caller's matrices, C's parts still disjoint from A's and B's.
    unsafe {
        if m <= LEAF && n <= LEAF && k <= LEAF {
            for i in 0..m {
                let ci = c.row_mut(i, n);
                let ai = a.row(i, k);
                for (p, &x) in ai.iter().enumerate() {
                    for (cj, bj) in ci.iter_mut().zip(b.row(p, n)) {
                        *cj -= x * bj;
                    }
                }
            }
        } else if m >= n && m >= k {
            let h = m / 2;
            gemm(c, a, b, h, n, k);
            gemm(c.at(h, 0), a.at(h, 0), b, m - h, n, k);
        } else if n >= k {
            let h = n / 2;
            gemm(c, a, b, m, h, k);
            gemm(c.at(0, h), a, b.at(0, h), m, n - h, k);
        } else {
            let h = k / 2;
            gemm(c, a, b, m, n, h);
            gemm(c, a.at(0, h), b.at(h, 0), m, n, k - h);
        }
    }
}

/// X = L^-1 X, with L m x m unit lower triangular (its strict lower part
/// is read) and X m x n.
///
/// # Safety
/// As for [`gemm`]: X writable, disjoint from L's strict lower part.
unsafe fn solve_lower(l: View, x: View, m: usize, n: usize) {
    // SAFETY: for every call and view below, parts of the caller's matrices;
    // X's rows are disjoint from L's entries read, and in the base case
    // row i written is never row p read.
    unsafe {
        if n > LEAF && n >= m {
            let h = n / 2;
            solve_lower(l, x, m, h);
            solve_lower(l, x.at(0, h), m, n - h);
        } else if m > LEAF {
            let h = m / 2;
            solve_lower(l, x, h, n);
            gemm(x.at(h, 0), l.at(h, 0), x, m - h, n, h);
            solve_lower(l.at(h, h), x.at(h, 0), m - h, n);
        } else {
            for i in 1..m {
                for p in 0..i {
                    let lip = l.get(i, p);
                    let xp = x.row(p, n);
                    for (xj, pj) in x.row_mut(i, n).iter_mut().zip(xp) {
                        *xj -= lip * pj;
                    }
                }
            }
        }
    }
}

/// X = X U^-1, with U n x n upper triangular (on and above its diagonal)
/// and X m x n.
///
/// # Safety
/// As for [`gemm`]: X writable, disjoint from U's upper part.
unsafe fn solve_upper(u: View, x: View, m: usize, n: usize) {
    // SAFETY: for every call and view below, parts of the caller's matrices;
    // the two column halves of X are disjoint, and U is only read.
    unsafe {
        if m > LEAF && m >= n {
            let h = m / 2;
            solve_upper(u, x, h, n);
            solve_upper(u, x.at(h, 0), m - h, n);
        } else if n > LEAF {
            let h = n / 2;
            solve_upper(u, x, m, h);
            gemm(x.at(0, h), x, u.at(0, h), m, n - h, h);
            solve_upper(u.at(h, h), x.at(0, h), m, n - h);
        } else {
            for i in 0..m {
                let xi = x.row_mut(i, n);
                for j in 0..n {
                    let v = xi[j] / u.get(j, j);
                    xi[j] = v;
                    let uj = u.row(j, n);
                    for (xq, uq) in xi[j + 1..].iter_mut().zip(&uj[j + 1..]) {
                        *xq -= v * uq;
                    }
                }
            }
        }
    }
}

/// The LU of the m x m matrix A in place, without pivoting: L (unit
/// lower) below the diagonal, U on and above it. Recursively: the LU of
/// the top left quarter, the two solves beside and below it, the update
/// of the bottom right quarter and its LU.
///
/// # Safety
/// A is a writable m x m view.
unsafe fn lu_rec(a: View, m: usize) {
    // SAFETY: for every call and view below, the four quarters of A are
    // disjoint; in the base case row p read is never row i written.
    unsafe {
        if m <= LEAF {
            for p in 0..m {
                let pivot = a.get(p, p);
                let up = a.row(p, m);
                for i in p + 1..m {
                    let ai = a.row_mut(i, m);
                    let l = ai[p] / pivot;
                    ai[p] = l;
                    for (aj, uj) in ai[p + 1..].iter_mut().zip(&up[p + 1..]) {
                        *aj -= l * uj;
                    }
                }
            }
        } else {
            let h = m / 2;
            lu_rec(a, h);
            solve_lower(a, a.at(0, h), h, m - h);
            solve_upper(a, a.at(h, 0), m - h, h);
            gemm(a.at(h, h), a.at(h, 0), a.at(0, h), m - h, m - h, h);
            lu_rec(a.at(h, h), m - h);
        }
    }
}

/// Factors the b x b diagonal block `d` in place.
pub fn factor_block(d: &mut [f64], b: usize) {
    assert_eq!(d.len(), b * b);
    // SAFETY: `d` is a b x b matrix borrowed mutably.
    unsafe { lu_rec(View::of(d, b), b) }
}

/// A block right of the diagonal: X = L^-1 X, L the unit lower part of
/// the factored diagonal block `diag`.
pub fn solve_row_block(diag: &[f64], x: &mut [f64], b: usize) {
    assert!(diag.len() == b * b && x.len() == b * b);
    // SAFETY: two distinct borrows, so disjoint; b x b each.
    unsafe { solve_lower(View::of_read(diag, b), View::of(x, b), b, b) }
}

/// A block below the diagonal: X = X U^-1, U the upper part of the
/// factored diagonal block `diag`.
pub fn solve_col_block(diag: &[f64], x: &mut [f64], b: usize) {
    assert!(diag.len() == b * b && x.len() == b * b);
    // SAFETY: two distinct borrows, so disjoint; b x b each.
    unsafe { solve_upper(View::of_read(diag, b), View::of(x, b), b, b) }
}

/// The trailing update of a block: C -= A * B' (A the block left of it in
/// the column panel, B' the one above it in the row panel).
pub fn update_block(c: &mut [f64], a: &[f64], bt: &[f64], b: usize) {
    assert!(c.len() == b * b && a.len() == b * b && bt.len() == b * b);
    // SAFETY: `c` is borrowed mutably, so disjoint from `a` and `bt`.
    unsafe {
        gemm(
            View::of(c, b),
            View::of_read(a, b),
            View::of_read(bt, b),
            b,
            b,
            b,
        )
    }
}

// ---------------------------------------------------------------------
// The blocked algorithm.

/// The matrix as (n/b)^2 blocks of b x b, each row-major, block (i, j) at
/// `i * nb + j`. Jobs take blocks out (leaving empty vectors) and put
/// them back.
struct Tiles {
    b: usize,
    nb: usize,
    blocks: Vec<Vec<f64>>,
}

impl Tiles {
    /// `a` cut into b x b blocks; `b` must divide its size.
    fn of(a: &Matrix, b: usize) -> Tiles {
        assert!(
            b > 0 && a.n % b == 0,
            "lu: the block size {b} must divide n = {}",
            a.n
        );
        let nb = a.n / b;
        let mut blocks = Vec::with_capacity(nb * nb);
        for bi in 0..nb {
            for bj in 0..nb {
                let mut block = Vec::with_capacity(b * b);
                for r in 0..b {
                    let start = (bi * b + r) * a.n + bj * b;
                    block.extend_from_slice(&a.data[start..start + b]);
                }
                blocks.push(block);
            }
        }
        Tiles { b, nb, blocks }
    }

    /// The blocks as one row-major matrix again.
    fn into_matrix(self) -> Matrix {
        let n = self.nb * self.b;
        let mut data = vec![0.0; n * n];
        for bi in 0..self.nb {
            for bj in 0..self.nb {
                let block = &self.blocks[bi * self.nb + bj];
                assert_eq!(block.len(), self.b * self.b, "lu: block {bi},{bj} missing");
                for r in 0..self.b {
                    let start = (bi * self.b + r) * n + bj * self.b;
                    data[start..start + self.b]
                        .copy_from_slice(&block[r * self.b..(r + 1) * self.b]);
                }
            }
        }
        Matrix { n, data }
    }

    /// Block (i, j).
    fn get(&self, i: usize, j: usize) -> &[f64] {
        &self.blocks[i * self.nb + j]
    }

    /// Block (i, j), to write.
    fn get_mut(&mut self, i: usize, j: usize) -> &mut Vec<f64> {
        &mut self.blocks[i * self.nb + j]
    }

    /// Block (i, j), taken out.
    fn take(&mut self, i: usize, j: usize) -> Block {
        let data = std::mem::take(self.get_mut(i, j));
        Block {
            i: i as u32,
            j: j as u32,
            data: data.into(),
        }
    }

    /// A copy of block (i, j).
    fn copy(&self, i: usize, j: usize) -> Block {
        Block {
            i: i as u32,
            j: j as u32,
            data: self.get(i, j).into(),
        }
    }

    /// Puts blocks taken out back in their places; each place must be
    /// empty (taken), each block whole.
    fn put_back(&mut self, blocks: Vec<Block>) {
        let b = self.b;
        for block in blocks {
            assert_eq!(block.data.len(), b * b, "lu: a block came back cut");
            let place = self.get_mut(block.i as usize, block.j as usize);
            assert!(
                place.is_empty(),
                "lu: block {},{} came back twice",
                block.i,
                block.j
            );
            *place = block.data.into_vec();
        }
    }

    /// The panel jobs of step k: the blocks right of the diagonal block
    /// (k, j > k), then those below it (i > k, k), taken out.
    fn panel_jobs(&mut self, k: usize) -> Vec<Block> {
        let mut jobs: Vec<Block> = (k + 1..self.nb).map(|j| self.take(k, j)).collect();
        jobs.extend((k + 1..self.nb).map(|i| self.take(i, k)));
        jobs
    }

    /// The trailing-update jobs of step k: the blocks (i > k, j > k), row
    /// by row, taken out.
    fn schur_jobs(&mut self, k: usize) -> Vec<Block> {
        let mut jobs = Vec::with_capacity((self.nb - k - 1).pow(2));
        for i in k + 1..self.nb {
            for j in k + 1..self.nb {
                jobs.push(self.take(i, j));
            }
        }
        jobs
    }
}

/// A block of the matrix and where it goes: a job's target (updated in
/// place, then returned), or one of its inputs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Block {
    /// Its block row.
    pub i: u32,
    /// Its block column.
    pub j: u32,
    /// b x b entries, row-major; a `Bulk`, so that a block travels
    /// between locales as its bytes with the fewest copies and is read
    /// where it arrived (serde once encoded a `Vec<f64>` entry by entry,
    /// which made the encoding of pieces and results cost as much as the
    /// arithmetic on two locales; the codec now copies one whole, but a
    /// `Bulk` still saves a copy each way).
    pub data: Bulk<f64>,
}

/// The panel solves of block step `k` as splittable work: the blocks of
/// row k right of the diagonal and of column k below it still to solve,
/// with the factored diagonal block they all need. A unit is one block.
#[derive(Debug, Serialize, Deserialize)]
pub struct Panel {
    /// The block size.
    b: u32,
    /// The step: the diagonal block's row and column.
    k: u32,
    /// The factored diagonal block (k, k).
    diag: Bulk<f64>,
    /// The blocks still to solve, the last first.
    jobs: Vec<Block>,
}

impl Panel {
    /// Solves one panel block: row k's with L, column k's with U.
    fn solve(&self, job: &mut Block) {
        let b = self.b as usize;
        if job.i == self.k {
            solve_row_block(&self.diag, &mut job.data, b);
        } else {
            solve_col_block(&self.diag, &mut job.data, b);
        }
    }
}

/// Does up to `units` of the jobs popped from `jobs` with `work`, moving
/// each into `done`; whether jobs remain.
fn run_jobs(
    jobs: &mut Vec<Block>,
    units: usize,
    done: &mut Vec<Block>,
    work: impl Fn(&mut Block),
) -> bool {
    for _ in 0..units {
        let Some(mut job) = jobs.pop() else { break };
        work(&mut job);
        done.push(job);
    }
    !jobs.is_empty()
}

impl Splittable for Panel {
    /// The solved blocks.
    type Result = Vec<Block>;

    fn run(&mut self, units: usize, done: &mut Vec<Block>) -> bool {
        let mut jobs = std::mem::take(&mut self.jobs);
        let more = run_jobs(&mut jobs, units, done, |job| self.solve(job));
        self.jobs = jobs;
        more
    }

    fn split(&mut self) -> Option<Panel> {
        let half = self.jobs.len() / 2;
        (half > 0).then(|| Panel {
            b: self.b,
            k: self.k,
            diag: self.diag.clone(),
            jobs: self.jobs.drain(..half).collect(),
        })
    }

    fn merge(into: &mut Vec<Block>, other: Vec<Block>) {
        into.extend(other);
    }
}

/// The trailing update of block step `k` as splittable work: the blocks
/// (i, j) below and right of the diagonal block still to update, C_ij -=
/// A_ik A_kj, with the solved panel blocks they need (column k's `left`,
/// row k's `top`, each once). A unit is one block.
#[derive(Debug, Serialize, Deserialize)]
pub struct Schur {
    /// The block size.
    b: u32,
    /// Blocks (i, k) of the column panel that some job needs.
    left: Vec<Block>,
    /// Blocks (k, j) of the row panel that some job needs.
    top: Vec<Block>,
    /// The blocks still to update, the last first.
    jobs: Vec<Block>,
}

impl Schur {
    /// Updates one block.
    fn update(&self, job: &mut Block) {
        let a = self.left.iter().find(|a| a.i == job.i);
        let bt = self.top.iter().find(|t| t.j == job.j);
        let (Some(a), Some(bt)) = (a, bt) else {
            panic!("lu: the inputs of block {},{} are missing", job.i, job.j)
        };
        update_block(&mut job.data, &a.data, &bt.data, self.b as usize);
    }
}

/// The blocks of `inputs` whose key (`key(block)`) is among the jobs'
/// keys (`job_key(job)`).
fn needed(
    inputs: &[Block],
    jobs: &[Block],
    key: fn(&Block) -> u32,
    job_key: fn(&Block) -> u32,
) -> Vec<Block> {
    inputs
        .iter()
        .filter(|x| jobs.iter().any(|j| job_key(j) == key(x)))
        .cloned()
        .collect()
}

impl Splittable for Schur {
    /// The updated blocks.
    type Result = Vec<Block>;

    fn run(&mut self, units: usize, done: &mut Vec<Block>) -> bool {
        let mut jobs = std::mem::take(&mut self.jobs);
        let more = run_jobs(&mut jobs, units, done, |job| self.update(job));
        self.jobs = jobs;
        more
    }

    fn split(&mut self) -> Option<Schur> {
        let half = self.jobs.len() / 2;
        if half == 0 {
            return None;
        }
        // The first rows go; each half keeps only the panel blocks its
        // jobs need (a block row cut by the split goes with both).
        let jobs: Vec<Block> = self.jobs.drain(..half).collect();
        let part = Schur {
            b: self.b,
            left: needed(&self.left, &jobs, |a| a.i, |c| c.i),
            top: needed(&self.top, &jobs, |t| t.j, |c| c.j),
            jobs,
        };
        let mine = &self.jobs;
        self.left.retain(|a| mine.iter().any(|c| c.i == a.i));
        self.top.retain(|t| mine.iter().any(|c| c.j == t.j));
        Some(part)
    }

    fn merge(into: &mut Vec<Block>, other: Vec<Block>) {
        into.extend(other);
    }
}

cantus::splittable!(Panel, Schur);

/// One step's work for [`lu_pieces`]'s caller to run.
pub enum Step {
    /// The panel solves.
    Panel(Panel),
    /// The trailing update.
    Schur(Schur),
}

/// The blocked LU of [`Matrix::generate`]`(n, seed)` with b x b blocks,
/// each step's panel solves and trailing update handed as splittable
/// work to `run`, which returns the blocks it got back (every job's
/// block, once) or fails. Returns the factors (L unit lower below the
/// diagonal, U on and above it).
pub fn lu_pieces<E>(
    n: usize,
    b: usize,
    seed: u64,
    mut run: impl FnMut(Step) -> Result<Vec<Block>, E>,
) -> Result<Matrix, E> {
    let mut t = Tiles::of(&Matrix::generate(n, seed), b);
    let nb = t.nb;
    for k in 0..nb {
        factor_block(t.get_mut(k, k), b);
        if k + 1 == nb {
            break;
        }
        let panel = Panel {
            b: b as u32,
            k: k as u32,
            diag: t.get(k, k).into(),
            jobs: t.panel_jobs(k),
        };
        let count = panel.jobs.len();
        let solved = run(Step::Panel(panel))?;
        assert_eq!(solved.len(), count, "lu: step {k}: panel blocks lost");
        t.put_back(solved);
        let schur = Schur {
            b: b as u32,
            left: (k + 1..nb).map(|i| t.copy(i, k)).collect(),
            top: (k + 1..nb).map(|j| t.copy(k, j)).collect(),
            jobs: t.schur_jobs(k),
        };
        let count = schur.jobs.len();
        let updated = run(Step::Schur(schur))?;
        assert_eq!(updated.len(), count, "lu: step {k}: updated blocks lost");
        t.put_back(updated);
    }
    Ok(t.into_matrix())
}

/// What the balancing did in an LU: each locale's counts summed over
/// the computations (two per block step but the last), and how many.
#[derive(Debug, Default)]
pub struct Balanced {
    /// Each locale's counts, summed over the computations.
    pub locales: Vec<LocaleStats>,
    /// Computations run.
    pub computations: usize,
}

impl Balanced {
    /// Adds one computation's counts.
    fn add(&mut self, locales: &[LocaleStats]) {
        if self.locales.len() < locales.len() {
            self.locales
                .resize_with(locales.len(), LocaleStats::default);
        }
        for (sum, one) in self.locales.iter_mut().zip(locales) {
            sum.add(one);
        }
        self.computations += 1;
    }
}

/// The blocked LU of [`Matrix::generate`]`(n, seed)` with b x b blocks,
/// each step's panel solves and then its trailing update balanced with
/// `cantus::balance`, the pieces carrying their blocks ([`lu_pieces`]):
/// the peer of [`lu_balanced`], whose pieces fetch them. Call it from a
/// task; every locale takes part. Returns the factors and what the
/// balancing did.
pub fn lu_carried(n: usize, b: usize, seed: u64) -> Result<(Matrix, Balanced), cantus::Error> {
    let mut stats = Balanced::default();
    let lu = lu_pieces(n, b, seed, |step| {
        let outcome = match step {
            Step::Panel(w) => Balance::new(w).units(1).run()?,
            Step::Schur(w) => Balance::new(w).units(1).run()?,
        };
        stats.add(&outcome.locales);
        Ok(outcome.result)
    })?;
    Ok((lu, stats))
}

/// The matrix's blocks in the global address space, spread over the
/// locales two-dimensionally block-cyclic (ScaLAPACK's layout): the
/// locales form a `pr` x `pc` grid (`pr` <= `pc`, as square as their
/// number allows) and block (i, j) lies on the locale at (i mod pr, j
/// mod pc), so every locale owns about as many blocks of every trailing
/// matrix, and a step's panel blocks lie on a row and a column of the
/// grid. On its owner, block (i, j) is b x b entries, row-major, at
/// element `((i / pr) lc + j / pc) b^2` of the locale's part of a global
/// array that every locale allocated (`alloc_tiles`; lc = ceil(nb / pc)).
/// A piece reaches any block from any locale with one-sided gets and
/// puts: on one machine a copy from or into memory every locale maps,
/// across machines a message to the owner.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct GlobalTiles {
    /// Locale 0's part of the array.
    base: GlobalPtr<f64>,
    b: u32,
    nb: u32,
    /// The locale grid's rows and columns.
    pr: u32,
    pc: u32,
}

impl GlobalTiles {
    /// Blocks of b x b, nb to a side, over `locales` locales, in the
    /// global array whose locale 0's part is `base`.
    fn new(base: GlobalPtr<f64>, b: usize, nb: usize, locales: usize) -> GlobalTiles {
        let (pr, pc) = Self::grid(locales);
        GlobalTiles {
            base,
            b: b as u32,
            nb: nb as u32,
            pr: pr as u32,
            pc: pc as u32,
        }
    }

    /// The grid of `locales` locales: `pr` the largest divisor of
    /// `locales` no larger than its square root.
    fn grid(locales: usize) -> (usize, usize) {
        let pr = (1..=locales)
            .take_while(|r| r * r <= locales)
            .filter(|r| locales % r == 0)
            .last()
            .unwrap_or(1);
        (pr, locales / pr)
    }

    /// Elements each locale's part needs for n x n in b x b blocks.
    fn part_len(n: usize, b: usize, locales: usize) -> usize {
        let nb = n / b;
        let (pr, pc) = Self::grid(locales);
        nb.div_ceil(pr) * nb.div_ceil(pc) * b * b
    }

    /// The locale that owns block (i, j).
    fn owner(&self, i: usize, j: usize) -> usize {
        (i % self.pr as usize) * self.pc as usize + j % self.pc as usize
    }

    /// Where block (i, j) starts in its owner's part, in elements.
    fn offset(&self, i: usize, j: usize) -> usize {
        let (b, pr, pc) = (self.b as usize, self.pr as usize, self.pc as usize);
        let lc = (self.nb as usize).div_ceil(pc);
        ((i / pr) * lc + j / pc) * b * b
    }

    fn at(&self, i: usize, j: usize) -> GlobalPtr<f64> {
        self.base.on(self.owner(i, j)).add(self.offset(i, j))
    }

    /// Block (i, j), into `into`.
    fn get(&self, i: usize, j: usize, into: &mut Vec<f64>) {
        let b = self.b as usize;
        into.resize(b * b, 0.0);
        self.at(i, j)
            .get(into)
            .unwrap_or_else(|e| panic!("lu: the get of block {i},{j} failed: {e}"));
    }

    /// Writes `block` as block (i, j).
    fn put(&self, i: usize, j: usize, block: &[f64]) {
        self.at(i, j)
            .put(block)
            .unwrap_or_else(|e| panic!("lu: the put of block {i},{j} failed: {e}"));
    }

    /// Block (i, j)'s b^2 elements' address in this process, where it
    /// maps them (shared memory, or this locale's own part).
    fn mapped(&self, i: usize, j: usize) -> Option<*mut f64> {
        let b = self.b as usize;
        self.at(i, j)
            .mapped_ptr(b * b)
            .unwrap_or_else(|e| panic!("lu: block {i},{j} is not in the job: {e}"))
    }

    /// Arranges a piece's jobs (block coordinates, run from the back) for
    /// the locale it runs on: the blocks it owns last, so they run first
    /// and the others wait where their owners' thieves find them.
    fn arrange(&self, jobs: &mut Vec<(u32, u32)>, here: usize) {
        let (mut mine, theirs): (Vec<_>, Vec<_>) = jobs
            .iter()
            .partition(|&&(i, j)| self.owner(i as usize, j as usize) == here);
        if mine.is_empty() || theirs.is_empty() {
            return;
        }
        *jobs = theirs;
        jobs.append(&mut mine);
    }

    /// The jobs to give a thief on locale `to` from a piece on `here`:
    /// another locale's thief the blocks it owns (at most half the
    /// piece's jobs; half, the others first, if it owns none); an idle
    /// worker here every other job, so that both keep a share of this
    /// locale's blocks and of the rest. `None` below two jobs.
    fn split_jobs(
        &self,
        jobs: &mut Vec<(u32, u32)>,
        here: usize,
        to: usize,
    ) -> Option<Vec<(u32, u32)>> {
        let n = jobs.len();
        if n < 2 {
            return None;
        }
        if to == here {
            return cantus::balance::split_stack(jobs);
        }
        let owned = |&(i, j): &(u32, u32)| self.owner(i as usize, j as usize) == to;
        let theirs = jobs.iter().filter(|x| owned(x)).count();
        if theirs == 0 {
            return Some(jobs.drain(..n / 2).collect());
        }
        let mut give = theirs.min(n / 2);
        let mut given = Vec::with_capacity(give);
        jobs.retain(|x| {
            if give > 0 && owned(x) {
                give -= 1;
                given.push(*x);
                false
            } else {
                true
            }
        });
        Some(given)
    }
}

/// Each locale's handle of the global array that holds the matrix while
/// an LU runs (`alloc_tiles` stores it, `release_tiles` drops it).
static TILES: Mutex<Option<GlobalArray<f64>>> = Mutex::new(None);

/// SPMD body: allocates the matrix's array (`len` entries on every
/// locale: the heap is symmetric; each locale's part holds the blocks it
/// owns) and keeps this locale's handle; returns locale 0's part.
#[derive(Clone, Serialize, Deserialize)]
struct AllocTiles {
    len: u64,
}

impl cantus::Remote for AllocTiles {
    type Output = GlobalPtr<f64>;
    fn run(self) -> GlobalPtr<f64> {
        let array = cantus::pgas::alloc::<f64>(self.len as usize)
            .unwrap_or_else(|e| panic!("lu: no room for the matrix in the global heap: {e}"));
        let base = array.ptr(0);
        *TILES.lock().unwrap_or_else(|e| e.into_inner()) = Some(array);
        base
    }
}

/// SPMD body: drops this locale's handle of the matrix's array (the last
/// drop frees it).
#[derive(Clone, Serialize, Deserialize)]
struct ReleaseTiles;

impl cantus::Remote for ReleaseTiles {
    type Output = ();
    fn run(self) {
        TILES.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

cantus::remote!(AllocTiles, ReleaseTiles);

/// The matrix's array while an LU runs; released on every locale when
/// dropped.
struct Held(GlobalTiles);

impl Held {
    fn alloc(n: usize, b: usize) -> Result<Held, cantus::Error> {
        let locales = cantus::num_locales();
        let base = cantus::pgas::spmd(AllocTiles {
            len: GlobalTiles::part_len(n, b, locales) as u64,
        })?[0];
        Ok(Held(GlobalTiles::new(base, b, n / b, locales)))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Err(e) = cantus::pgas::spmd(ReleaseTiles) {
            eprintln!("lu: the matrix's global array was not released: {e}");
        }
    }
}

/// The panel solves of block step `k` as splittable work over blocks in
/// the global address space: the coordinates of the blocks of row k right
/// of the diagonal and of column k below it still to solve. A piece gets
/// the factored diagonal block once, then solves one block per unit: in
/// place where this process maps it, else got and put back. Its result
/// is the number of blocks solved.
#[derive(Debug, Serialize, Deserialize)]
pub struct PanelGets {
    m: GlobalTiles,
    k: u32,
    /// The blocks still to solve, the last first.
    jobs: Vec<(u32, u32)>,
    /// The diagonal block, once fetched here.
    #[serde(skip)]
    diag: Vec<f64>,
    /// The block being solved.
    #[serde(skip)]
    block: Vec<f64>,
    /// Whether the jobs are arranged for this locale (`arrange`).
    #[serde(skip)]
    arranged: bool,
}

impl PanelGets {
    /// The panel solves of step `k` for `jobs`.
    fn new(m: GlobalTiles, k: u32, jobs: Vec<(u32, u32)>) -> PanelGets {
        PanelGets {
            m,
            k,
            jobs,
            diag: Vec::new(),
            block: Vec::new(),
            arranged: false,
        }
    }

    /// A piece of this step with `jobs`.
    fn piece(&self, jobs: Vec<(u32, u32)>) -> PanelGets {
        PanelGets::new(self.m, self.k, jobs)
    }
}

impl Splittable for PanelGets {
    type Result = u64;

    fn run(&mut self, units: usize, done: &mut u64) -> bool {
        let (k, b) = (self.k as usize, self.m.b as usize);
        if !self.arranged {
            self.m.arrange(&mut self.jobs, cantus::here());
            self.arranged = true;
        }
        if self.diag.is_empty() && !self.jobs.is_empty() {
            self.m.get(k, k, &mut self.diag);
        }
        for _ in 0..units {
            let Some((i, j)) = self.jobs.pop() else { break };
            let (i, j) = (i as usize, j as usize);
            let diag = &self.diag;
            let solve = |x: &mut [f64]| {
                if i == k {
                    solve_row_block(diag, x, b);
                } else {
                    solve_col_block(diag, x, b);
                }
            };
            match self.m.mapped(i, j) {
                // SAFETY: block (i, j) is this piece's job alone in step
                // k's panel solves (the jobs are moved among pieces, never
                // shared; the step's pieces read only the diagonal block,
                // copied), and `mapped` checked its b^2 elements; what
                // wrote it before is ordered before this step began, as
                // for the trailing update's blocks.
                Some(p) => solve(unsafe { std::slice::from_raw_parts_mut(p, b * b) }),
                None => {
                    self.m.get(i, j, &mut self.block);
                    solve(&mut self.block);
                    self.m.put(i, j, &self.block);
                }
            }
            *done += 1;
        }
        !self.jobs.is_empty()
    }

    fn split(&mut self) -> Option<PanelGets> {
        let half = self.jobs.len() / 2;
        (half > 0).then(|| {
            let jobs = self.jobs.drain(..half).collect();
            self.piece(jobs)
        })
    }

    fn split_for(&mut self, to: usize) -> Option<PanelGets> {
        let jobs = self.m.split_jobs(&mut self.jobs, cantus::here(), to)?;
        Some(self.piece(jobs))
    }

    fn merge(into: &mut u64, other: u64) {
        *into += other;
    }
}

/// The trailing update of block step `k` as splittable work over blocks
/// in the global address space: the coordinates of the blocks (i, j)
/// below and right of the diagonal block still to update, C_ij -= A_ik
/// A_kj, one block per unit. A piece reads and updates in place the
/// blocks this process maps (`GlobalPtr::mapped_ptr`: on one machine,
/// all of them); of the others it gets each panel block it needs once
/// (kept while it runs), and gets and puts back the block it updates.
/// Those gets (every rank a node) it starts for the next unit before
/// updating the current block, so that their round trips overlap the
/// arithmetic. Its result is the number of blocks updated.
#[derive(Debug, Serialize, Deserialize)]
pub struct SchurGets {
    m: GlobalTiles,
    k: u32,
    /// The blocks still to update, the last first.
    jobs: Vec<(u32, u32)>,
    /// Panel blocks (i, k) fetched here, by i.
    #[serde(skip)]
    left: Vec<(u32, Vec<f64>)>,
    /// Panel blocks (k, j) fetched here, by j.
    #[serde(skip)]
    top: Vec<(u32, Vec<f64>)>,
    /// The block being updated.
    #[serde(skip)]
    block: Vec<f64>,
    /// Gets started for the next job, where blocks travel as messages.
    #[serde(skip)]
    next: Prefetch,
    /// Whether the jobs are arranged for this locale (`arrange`).
    #[serde(skip)]
    arranged: bool,
}

impl SchurGets {
    /// The trailing update of step `k` for `jobs`.
    fn new(m: GlobalTiles, k: u32, jobs: Vec<(u32, u32)>) -> SchurGets {
        SchurGets {
            m,
            k,
            jobs,
            left: Vec::new(),
            top: Vec::new(),
            block: Vec::new(),
            next: Prefetch::default(),
            arranged: false,
        }
    }

    /// A piece of this step with `jobs`.
    fn piece(&self, jobs: Vec<(u32, u32)>) -> SchurGets {
        SchurGets::new(self.m, self.k, jobs)
    }

    /// Starts the next job's gets, of its blocks that travel as messages
    /// (not mapped here) and are not fetched yet.
    fn start_next(&mut self) {
        let (m, k) = (self.m, self.k as usize);
        let Some(&(ni, nj)) = self.jobs.last() else {
            return;
        };
        let (niu, nju) = (ni as usize, nj as usize);
        if m.mapped(niu, nju).is_none() {
            self.next.block = Some(((ni, nj), start_get(m, niu, nju)));
        }
        if !self.left.iter().any(|(key, _)| *key == ni) && m.mapped(niu, k).is_none() {
            self.next.left = Some((ni, start_get(m, niu, k)));
        }
        if !self.top.iter().any(|(key, _)| *key == nj) && m.mapped(k, nju).is_none() {
            self.next.top = Some((nj, start_get(m, k, nju)));
        }
    }
}

/// The gets a piece of the trailing update started for its next job
/// while it updates the current one, where the blocks are not mapped
/// here (every rank a node: each get a round trip to the block's owner,
/// which answers between its own updates); on shared memory none (a get
/// is a copy, done when it returns).
#[derive(Default)]
struct Prefetch {
    /// The job (i, j) and the get of its block.
    block: Option<((u32, u32), GetHandle<f64>)>,
    /// The panel block (i, k) it needs, keyed i, if not fetched yet.
    left: Option<(u32, GetHandle<f64>)>,
    /// The panel block (k, j) it needs, keyed j, if not fetched yet.
    top: Option<(u32, GetHandle<f64>)>,
}

impl std::fmt::Debug for Prefetch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prefetch")
            .field("block", &self.block.as_ref().map(|(key, _)| key))
            .field("left", &self.left.as_ref().map(|(key, _)| key))
            .field("top", &self.top.as_ref().map(|(key, _)| key))
            .finish()
    }
}

/// The elements of a prefetched get.
fn arrived(got: GetHandle<f64>, what: &str) -> Vec<f64> {
    got.wait()
        .unwrap_or_else(|e| panic!("lu: the get of {what} failed: {e}"))
}

/// Starts the get of block (i, j).
fn start_get(m: GlobalTiles, i: usize, j: usize) -> GetHandle<f64> {
    let b = m.b as usize;
    m.at(i, j)
        .get_nb(b * b)
        .unwrap_or_else(|e| panic!("lu: the get of block {i},{j} failed: {e}"))
}

/// The panel block keyed `key` from `cache`, fetched (block `at(key)`)
/// the first time.
fn cached(cache: &mut Vec<(u32, Vec<f64>)>, key: u32, fetch: impl FnOnce(&mut Vec<f64>)) -> &[f64] {
    let at = match cache.iter().position(|(k, _)| *k == key) {
        Some(at) => at,
        None => {
            let mut block = Vec::new();
            fetch(&mut block);
            cache.push((key, block));
            cache.len() - 1
        }
    };
    &cache[at].1
}

impl Splittable for SchurGets {
    type Result = u64;

    fn run(&mut self, units: usize, done: &mut u64) -> bool {
        let (k, b, m) = (self.k as usize, self.m.b as usize, self.m);
        if !self.arranged {
            m.arrange(&mut self.jobs, cantus::here());
            self.arranged = true;
        }
        for _ in 0..units {
            let Some((i, j)) = self.jobs.pop() else { break };
            let (iu, ju) = (i as usize, j as usize);
            // The job's blocks: in place where this process maps them;
            // else those started for it, and the rest fetched now.
            let next = std::mem::take(&mut self.next);
            let (c_at, a_at, t_at) = (m.mapped(iu, ju), m.mapped(iu, k), m.mapped(k, ju));
            if c_at.is_none() {
                match next.block {
                    Some((key, got)) if key == (i, j) => self.block = arrived(got, "a block"),
                    _ => m.get(iu, ju, &mut self.block),
                }
            }
            if let Some((key, got)) = next.left {
                cached(&mut self.left, key, |x| *x = arrived(got, "a panel block"));
            }
            if let Some((key, got)) = next.top {
                cached(&mut self.top, key, |x| *x = arrived(got, "a panel block"));
            }
            if a_at.is_none() {
                cached(&mut self.left, i, |x| m.get(iu, k, x));
            }
            if t_at.is_none() {
                cached(&mut self.top, j, |x| m.get(k, ju, x));
            }
            self.start_next();
            let bb = b * b;
            let a = match a_at {
                // SAFETY: panel block (i, k) is only read while step k's
                // trailing update runs (its panel computation, which
                // wrote it, ended before this one began, and nothing
                // writes it again), and `mapped` checked its b^2 elements.
                Some(p) => unsafe { std::slice::from_raw_parts(p, bb) },
                None => cached(&mut self.left, i, |_| unreachable!("fetched above")),
            };
            let t = match t_at {
                // SAFETY: as for (i, k), panel block (k, j).
                Some(p) => unsafe { std::slice::from_raw_parts(p, bb) },
                None => cached(&mut self.top, j, |_| unreachable!("fetched above")),
            };
            match c_at {
                Some(p) => {
                    // SAFETY: block (i, j) is this piece's job alone in
                    // step k (a step's jobs are moved among pieces, never
                    // shared; the step's pieces read only row and column
                    // k, and i, j > k; the caller touches no block while a
                    // step runs), and `mapped` checked its b^2 elements.
                    // What wrote it before (an earlier step on any locale,
                    // or the caller's puts) is ordered before this step
                    // began by that computation's end and this one's
                    // start, as a get's copy would be; it is a block other
                    // than (i, k) and (k, j), so it aliases neither.
                    let c = unsafe { std::slice::from_raw_parts_mut(p, bb) };
                    update_block(c, a, t, b);
                }
                None => {
                    update_block(&mut self.block, a, t, b);
                    m.put(iu, ju, &self.block);
                }
            }
            *done += 1;
        }
        !self.jobs.is_empty()
    }

    fn split(&mut self) -> Option<SchurGets> {
        let half = self.jobs.len() / 2;
        (half > 0).then(|| {
            let jobs = self.jobs.drain(..half).collect();
            self.piece(jobs)
        })
    }

    fn split_for(&mut self, to: usize) -> Option<SchurGets> {
        let jobs = self.m.split_jobs(&mut self.jobs, cantus::here(), to)?;
        Some(self.piece(jobs))
    }

    fn merge(into: &mut u64, other: u64) {
        *into += other;
    }
}

cantus::splittable!(PanelGets, SchurGets);

/// The blocked LU of [`Matrix::generate`]`(n, seed)` with b x b blocks,
/// in the global address space: the matrix goes block by block into a
/// global array spread over the locales ([`GlobalTiles`]), and each step's
/// panel solves and
/// then its trailing update are balanced with `cantus::balance` as pieces
/// that name their blocks ([`PanelGets`], [`SchurGets`]: one block per
/// step of a piece, so that requests are answered between blocks) and
/// fetch them by one-sided get wherever they run. Call it from a task;
/// every locale takes part (the array is allocated and released by two
/// SPMD calls, so no other SPMD group may run meanwhile). Returns the
/// factors and what the balancing did.
pub fn lu_balanced(n: usize, b: usize, seed: u64) -> Result<(Matrix, Balanced), cantus::Error> {
    let mut t = Tiles::of(&Matrix::generate(n, seed), b);
    let nb = t.nb;
    let held = Held::alloc(n, b)?;
    let m = held.0;
    for i in 0..nb {
        for j in 0..nb {
            m.put(i, j, t.get(i, j));
        }
    }
    let mut stats = Balanced::default();
    let mut diag = Vec::new();
    for k in 0..nb {
        m.get(k, k, &mut diag);
        factor_block(&mut diag, b);
        m.put(k, k, &diag);
        if k + 1 == nb {
            break;
        }
        let mut jobs: Vec<(u32, u32)> = (k + 1..nb).map(|j| (k as u32, j as u32)).collect();
        jobs.extend((k + 1..nb).map(|i| (i as u32, k as u32)));
        let count = jobs.len() as u64;
        let panel = Balance::new(PanelGets::new(m, k as u32, jobs))
            .units(1)
            .run()?;
        assert_eq!(panel.result, count, "lu: step {k}: panel blocks lost");
        stats.add(&panel.locales);
        let jobs: Vec<(u32, u32)> = (k + 1..nb)
            .flat_map(|i| (k + 1..nb).map(move |j| (i as u32, j as u32)))
            .collect();
        let count = jobs.len() as u64;
        let schur = Balance::new(SchurGets::new(m, k as u32, jobs))
            .units(1)
            .run()?;
        assert_eq!(schur.result, count, "lu: step {k}: updated blocks lost");
        stats.add(&schur.locales);
    }
    for i in 0..nb {
        for j in 0..nb {
            m.get(i, j, t.get_mut(i, j));
        }
    }
    drop(held);
    Ok((t.into_matrix(), stats))
}

/// Runs `f` on every job, in parallel: halves the jobs with
/// `cantus::join` down to single jobs (`forall_mut` with its default
/// grain would not split a loop of fewer than 2048 jobs).
fn each_job(jobs: &mut [Block], f: &(impl Fn(&mut Block) + Sync)) {
    match jobs {
        [] => {}
        [job] => f(job),
        _ => {
            let (a, b) = jobs.split_at_mut(jobs.len() / 2);
            cantus::join(|| each_job(a, f), || each_job(b, f));
        }
    }
}

/// The same blocked LU with each step's block jobs (the same jobs as
/// [`lu_balanced`]'s) run in parallel by `cantus::join` on this locale's
/// workers, the inputs read in place. Call it from a task.
pub fn lu_join(n: usize, b: usize, seed: u64) -> Matrix {
    let mut t = Tiles::of(&Matrix::generate(n, seed), b);
    let nb = t.nb;
    for k in 0..nb {
        factor_block(t.get_mut(k, k), b);
        if k + 1 == nb {
            break;
        }
        let mut jobs = t.panel_jobs(k);
        let diag = t.get(k, k);
        each_job(&mut jobs, &|job| {
            if job.i as usize == k {
                solve_row_block(diag, &mut job.data, b);
            } else {
                solve_col_block(diag, &mut job.data, b);
            }
        });
        t.put_back(jobs);
        let mut jobs = t.schur_jobs(k);
        let tiles = &t;
        each_job(&mut jobs, &|job| {
            let (i, j) = (job.i as usize, job.j as usize);
            update_block(&mut job.data, tiles.get(i, k), tiles.get(k, j), b);
        });
        t.put_back(jobs);
    }
    t.into_matrix()
}

/// The same blocked LU on the calling thread, in place (no runtime
/// needed): the reference.
pub fn lu_seq(n: usize, b: usize, seed: u64) -> Matrix {
    let mut t = Tiles::of(&Matrix::generate(n, seed), b);
    let nb = t.nb;
    for k in 0..nb {
        factor_block(t.get_mut(k, k), b);
        for j in k + 1..nb {
            let mut x = std::mem::take(t.get_mut(k, j));
            solve_row_block(t.get(k, k), &mut x, b);
            *t.get_mut(k, j) = x;
        }
        for i in k + 1..nb {
            let mut x = std::mem::take(t.get_mut(i, k));
            solve_col_block(t.get(k, k), &mut x, b);
            *t.get_mut(i, k) = x;
        }
        for i in k + 1..nb {
            for j in k + 1..nb {
                let mut c = std::mem::take(t.get_mut(i, j));
                update_block(&mut c, t.get(i, k), t.get(k, j), b);
                *t.get_mut(i, j) = c;
            }
        }
    }
    t.into_matrix()
}

/// The flops of an LU of order n: 2n^3/3.
pub fn flops(n: usize) -> f64 {
    2.0 * (n as f64).powi(3) / 3.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tiles of nb x nb blocks of b x b over `locales` locales (the base
    /// pointer is a real one; these tests only compute places).
    fn tiles(b: usize, nb: usize, locales: usize) -> GlobalTiles {
        /// Locale 0's part of a global array (freed at once).
        #[derive(Clone, Serialize, Deserialize)]
        struct Base;
        impl cantus::Remote for Base {
            type Output = GlobalPtr<f64>;
            fn run(self) -> GlobalPtr<f64> {
                cantus::pgas::alloc::<f64>(1).unwrap().ptr(0)
            }
        }
        cantus::remote!(Base);
        let base = cantus::run(|| cantus::pgas::spmd(Base)).unwrap().unwrap()[0];
        GlobalTiles::new(base, b, nb, locales)
    }

    #[test]
    fn the_grid_is_as_square_as_the_locales_allow() {
        let grids: Vec<_> = (1..=9).map(GlobalTiles::grid).collect();
        assert_eq!(
            grids,
            [
                (1, 1),
                (1, 2),
                (1, 3),
                (2, 2),
                (1, 5),
                (2, 3),
                (1, 7),
                (2, 4),
                (3, 3)
            ]
        );
    }

    #[test]
    fn every_block_has_a_place_of_its_own_inside_its_owners_part() {
        let base = tiles(1, 1, 1).base;
        for locales in 1..=9 {
            for (b, nb) in [(1, 1), (1, 2), (2, 5), (1, 8), (3, 7)] {
                let t = GlobalTiles::new(base, b, nb, locales);
                let (pr, pc) = (t.pr as usize, t.pc as usize);
                let len = GlobalTiles::part_len(nb * b, b, locales);
                let mut seen = std::collections::HashSet::new();
                let mut per_locale = vec![0usize; locales];
                for i in 0..nb {
                    for j in 0..nb {
                        let (owner, at) = (t.owner(i, j), t.offset(i, j));
                        assert!(owner < locales, "{locales} locales: block {i},{j}");
                        assert!(
                            at + b * b <= len,
                            "{locales} locales: block {i},{j} at {at}"
                        );
                        assert_eq!(at % (b * b), 0);
                        assert!(seen.insert((owner, at)), "block {i},{j} shares a place");
                        assert_eq!(t.at(i, j), base.on(owner).add(at));
                        per_locale[owner] += 1;
                    }
                }
                // Spread: no locale owns more than its share rounded up
                // by a row and a column of the grid.
                if nb * nb >= locales {
                    let most = nb.div_ceil(pr) * nb.div_ceil(pc);
                    assert!(per_locale.iter().all(|&c| c <= most), "{per_locale:?}");
                }
            }
        }
    }

    #[test]
    fn a_thief_gets_the_blocks_of_its_locale_and_idle_workers_here_a_share() {
        let t = tiles(1, 6, 2); // grid 1 x 2: block (i, j) on locale j % 2
        let all: Vec<(u32, u32)> = (0..6).flat_map(|i| (0..6).map(move |j| (i, j))).collect();
        let sorted = |mut v: Vec<(u32, u32)>| {
            v.sort();
            v
        };

        // Arranged for locale 0: its blocks last (run first), the order
        // within each kept.
        let mut jobs = all.clone();
        t.arrange(&mut jobs, 0);
        let (theirs, mine) = jobs.split_at(18);
        assert!(theirs.iter().all(|&(_, j)| j % 2 == 1), "{jobs:?}");
        assert!(mine.iter().all(|&(_, j)| j % 2 == 0), "{jobs:?}");
        assert!(mine.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(sorted(jobs.clone()), all);

        // Locale 1's thief: the blocks locale 1 owns, all of them (half
        // the jobs).
        let mut kept = jobs.clone();
        let given = t.split_jobs(&mut kept, 0, 1).unwrap();
        assert_eq!(given.len(), 18);
        assert!(given.iter().all(|&(_, j)| j % 2 == 1));
        assert!(kept.iter().all(|&(_, j)| j % 2 == 0));

        // At most half the piece, even if the thief owns more.
        let mut kept: Vec<(u32, u32)> = vec![(0, 1), (0, 3), (0, 5), (0, 0)];
        let given = t.split_jobs(&mut kept, 0, 1).unwrap();
        assert_eq!((given.len(), kept.len()), (2, 2));
        assert!(given.iter().all(|&(_, j)| j % 2 == 1));

        // A thief that owns none gets half, from the front.
        let t3 = tiles(1, 6, 3); // grid 1 x 3: block (i, j) on locale j % 3
        let mut kept: Vec<(u32, u32)> = vec![(0, 0), (0, 2), (0, 3), (1, 5)];
        let given = t3.split_jobs(&mut kept, 0, 1).unwrap();
        assert_eq!(given, [(0, 0), (0, 2)]);
        assert_eq!(kept, [(0, 3), (1, 5)]);

        // An idle worker here: every other job, so both keep a share of
        // the blocks here and of the rest.
        let mut kept = jobs.clone();
        let given = t.split_jobs(&mut kept, 0, 0).unwrap();
        assert_eq!((given.len(), kept.len()), (18, 18));
        for half in [&given, &kept] {
            assert_eq!(half.iter().filter(|&&(_, j)| j % 2 == 0).count(), 9);
        }
        let mut both = given;
        both.extend(kept);
        assert_eq!(sorted(both), all);

        // Nothing to split below two jobs.
        assert!(t.split_jobs(&mut vec![(0, 1)], 0, 1).is_none());
        assert!(t.split_jobs(&mut vec![], 0, 0).is_none());
    }
}
