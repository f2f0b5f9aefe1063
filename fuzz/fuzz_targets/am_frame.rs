//! Arbitrary bytes as an active-message frame: decoding never panics,
//! and what decodes re-encodes to the same bytes.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| cantus::__fuzz::am_frame(data));
