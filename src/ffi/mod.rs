//! The C ABI (issue 4): cantus as the tasking layer of a language runtime,
//! and a Qthreads-compatible subset. (Under construction.)
