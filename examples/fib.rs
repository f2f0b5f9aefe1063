//! Fibonacci with a task spawned at every level and no serial cut-off:
//! the classic stress test of spawn and join cost. Checks its answer
//! against a serial computation.
//!
//! `cargo run --release --example fib -- 32`

fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = cantus::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

fn fib_serial(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        fib_serial(n - 1) + fib_serial(n - 2)
    }
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("usage: fib [N]"))
        .unwrap_or(30);
    let rt = match cantus::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fib: {e}");
            std::process::exit(2);
        }
    };
    let t = std::time::Instant::now();
    let parallel = rt.block_on(|| fib(n));
    let elapsed = t.elapsed();
    let t = std::time::Instant::now();
    let serial = fib_serial(n);
    let serial_elapsed = t.elapsed();
    println!(
        "fib({n}) = {parallel} on {} workers in {:.3} s (serial {:.3} s)",
        rt.workers(),
        elapsed.as_secs_f64(),
        serial_elapsed.as_secs_f64()
    );
    if parallel != serial {
        eprintln!("fib: WRONG: parallel {parallel} != serial {serial}");
        std::process::exit(1);
    }
    println!("fib: result checked against the serial computation: OK");
}
