//! Arbitrary bytes as a shared-memory ring's indices and data: reading it
//! reports corruption as errors, never panics or reads outside the ring.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| cantus::__fuzz::ring_frames(data));
