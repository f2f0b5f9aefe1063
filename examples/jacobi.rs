//! A 2-D Jacobi stencil across locales: an `N x N` grid split by rows
//! (a `pgas::HaloGrid` with one ghost row above and below each block),
//! the top edge held at 1 and the others at 0; each iteration replaces
//! every cell by the mean of its four neighbours. The ghost rows are
//! exchanged every iteration while the block's inner rows are computed
//! (`start_exchange`, then `wait` before the two edge rows); locale 0
//! gathers the result and checks it bit for bit against the same
//! iterations run serially.
//!
//! ```text
//! cargo run --release --example jacobi [N] [ITERATIONS] [LOCALES] [exchange]
//! ```
//!
//! Defaults: N = 1024, 100 iterations, 2 locales (`CANTUS_LOCALES`
//! overrides). With `exchange` last, the iterations only exchange ghost
//! rows (no cell is computed, nothing checked): the halo exchange's own
//! cost, as `jacobi_mpi N ITERATIONS exchange` measures `MPI_Sendrecv`'s. It prints the time per iteration, the time an iteration
//! spends exchanging ghost rows (sending, and waiting for the
//! neighbours' rows), and the serial program's time per iteration; the
//! C MPI program `bench/c/jacobi_mpi.c` does the same with
//! `MPI_Sendrecv`.

use cantus::Bulk;
use cantus::pgas::{self, HaloGrid};
use std::time::Instant;

cantus::remote_fn! {
    /// The SPMD body: this locale's rows after `iterations`, the
    /// seconds the slowest locale took per iteration, and the seconds
    /// it spent in exchanges per iteration.
    fn jacobi(n: usize, iterations: usize, compute: bool) -> (usize, Bulk<f64>, f64, f64) {
        let mut grids = [new_grid(n), new_grid(n)];
        let rows = grids[0].own_rows();
        let h = rows.len();
        pgas::barrier();
        let start = Instant::now();
        let mut exchanging = 0.0;
        for it in 0..iterations {
            let [a, b] = &mut grids;
            let (old, new) = if it % 2 == 0 { (a, b) } else { (b, a) };
            let t = Instant::now();
            let x = old.start_exchange().expect("the ghost rows go out");
            exchanging += t.elapsed().as_secs_f64();
            // Inner rows need no ghost row.
            for i in (1..h.saturating_sub(1)).filter(|_| compute) {
                sweep(x.grid(), new, i);
            }
            let t = Instant::now();
            x.wait().expect("the neighbours' rows come");
            exchanging += t.elapsed().as_secs_f64();
            if compute {
                sweep(old, new, 0);
                if h > 1 {
                    sweep(old, new, h - 1);
                }
            }
        }
        let took = start.elapsed().as_secs_f64() / iterations.max(1) as f64;
        let last = &grids[iterations % 2];
        let mine: Bulk<f64> = (0..h as isize)
            .flat_map(|i| last.row(i)[1..=n].to_vec())
            .collect();
        let took = pgas::all_reduce(took, pgas::max);
        let exchanging = pgas::all_reduce(exchanging / iterations.max(1) as f64, pgas::max);
        (rows.start, mine, took, exchanging)
    }
}

/// A grid whose boundary (the ghost cells past the array's edge) is 1
/// along the top and 0 elsewhere.
fn new_grid(n: usize) -> HaloGrid<f64> {
    let mut g = HaloGrid::<f64>::new(n, n, 1).expect("room for the grid");
    if g.own_rows().start == 0 {
        g.row_mut(-1).fill(1.0);
    }
    g
}

/// Row `i` of `new` from `old`: the mean of each cell's four neighbours.
fn sweep(old: &HaloGrid<f64>, new: &mut HaloGrid<f64>, i: usize) {
    let i = i as isize;
    let (up, me, down) = (old.row(i - 1), old.row(i), old.row(i + 1));
    let out = new.row_mut(i);
    for j in 1..out.len() - 1 {
        out[j] = 0.25 * (up[j] + down[j] + me[j - 1] + me[j + 1]);
    }
}

/// The same iterations on one grid with a frame of boundary cells, row
/// by row as `sweep` does.
fn serial(n: usize, iterations: usize) -> Vec<f64> {
    let s = n + 2;
    let mut old = vec![0.0; s * s];
    old[..s].fill(1.0);
    let mut new = old.clone();
    for _ in 0..iterations {
        for i in 1..=n {
            let (up, me, down) = (
                &old[(i - 1) * s..i * s],
                &old[i * s..(i + 1) * s],
                &old[(i + 1) * s..(i + 2) * s],
            );
            let out = &mut new[i * s..(i + 1) * s];
            for j in 1..=n {
                out[j] = 0.25 * (up[j] + down[j] + me[j - 1] + me[j + 1]);
            }
        }
        std::mem::swap(&mut old, &mut new);
    }
    (1..=n)
        .flat_map(|i| old[i * s + 1..i * s + 1 + n].to_vec())
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut arg = |default: usize| -> usize {
        args.next().map_or(default, |a| {
            a.parse().ok().filter(|&v| v > 0).unwrap_or_else(|| usage())
        })
    };
    let (n, iterations, locales) = (arg(1024), arg(100), arg(2));
    let compute = match args.next().as_deref() {
        None => true,
        Some("exchange") => false,
        Some(_) => usage(),
    };
    // Two grids of (n / locales + 2) x (n + 2) cells on each locale fit
    // the default heap (4 GiB of address space) up to n of about 16,000.
    let rt = cantus::Runtime::builder()
        .default_locales(locales)
        .build()
        .unwrap_or_else(|e| fail(e));
    let parts = rt
        .block_on(|| pgas::spmd(jacobi(n, iterations, compute)))
        .unwrap_or_else(|e| fail(e));
    let locales = cantus::num_locales();
    rt.shutdown();

    let mut grid = vec![0.0; n * n];
    for (first, rows, _, _) in &parts {
        grid[first * n..first * n + rows.len()].copy_from_slice(rows);
    }
    let (took, exchanging) = (parts[0].2, parts[0].3);
    if !compute {
        println!(
            "jacobi: {n} x {n}, {iterations} halo exchanges alone on {locales} locales: {:.2} us \
             per exchange",
            took * 1e6
        );
        return;
    }
    let start = Instant::now();
    let want = serial(n, iterations);
    let serial_took = start.elapsed().as_secs_f64() / iterations as f64;
    let same = grid
        .iter()
        .zip(&want)
        .all(|(a, b)| a.to_bits() == b.to_bits());
    assert!(same, "the grid matches the serial iterations bit for bit");
    println!(
        "jacobi: {n} x {n}, {iterations} iterations on {locales} locales: {:.1} us per \
         iteration ({:.1} us of it exchanging ghost rows); the grid matches the serial run \
         ({:.1} us per iteration) bit for bit; cell (1, n/2) {:.9e}",
        took * 1e6,
        exchanging * 1e6,
        serial_took * 1e6,
        grid[n.min(2) / 2 * n + n / 2]
    );
}

fn fail(e: cantus::Error) -> ! {
    eprintln!("jacobi: {e}");
    std::process::exit(1)
}

fn usage() -> ! {
    eprintln!("usage: jacobi [N] [ITERATIONS] [LOCALES] [exchange] (positive integers)");
    std::process::exit(2)
}
