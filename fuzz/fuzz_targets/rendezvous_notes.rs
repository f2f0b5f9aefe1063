//! Arbitrary block headers and rendezvous notes: checking them reports
//! what is wrong, never panics or names memory outside the area.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| cantus::__fuzz::rendezvous_notes(data));
