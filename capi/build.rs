//! Names the shared library `libcantus.so` inside (its SONAME), since the
//! install script installs `libcantus_capi.so` under that name.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcantus.so");
    }
}
