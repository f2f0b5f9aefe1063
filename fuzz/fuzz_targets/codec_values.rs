//! Arbitrary bytes decoded by the codec as values of many shapes:
//! decoding never panics, and what decodes re-encodes stably.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| cantus::__fuzz::codec_values(data));
