//! `BlockArray<T>`: one array of `n` elements across the locales, split
//! into contiguous blocks (locale `l` owns `l * b .. (l + 1) * b`, with
//! `b = ceil(n / locales)`; the last blocks may be short or empty).

use super::array::{GlobalArray, alloc_for};
use super::ptr::GlobalPtr;
use crate::error::{Error, ErrorKind, Locales};
use bytemuck::Pod;
use std::ops::Range;

/// A block-distributed array: element `i` lives on locale
/// `i / block_len()`. Made collectively ([`BlockArray::new`]); each
/// locale works on its own block in place
/// ([`local_mut`](BlockArray::local_mut),
/// [`forall_local`](BlockArray::forall_local))
/// and reaches any element by its global index ([`read`](BlockArray::read),
/// [`write`](BlockArray::write), [`ptr`](BlockArray::ptr)) and any range of
/// them, across owners, as slices ([`get_slice`](BlockArray::get_slice),
/// [`put_slice`](BlockArray::put_slice)).
///
/// The names are those of the other global types: `local`/`local_mut`
/// for this locale's part (as [`GlobalArray`] and
/// [`HaloGrid`](super::HaloGrid)), `read`/`write` for one element (as
/// [`GlobalPtr`]), `get`/`put` on a [`GlobalPtr`] and
/// `get_slice`/`put_slice` here for a run of elements.
#[derive(Debug)]
pub struct BlockArray<T> {
    array: GlobalArray<T>,
    n: usize,
    block: usize,
    here: usize,
    locales: usize,
}

impl<T: Pod> BlockArray<T> {
    /// `n` zeroed elements split across the locales. Collective, like
    /// [`alloc`](super::alloc): every locale calls it in the same order
    /// with the same `n`.
    ///
    /// # Errors
    ///
    /// As [`alloc`](super::alloc).
    pub fn new(n: usize) -> Result<BlockArray<T>, Error> {
        let (here, locales) = (crate::remote::here(), crate::remote::num_locales());
        let block = n.div_ceil(locales);
        Ok(BlockArray {
            array: alloc_for("pgas::BlockArray::new", block)?,
            n,
            block,
            here,
            locales,
        })
    }

    /// Elements in the whole array.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Elements per block (the last blocks may hold fewer).
    pub fn block_len(&self) -> usize {
        self.block
    }

    /// The locale that owns element `i` (`i < len()`).
    pub fn owner(&self, i: usize) -> usize {
        i / self.block.max(1)
    }

    /// The global indices `locale` owns.
    pub fn range_of(&self, locale: usize) -> Range<usize> {
        let lo = (locale * self.block).min(self.n);
        lo..(lo + self.block).min(self.n)
    }

    /// The global indices this locale owns.
    pub fn local_range(&self) -> Range<usize> {
        self.range_of(self.here)
    }

    /// This locale's block (see [`GlobalArray::local`] on concurrent puts).
    pub fn local(&self) -> &[T] {
        let len = self.local_range().len();
        &self.array.local()[..len]
    }

    /// This locale's block, mutably: element `j` is global index
    /// `local_range().start + j`. (`&mut self`: a mutable slice into
    /// memory that this handle shares must be unique.) The same name as
    /// [`GlobalArray::local_mut`] and [`HaloGrid::local_mut`](super::HaloGrid::local_mut).
    pub fn local_mut(&mut self) -> &mut [T] {
        let len = self.local_range().len();
        &mut self.array.local_mut()[..len]
    }

    /// The old name of [`local_mut`](BlockArray::local_mut).
    #[deprecated(note = "named local_mut, as on GlobalArray and HaloGrid")]
    pub fn local_part(&mut self) -> &mut [T] {
        self.local_mut()
    }

    /// Runs `body(i, &mut element)` for every element this locale owns
    /// (`i` is the global index), in parallel with [`forall`](crate::forall)
    /// over the local block.
    pub fn forall_local<F>(&mut self, body: F)
    where
        T: Send,
        F: Fn(usize, &mut T) + Sync,
    {
        let lo = self.local_range().start;
        crate::par::forall_mut(self.local_mut(), |j, x| body(lo + j, x));
    }

    /// A pointer to element `i` on its owner.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::OutOfBounds`] if `i >= len()`.
    pub fn ptr(&self, i: usize) -> Result<GlobalPtr<T>, Error> {
        if i >= self.n {
            return Err(Error::new(
                ErrorKind::OutOfBounds,
                format!(
                    "cantus::pgas::BlockArray: index {i} is out of bounds (the array has {} \
                     elements on {})",
                    self.n,
                    Locales(self.locales)
                ),
            ));
        }
        let owner = self.owner(i);
        Ok(self.array.ptr(owner).add(i - owner * self.block))
    }

    /// Element `i`, read from its owner's memory (one element: `read`,
    /// as [`GlobalPtr::read`]; a range: [`get_slice`](BlockArray::get_slice)).
    ///
    /// # Errors
    ///
    /// As [`ptr`](BlockArray::ptr).
    pub fn read(&self, i: usize) -> Result<T, Error> {
        self.ptr(i)?.read()
    }

    /// Writes element `i` into its owner's memory (as
    /// [`GlobalPtr::write`]; a range: [`put_slice`](BlockArray::put_slice)).
    ///
    /// # Errors
    ///
    /// As [`ptr`](BlockArray::ptr).
    pub fn write(&self, i: usize, value: T) -> Result<(), Error> {
        self.ptr(i)?.write(value)
    }

    /// The old name of [`read`](BlockArray::read).
    ///
    /// # Errors
    ///
    /// As [`read`](BlockArray::read).
    #[deprecated(note = "named read (one element), as on GlobalPtr; get_slice reads a range")]
    pub fn get(&self, i: usize) -> Result<T, Error> {
        self.read(i)
    }

    /// The old name of [`write`](BlockArray::write).
    ///
    /// # Errors
    ///
    /// As [`write`](BlockArray::write).
    #[deprecated(note = "named write (one element), as on GlobalPtr; put_slice writes a range")]
    pub fn put(&self, i: usize, value: T) -> Result<(), Error> {
        self.write(i, value)
    }

    /// Reads elements `start .. start + dst.len()` into `dst`, from as
    /// many owners as the range spans: one slice get per owner (a copy
    /// where this process maps the owner's memory, one message there and
    /// back otherwise), never element by element.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::OutOfBounds`] if the range passes `len()`, checked
    /// before anything is read (then `dst` is as it was); an error of an
    /// owner's get otherwise (the pieces before it were read).
    pub fn get_slice(&self, start: usize, dst: &mut [T]) -> Result<(), Error> {
        let mut at = 0;
        for (owner_start, len) in self.pieces(start, dst.len(), "get_slice")? {
            self.ptr(owner_start)?.get(&mut dst[at..at + len])?;
            at += len;
        }
        Ok(())
    }

    /// Writes `src` into elements `start .. start + src.len()`, one slice
    /// put per owner the range spans.
    ///
    /// # Errors
    ///
    /// As [`get_slice`](BlockArray::get_slice): the bounds are checked
    /// before anything is written.
    pub fn put_slice(&self, start: usize, src: &[T]) -> Result<(), Error> {
        let mut at = 0;
        for (owner_start, len) in self.pieces(start, src.len(), "put_slice")? {
            self.ptr(owner_start)?.put(&src[at..at + len])?;
            at += len;
        }
        Ok(())
    }

    /// The range `start .. start + len` cut at the blocks' edges: each
    /// piece's first index and length, in order; an error if it passes
    /// the end.
    fn pieces(&self, start: usize, len: usize, call: &str) -> Result<Vec<(usize, usize)>, Error> {
        if start.checked_add(len).is_none_or(|end| end > self.n) {
            return Err(Error::new(
                ErrorKind::OutOfBounds,
                format!(
                    "cantus::pgas::BlockArray::{call}: elements {start}..{} are out of bounds \
                     (the array has {} elements on {})",
                    start.saturating_add(len),
                    self.n,
                    Locales(self.locales)
                ),
            ));
        }
        let mut pieces = Vec::new();
        let mut i = start;
        let end = start + len;
        while i < end {
            let block_end = ((i / self.block) + 1) * self.block;
            let n = block_end.min(end) - i;
            pieces.push((i, n));
            i += n;
        }
        Ok(pieces)
    }
}
