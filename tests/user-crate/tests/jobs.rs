//! Ordinary tests, each starting its own job of two locales; `cargo test`
//! runs them on parallel threads of one process.

use cantus_user_crate::square_on_locale_1;
use std::time::Duration;

#[test]
fn squares_three() {
    println!("user-crate: test squares_three ran");
    assert_eq!(square_on_locale_1(3, Duration::ZERO), 9);
}

/// Keeps its job a while, so the tests running beside it must wait for
/// their turn.
#[test]
fn squares_four_slowly() {
    println!("user-crate: test squares_four_slowly ran");
    assert_eq!(square_on_locale_1(4, Duration::from_millis(300)), 16);
}

#[test]
fn squares_five() {
    println!("user-crate: test squares_five ran");
    assert_eq!(square_on_locale_1(5, Duration::ZERO), 25);
}

#[test]
fn no_locales() {
    println!("user-crate: test no_locales ran");
    assert_eq!(2 + 2, 4);
}

/// Fails on purpose after locale 1 printed: run with `--ignored` by
/// cantus's `tests/user_crate.rs`, which looks for locale 1's line in the
/// failure report.
#[test]
#[ignore = "fails on purpose"]
fn fails_after_a_remote_call() {
    assert_eq!(
        square_on_locale_1(6, Duration::ZERO),
        35,
        "wrong on purpose"
    );
}

/// Locale 1 panics before it reaches `build`: run with `--ignored` by
/// cantus's `tests/user_crate.rs`, which looks for the panic and for the
/// message that ends the job.
#[test]
#[ignore = "ends its test binary on purpose"]
fn locale_1_dies_before_build() {
    if std::env::var_os("CANTUS_LOCALE").is_some() {
        panic!("locale 1 panics before build");
    }
    square_on_locale_1(7, Duration::ZERO);
}
