//! `cantus-bench`: benchmarks of cantus side by side with its peers
//! (GNU OpenMP, rayon, a thread-per-task baseline), measured in one run.
//!
//! Every figure is printed as `<name> <value> <unit>`, and every peer
//! comparison as `<name>/<peer> <ratio>` (cantus time / peer time, so
//! below 1 means cantus is faster).

fn usage() -> ! {
    eprintln!("usage: cantus-bench <micro|apps|all> [options]");
    std::process::exit(2);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("micro") | Some("apps") | Some("all") => {
            eprintln!("cantus-bench: not yet implemented");
            std::process::exit(2);
        }
        _ => usage(),
    }
}
