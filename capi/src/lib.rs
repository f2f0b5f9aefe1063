//! The cantus C library: `libcantus.so` and `libcantus.a` (after
//! `scripts/install-c.sh` renames them from `libcantus_capi.*`).
//!
//! The functions are written in `cantus::ffi` (next to the crate internals
//! they use); this crate only makes cargo build them as a C library. Its
//! `#[no_mangle] extern "C"` symbols are exported from the cdylib because
//! this crate links `cantus` (the re-export below) and rustc exports every
//! upstream `#[no_mangle]` symbol from a cdylib; `tests/c_abi.rs` checks
//! the exported list against the headers in both directions.

pub use cantus::ffi;
