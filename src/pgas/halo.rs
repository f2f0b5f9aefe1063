//! `HaloGrid<T>`: a 2-D array distributed in blocks over a grid of
//! locales, each locale's block framed by ghost cells of a chosen width
//! that an exchange fills from the neighbours, so that a stencil's
//! kernel reads its neighbours without branching on where they live.
//!
//! The ghost data travel by [`put_signal`](super::GlobalPtr::put_signal)
//! into a staging slot of the receiver (one per direction and parity of
//! the exchange's number) and are copied into the ghost cells by the
//! receiver itself, in `wait`: the ghost cells change only when their
//! owner asks, and no exchange needs a barrier or an acknowledgement.
//! `README.md` beside this file, "Halo grids", gives the argument.

use super::array::{GlobalArray, alloc_for};
use super::nonblocking::Signal;
use crate::error::{Error, ErrorKind};
use bytemuck::Pod;
use std::ops::Range;

/// The four directions, as indices of the arrival counters and slots:
/// the neighbour the data came from.
const FROM_N: usize = 0;
const FROM_S: usize = 1;
const FROM_W: usize = 2;
const FROM_E: usize = 3;

/// A 2-D array of `rows x cols` elements split into blocks over a
/// `grid.0 x grid.1` grid of locales (locale `r * grid.1 + c` owns block
/// `(r, c)`), each block stored with `width` ghost cells on every side.
/// Made collectively ([`HaloGrid::new`], [`HaloGrid::with_grid`]) inside
/// an SPMD body; every locale works on its own block in place and fills
/// its ghost cells from its neighbours with [`exchange`](HaloGrid::exchange)
/// (or [`start_exchange`](HaloGrid::start_exchange) and
/// [`HaloExchange::wait`], to compute meanwhile).
///
/// Local coordinates: the block's own cells are rows `0..own_rows().len()`
/// and columns `0..own_cols().len()`; ghost cells are at rows and columns
/// `-width..0` and past the end. Ghost cells on the edge of the whole
/// array are never written by an exchange: set them once, they are the
/// boundary condition. An exchange fills edges and corners (with a 2-D
/// grid of locales, the corners come through the side neighbours, as in
/// MPI codes that exchange columns first and then whole rows).
///
/// ```
/// use cantus::pgas::{self, HaloGrid};
///
/// cantus::remote_fn! {
///     /// Each cell takes the mean of its four neighbours, once.
///     fn smooth(n: usize) -> f64 {
///         let mut g = HaloGrid::<f64>::new(n, n, 1).unwrap();
///         let rows = g.own_rows();
///         for i in 0..rows.len() as isize {
///             g.row_mut(i).fill((rows.start + i as usize) as f64);
///         }
///         g.exchange().unwrap();
///         let (h, w) = (rows.len() as isize, n as isize);
///         let mut sum = 0.0;
///         for i in 0..h {
///             let (up, me, down) = (g.row(i - 1), g.row(i), g.row(i + 1));
///             for j in 1..=w as usize {
///                 sum += (up[j] + down[j] + me[j - 1] + me[j + 1]) / 4.0;
///             }
///         }
///         pgas::all_reduce(sum, pgas::sum)
///     }
/// }
///
/// let sums = cantus::run(|| pgas::spmd(smooth(8)).unwrap()).unwrap();
/// assert!(sums.iter().all(|&s| s == sums[0]));
/// ```
pub struct HaloGrid<T> {
    /// The block with its ghost cells, then the staging slots.
    data: GlobalArray<T>,
    /// Arrivals from each direction (`FROM_*`), counted by the signals.
    words: GlobalArray<u64>,
    rows: usize,
    cols: usize,
    width: usize,
    grid: (usize, usize),
    at: (usize, usize),
    /// Rows and columns of the largest block.
    block: (usize, usize),
    own_rows: Range<usize>,
    own_cols: Range<usize>,
    /// Exchanges started.
    generation: u64,
}

impl<T: Pod> HaloGrid<T> {
    /// A zeroed `rows x cols` array split by rows over the locales (a
    /// `num_locales() x 1` grid), with `width` ghost cells around each
    /// block. Collective, like [`alloc`](super::alloc).
    ///
    /// # Errors
    ///
    /// As [`with_grid`](HaloGrid::with_grid).
    pub fn new(rows: usize, cols: usize, width: usize) -> Result<HaloGrid<T>, Error> {
        Self::with_grid(rows, cols, width, (crate::remote::num_locales(), 1))
    }

    /// A zeroed `rows x cols` array split into blocks over a `grid.0 x
    /// grid.1` grid of locales (`grid.0 * grid.1 == num_locales()`),
    /// with `width` ghost cells around each block. Collective.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidConfig`] (on every locale alike) if the grid
    /// does not have one block per locale, or a block would have fewer
    /// than `width` rows or columns (a neighbour's ghost cells would
    /// reach past it); otherwise as [`alloc`](super::alloc).
    pub fn with_grid(
        rows: usize,
        cols: usize,
        width: usize,
        grid: (usize, usize),
    ) -> Result<HaloGrid<T>, Error> {
        let (here, n) = (crate::remote::here(), crate::remote::num_locales());
        let bad = |why: String| {
            Err(Error::new(
                ErrorKind::InvalidConfig,
                format!("cantus::pgas::HaloGrid: {why}"),
            ))
        };
        if grid.0 * grid.1 != n || grid.0 == 0 {
            return bad(format!(
                "a {} x {} grid of locales for a job of {n}",
                grid.0, grid.1
            ));
        }
        let block = (rows.div_ceil(grid.0), cols.div_ceil(grid.1));
        // The last block of a row or column of the grid is the smallest.
        let last = (
            rows.saturating_sub((grid.0 - 1) * block.0),
            cols.saturating_sub((grid.1 - 1) * block.1),
        );
        if last.0 < width.max(1) || last.1 < width.max(1) {
            return bad(format!(
                "a {rows} x {cols} array over a {} x {} grid of locales leaves a block of {} x \
                 {} cells, fewer than the ghost width {width} (or none)",
                grid.0, grid.1, last.0, last.1
            ));
        }
        let at = (here / grid.1, here % grid.1);
        let stride = block.1 + 2 * width;
        let cells = (block.0 + 2 * width) * stride;
        let staging = 2 * (2 * width * stride + 2 * block.0 * width);
        let call = "pgas::HaloGrid::new";
        Ok(HaloGrid {
            data: alloc_for(call, cells + staging)?,
            words: alloc_for(call, 4)?,
            rows,
            cols,
            width,
            grid,
            at,
            block,
            own_rows: at.0 * block.0..((at.0 + 1) * block.0).min(rows),
            own_cols: at.1 * block.1..((at.1 + 1) * block.1).min(cols),
            generation: 0,
        })
    }

    /// Rows of the whole array.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns of the whole array.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Ghost cells on each side of a block.
    pub fn width(&self) -> usize {
        self.width
    }

    /// The grid of locales: (rows, columns).
    pub fn locale_grid(&self) -> (usize, usize) {
        self.grid
    }

    /// This locale's place in the grid of locales: (row, column).
    pub fn grid_position(&self) -> (usize, usize) {
        self.at
    }

    /// The rows of the whole array this locale owns.
    pub fn own_rows(&self) -> Range<usize> {
        self.own_rows.clone()
    }

    /// The columns of the whole array this locale owns.
    pub fn own_cols(&self) -> Range<usize> {
        self.own_cols.clone()
    }

    /// Elements from one stored row to the next in [`local`](HaloGrid::local).
    pub fn stride(&self) -> usize {
        self.block.1 + 2 * self.width
    }

    /// Where local cell `(i, j)` (ghost cells at negative indices and
    /// past the end) is in [`local`](HaloGrid::local).
    ///
    /// # Panics
    ///
    /// If the cell is outside the block and its ghost cells.
    pub fn index(&self, i: isize, j: isize) -> usize {
        let w = self.width as isize;
        let (h, c) = (self.own_rows.len() as isize, self.own_cols.len() as isize);
        assert!(
            (-w..h + w).contains(&i) && (-w..c + w).contains(&j),
            "cantus::pgas::HaloGrid: cell ({i}, {j}) is outside the {h} x {c} block and its \
             ghost cells of width {w}"
        );
        (i + w) as usize * self.stride() + (j + w) as usize
    }

    /// The stored block, ghost cells included, row after row
    /// ([`stride`](HaloGrid::stride) apart; rows and columns past the
    /// block's ghost cells, in a block smaller than the largest, are
    /// unused).
    pub fn local(&self) -> &[T] {
        &self.data.local()[..self.cells()]
    }

    /// The stored block, mutably (see [`local`](HaloGrid::local)).
    pub fn local_mut(&mut self) -> &mut [T] {
        let cells = self.cells();
        &mut self.data.local_mut()[..cells]
    }

    /// Local row `i` (`-width..own_rows().len() + width`) from its first
    /// ghost column to its last: element `j + width` is cell `(i, j)`.
    ///
    /// # Panics
    ///
    /// If `i` is outside the block and its ghost rows.
    pub fn row(&self, i: isize) -> &[T] {
        let (at, len) = self.row_span(i);
        &self.local()[at..at + len]
    }

    /// Local row `i`, mutably (see [`row`](HaloGrid::row)).
    pub fn row_mut(&mut self, i: isize) -> &mut [T] {
        let (at, len) = self.row_span(i);
        &mut self.local_mut()[at..at + len]
    }

    fn row_span(&self, i: isize) -> (usize, usize) {
        (
            self.index(i, -(self.width as isize)),
            self.own_cols.len() + 2 * self.width,
        )
    }

    fn cells(&self) -> usize {
        (self.block.0 + 2 * self.width) * self.stride()
    }

    /// The locale at grid position `at + (dr, dc)`, if there is one.
    fn neighbour(&self, dr: isize, dc: isize) -> Option<usize> {
        let r = self
            .at
            .0
            .checked_add_signed(dr)
            .filter(|&r| r < self.grid.0)?;
        let c = self
            .at
            .1
            .checked_add_signed(dc)
            .filter(|&c| c < self.grid.1)?;
        Some(r * self.grid.1 + c)
    }

    /// Where the staging slot for data from `from` of exchange
    /// `generation` starts, in elements of the part.
    fn slot(&self, generation: u64, from: usize) -> usize {
        let (w, stride, br) = (self.width, self.stride(), self.block.0);
        let rows = w * stride;
        let cols = br * w;
        let per_parity = 2 * rows + 2 * cols;
        let within = match from {
            FROM_N => 0,
            FROM_S => rows,
            FROM_W => 2 * rows,
            _ => 2 * rows + cols,
        };
        self.cells() + (generation % 2) as usize * per_parity + within
    }

    /// Puts `src` into `to`'s staging slot for data from direction
    /// `from` (as `to` sees it), signalling its counter; with no
    /// completion to wait for (the module's argument, in `README.md`).
    fn send(&self, to: usize, from: usize, src: &[T]) -> Result<(), Error> {
        let at = self.slot(self.generation, from);
        self.data
            .ptr(to)
            .add(at)
            .put_signal_unacknowledged(src, self.words.ptr(to).add(from), Signal::Add(1))
            .map(drop)
    }

    /// Phase 1: this block's first and last `width` columns (its own
    /// rows) to the west and east neighbours.
    fn send_columns(&self) -> Result<(), Error> {
        let (w, h, c) = (self.width, self.own_rows.len(), self.own_cols.len());
        for (dc, first, from) in [(-1, 0, FROM_E), (1, c - w, FROM_W)] {
            if let Some(to) = self.neighbour(0, dc) {
                let strip: Vec<T> = (0..h)
                    .flat_map(|i| {
                        let at = self.index(i as isize, first as isize);
                        self.local()[at..at + w].to_vec()
                    })
                    .collect();
                self.send(to, from, &strip)?;
            }
        }
        Ok(())
    }

    /// Phase 2: this block's first and last `width` rows, whole (with
    /// their ghost columns, so corners travel on), to the north and south
    /// neighbours; sent from the block in place.
    fn send_rows(&self) -> Result<(), Error> {
        let (w, h, stride) = (self.width, self.own_rows.len(), self.stride());
        for (dr, first, from) in [(-1, 0, FROM_S), (1, h - w, FROM_N)] {
            if let Some(to) = self.neighbour(dr, 0) {
                let at = self.index(first as isize, -(w as isize));
                self.send(to, from, &self.local()[at..at + w * stride])?;
            }
        }
        Ok(())
    }

    /// Waits until the data of this exchange from `dirs` (those with a
    /// neighbour) arrived, and copies them into the ghost cells.
    fn receive(&mut self, dirs: [(isize, isize, usize); 2]) -> Result<(), Error> {
        let (w, h, c, stride) = (
            self.width,
            self.own_rows.len(),
            self.own_cols.len(),
            self.stride(),
        );
        let g = self.generation;
        for (dr, dc, from) in dirs {
            if self.neighbour(dr, dc).is_none() {
                continue;
            }
            let me = crate::remote::here();
            self.words.ptr(me).add(from).wait_until(|v| v >= g)?;
            let slot = self.slot(g, from);
            let data = self.data.local_mut();
            match from {
                FROM_N | FROM_S => {
                    let row = if from == FROM_N { 0 } else { h + w };
                    data.copy_within(slot..slot + w * stride, row * stride);
                }
                _ => {
                    let col = if from == FROM_W { 0 } else { c + w };
                    for i in 0..h {
                        let to = (i + w) * stride + col;
                        data.copy_within(slot + i * w..slot + (i + 1) * w, to);
                    }
                }
            }
        }
        Ok(())
    }

    /// Fills the ghost cells from the neighbours (blocking): the same as
    /// [`start_exchange`](HaloGrid::start_exchange) and then
    /// [`wait`](HaloExchange::wait). Every locale calls it in turn (it is
    /// not a barrier: each waits only for its neighbours' data).
    ///
    /// # Errors
    ///
    /// The error of a put or a wait (a neighbour is gone).
    pub fn exchange(&mut self) -> Result<(), Error> {
        self.start_exchange()?.wait()
    }

    /// Starts filling the ghost cells: sends this block's edges to its
    /// neighbours and returns; the ghost cells change only in
    /// [`HaloExchange::wait`], so the block (and everything else) may be
    /// read meanwhile through [`HaloExchange::grid`]. With a grid of
    /// locales of one column (the default) everything is sent here;
    /// with several columns, the rows (which carry the corners) go in
    /// `wait`, once the columns came.
    ///
    /// # Errors
    ///
    /// As [`exchange`](HaloGrid::exchange).
    pub fn start_exchange(&mut self) -> Result<HaloExchange<'_, T>, Error> {
        self.generation += 1;
        self.send_columns()?;
        if !self.has_sides() {
            self.send_rows()?;
        }
        Ok(HaloExchange { grid: self })
    }

    /// Whether this block has a west or east neighbour (then its rows,
    /// which carry the corners, go only once the columns came).
    fn has_sides(&self) -> bool {
        self.neighbour(0, -1).is_some() || self.neighbour(0, 1).is_some()
    }
}

/// An exchange of ghost cells under way ([`HaloGrid::start_exchange`]).
#[must_use = "the ghost cells are filled only by wait()"]
pub struct HaloExchange<'a, T> {
    grid: &'a mut HaloGrid<T>,
}

impl<T: Pod> HaloExchange<'_, T> {
    /// The grid, to read (its ghost cells still hold the previous
    /// exchange's data) while the exchange is under way.
    pub fn grid(&self) -> &HaloGrid<T> {
        self.grid
    }

    /// Waits for the neighbours' data and copies it into the ghost cells.
    ///
    /// # Errors
    ///
    /// As [`HaloGrid::exchange`].
    pub fn wait(self) -> Result<(), Error> {
        let g = self.grid;
        g.receive([(0, -1, FROM_W), (0, 1, FROM_E)])?;
        if g.has_sides() {
            g.send_rows()?;
        }
        g.receive([(-1, 0, FROM_N), (1, 0, FROM_S)])
    }
}
