//! Arbitrary fragment streams from several sources: reassembly never
//! panics, counts what it holds, and completes only whole frames.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| cantus::__fuzz::am_fragments(data));
