//! Compiles `c/spawn_omp.c` (the OpenMP peer of the spawn benchmark) with
//! `gcc -O2 -fopenmp` into a separate executable in `OUT_DIR`, and passes
//! its path to the bench as `CANTUS_BENCH_OPENMP` (empty if it could not
//! be built: the bench then reports the OpenMP peer as unavailable).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    let source = manifest.join("c").join("spawn_omp.c");
    let exe = out_dir.join("spawn_omp");
    println!("cargo:rerun-if-changed={}", source.display());
    let result = Command::new("gcc")
        .args(["-O2", "-fopenmp", "-Wall", "-o"])
        .arg(&exe)
        .arg(&source)
        .output();
    let path = match result {
        Ok(out) if out.status.success() => exe.display().to_string(),
        Ok(out) => {
            println!(
                "cargo:warning=gcc -fopenmp failed ({}); the OpenMP peer will be unavailable",
                out.status
            );
            for line in String::from_utf8_lossy(&out.stderr).lines().take(10) {
                println!("cargo:warning=gcc: {line}");
            }
            String::new()
        }
        Err(e) => {
            println!("cargo:warning=cannot run gcc ({e}); the OpenMP peer will be unavailable");
            String::new()
        }
    };
    println!("cargo:rustc-env=CANTUS_BENCH_OPENMP={path}");
    build_suite_peer(&manifest, &out_dir);
    build_mpi_peer(&manifest, &out_dir);
}

/// Compiles `c/mpi_pingpong.c` (the MPI peer of `cantus-bench comm`) with
/// `mpicc -O2`, if an MPI is installed; passes its path as
/// `CANTUS_BENCH_MPI` (empty otherwise: the bench then says the MPI peer
/// is unavailable).
fn build_mpi_peer(manifest: &std::path::Path, out_dir: &std::path::Path) {
    let source = manifest.join("c").join("mpi_pingpong.c");
    let exe = out_dir.join("mpi_pingpong");
    println!("cargo:rerun-if-changed={}", source.display());
    let path = match Command::new("mpicc")
        .args(["-O2", "-Wall", "-o"])
        .arg(&exe)
        .arg(&source)
        .output()
    {
        Ok(out) if out.status.success() => exe.display().to_string(),
        _ => String::new(),
    };
    println!("cargo:rustc-env=CANTUS_BENCH_MPI={path}");
}

/// Compiles `c/suite/suite_omp.c` (the OpenMP peer of `cantus-bench
/// suite`) with `gcc -O3 -fopenmp`: opt-level 3 and the baseline x86-64
/// target, as the release profile compiles the Rust side (no
/// `-march=native`). Passes its path as `CANTUS_BENCH_SUITE_OMP` (empty
/// if it could not be built).
fn build_suite_peer(manifest: &std::path::Path, out_dir: &std::path::Path) {
    let source = manifest.join("c").join("suite").join("suite_omp.c");
    let exe = out_dir.join("suite_omp");
    println!("cargo:rerun-if-changed={}", source.display());
    let result = Command::new("gcc")
        .args(["-O3", "-fopenmp", "-Wall", "-Wextra", "-o"])
        .arg(&exe)
        .arg(&source)
        .arg("-lm")
        .output();
    let path = match result {
        Ok(out) if out.status.success() => exe.display().to_string(),
        Ok(out) => {
            println!(
                "cargo:warning=gcc -fopenmp failed on suite_omp.c ({}); the suite's OpenMP peer will be unavailable",
                out.status
            );
            for line in String::from_utf8_lossy(&out.stderr).lines().take(10) {
                println!("cargo:warning=gcc: {line}");
            }
            String::new()
        }
        Err(e) => {
            println!(
                "cargo:warning=cannot run gcc ({e}); the suite's OpenMP peer will be unavailable"
            );
            String::new()
        }
    };
    println!("cargo:rustc-env=CANTUS_BENCH_SUITE_OMP={path}");
}
