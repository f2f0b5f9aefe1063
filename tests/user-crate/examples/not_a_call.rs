//! Does not compile, on purpose: a plain function's result passed where
//! a remote call belongs (`tests/user_crate.rs` checks what the compiler
//! says). Never built by the crate's `cargo test --test jobs`.

fn square(x: u64) -> u64 {
    x * x
}

fn main() {
    let n = cantus::run(|| cantus::on(1, square(3)).join().unwrap()).unwrap();
    println!("{n}");
}
