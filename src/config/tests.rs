//! The configuration's tests: defaults, the environment over the
//! builder, launchers' shares, and the messages of bad values.

use super::cpus::launcher_cpu_share;
use super::env::parse_size;
use super::*;
use crate::error::ErrorKind;

fn with_env(vars: &[(&str, &str)]) -> Result<Config, Error> {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    Builder::new()
        .resolve(&move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
}

#[test]
fn defaults_follow_the_affinity_mask() {
    let c = with_env(&[]).unwrap();
    assert_eq!(c.workers, affinity_cpus().len());
    assert_eq!(c.stack_size, DEFAULT_STACK_SIZE);
    assert_eq!(c.wait_policy, WaitPolicy::Hybrid);
    assert!(c.pin);
}

#[test]
fn environment_overrides_builder() {
    let c = Builder::new()
        .workers(3)
        .resolve(&|n| (n == "CANTUS_WORKERS").then(|| "5".to_string()))
        .unwrap();
    assert_eq!(c.workers, 5);
    let c = with_env(&[
        ("CANTUS_STACK_SIZE", "64k"),
        ("CANTUS_WAIT_POLICY", "Active"),
        ("CANTUS_PIN", "no"),
    ])
    .unwrap();
    assert_eq!(c.stack_size, 64 * 1024);
    assert_eq!(c.wait_policy, WaitPolicy::Active);
    assert!(!c.pin);
    let c = with_env(&[("CANTUS_WAIT_POLICY", "passive"), ("CANTUS_SPIN", "77")]).unwrap();
    assert_eq!(c.spin, 0, "passive never spins");
}

#[test]
fn a_rank_s_share_before_mpi_comes_from_its_launcher() {
    let cpus: Vec<usize> = (0..16).collect();
    let with = |vars: &'static [(&'static str, &'static str)]| {
        launcher_cpu_share(
            &move |n| {
                vars.iter()
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| v.to_string())
            },
            &cpus,
        )
    };
    // Open MPI: 2 ranks on the node share its 16 CPUs.
    assert_eq!(
        with(&[
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2")
        ]),
        Some(8)
    );
    // Hydra and PMIx say it in their own words.
    assert_eq!(
        with(&[("MPI_LOCALRANKID", "0"), ("MPI_LOCALNRANKS", "16")]),
        Some(1)
    );
    assert_eq!(
        with(&[("PMIX_LOCAL_RANK", "2"), ("PMIX_LOCAL_SIZE", "3")]),
        Some(6)
    );
    // A launcher that does not say, or says nonsense: unknown.
    assert_eq!(with(&[]), None);
    assert_eq!(with(&[("OMPI_COMM_WORLD_LOCAL_RANK", "0")]), None);
    assert_eq!(
        with(&[
            ("OMPI_COMM_WORLD_LOCAL_RANK", "4"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "4")
        ]),
        None
    );
}

#[test]
fn bad_values_name_the_variable_and_what_it_accepts() {
    for (var, val, accepts) in [
        ("CANTUS_WORKERS", "two", "positive integer"),
        ("CANTUS_WORKERS", "0", "positive integer"),
        ("CANTUS_STACK_SIZE", "12Q", "K, M or G"),
        ("CANTUS_STACK_SIZE", "1K", "from 16K"),
        ("CANTUS_WAIT_POLICY", "lazy", "active, passive, hybrid"),
        ("CANTUS_SPIN", "-1", "integer from 0"),
        ("CANTUS_MAX_THREADS", "x", "positive integer"),
        ("CANTUS_PIN", "maybe", "true/false"),
        ("CANTUS_DEADLOCK_MS", "soon", "milliseconds"),
        ("CANTUS_CHANT_POLL", "tasks", "scheduler or task"),
        ("CANTUS_MPI_PROGRESS", "progress", "auto, inline or thread"),
        ("CANTUS_MPI_NODES", "0", "positive integer"),
        ("CANTUS_MPI_NODES", "two", "positive integer"),
        (
            "CANTUS_PGAS",
            "mpi",
            "shared (global memory every locale maps) or messages",
        ),
    ] {
        let e = with_env(&[(var, val)]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidConfig);
        let msg = e.to_string();
        assert!(msg.contains(var) && msg.contains(accepts), "{msg}");
    }
}

#[test]
fn messages_are_sentences_and_debug_adds_the_kind() {
    let e = with_env(&[("CANTUS_WORKERS", "abc")]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "CANTUS_WORKERS=\"abc\" is not valid: cantus accepts a positive integer up to 65536"
    );
    assert_eq!(format!("{e:?}"), format!("Error(InvalidConfig): {e}"));
    let e = Builder::new()
        .ignore_environment()
        .stack_size(100)
        .resolve(&|_| None)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "the stack size 100 (Builder::stack_size) is not valid: cantus accepts a size in \
         bytes from 16K (16384) to 1G (1073741824)"
    );
    let e = Builder::new()
        .ignore_environment()
        .max_threads(0)
        .resolve(&|_| None)
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("the thread limit 0 (Builder::max_threads) is not valid"),
        "{e}"
    );
    let e = with_env(&[("CANTUS_WORKERS", "8"), ("CANTUS_MAX_THREADS", "4")]).unwrap_err();
    assert_eq!(
        format!("{e:?}"),
        "Error(TooManyThreads): cantus needs 8 worker threads but the thread limit is 4: \
         lower CANTUS_WORKERS or raise CANTUS_MAX_THREADS (no thread was started)"
    );
}

#[test]
fn thread_limit_is_checked_before_start() {
    let e = with_env(&[("CANTUS_WORKERS", "8"), ("CANTUS_MAX_THREADS", "4")]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooManyThreads);
    assert!(e.to_string().contains("CANTUS_MAX_THREADS"));
}

#[test]
fn heap_bytes_default_validate_and_round_to_pages() {
    assert_eq!(with_env(&[]).unwrap().heap_bytes, DEFAULT_HEAP_BYTES);
    let c = with_env(&[("CANTUS_HEAP_BYTES", "1G")]).unwrap();
    assert_eq!(c.heap_bytes, 1 << 30);
    let e = with_env(&[("CANTUS_HEAP_BYTES", "4K")]).unwrap_err();
    assert!(
        e.to_string()
            .contains("CANTUS_HEAP_BYTES=\"4K\" is not valid")
            && e.to_string().contains("from 64K to 64G"),
        "{e}"
    );
    let e = Builder::new()
        .ignore_environment()
        .heap_bytes(1000)
        .resolve(&|_| None)
        .unwrap_err();
    assert!(e.to_string().contains("Builder::heap_bytes"), "{e}");
    let c = Builder::new()
        .ignore_environment()
        .heap_bytes(100_000)
        .resolve(&|_| None)
        .unwrap();
    assert_eq!(c.heap_bytes % page_size(), 0);
    assert!(c.heap_bytes >= 100_000);
}

#[test]
fn ring_bytes_accept_4k_to_1g_and_blame_the_setting_given() {
    assert_eq!(
        with_env(&[("CANTUS_RING_BYTES", "4K")]).unwrap().ring_bytes,
        4096
    );
    assert_eq!(
        with_env(&[("CANTUS_RING_BYTES", "1G")]).unwrap().ring_bytes,
        1 << 30
    );
    for bad in ["3000", "2K", "96K", "2G"] {
        let e = with_env(&[("CANTUS_RING_BYTES", bad)])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!("CANTUS_RING_BYTES=\"{bad}\" is not valid"))
                && e.contains("4K")
                && !e.contains("Builder::"),
            "{e}"
        );
    }
    let e = Builder::new()
        .ignore_environment()
        .ring_bytes(3 << 10)
        .resolve(&|_| None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("Builder::ring_bytes") && e.contains("from 4K to 1G"),
        "{e}"
    );
}

#[test]
fn rendezvous_bytes_are_off_or_1m_to_1g_and_blame_the_setting_given() {
    let c = with_env(&[]).unwrap();
    assert_eq!(c.rendezvous_bytes, DEFAULT_RENDEZVOUS_BYTES);
    for (v, want) in [("0", 0), ("1M", 1 << 20), ("8M", 8 << 20), ("1G", 1 << 30)] {
        assert_eq!(
            with_env(&[("CANTUS_RENDEZVOUS_BYTES", v)])
                .unwrap()
                .rendezvous_bytes,
            want
        );
    }
    for bad in ["512K", "3M", "2G", "lots", "-1"] {
        let e = with_env(&[("CANTUS_RENDEZVOUS_BYTES", bad)])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!("CANTUS_RENDEZVOUS_BYTES=\"{bad}\" is not valid"))
                && !e.contains("Builder::"),
            "{e}"
        );
    }
    for (bytes, ok) in [(0, true), (4 << 20, true), (3 << 20, false), (4096, false)] {
        let r = Builder::new()
            .ignore_environment()
            .rendezvous_bytes(bytes)
            .resolve(&|_| None);
        match (r, ok) {
            (Ok(c), true) => assert_eq!(c.rendezvous_bytes, bytes),
            (Err(e), false) => assert!(
                e.to_string().contains("Builder::rendezvous_bytes")
                    && e.to_string().contains("0 (off)"),
                "{e}"
            ),
            (r, _) => panic!("{bytes}: {r:?}"),
        }
    }
}

#[test]
fn the_pgas_memory_is_chosen_by_name() {
    assert_eq!(with_env(&[]).unwrap().pgas, None);
    let c = with_env(&[("CANTUS_PGAS", " Messages")]).unwrap();
    assert_eq!(c.pgas, Some(PgasMemory::Messages));
    let c = with_env(&[("CANTUS_PGAS", "shared")]).unwrap();
    assert_eq!(c.pgas, Some(PgasMemory::Shared));
    let e = with_env(&[("CANTUS_PGAS", "")]).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("CANTUS_PGAS=\"\" is not valid: cantus accepts shared"),
        "{e}"
    );
}

#[test]
fn sizes_parse_with_suffixes() {
    assert_eq!(parse_size("X", "16384").unwrap(), 16384);
    assert_eq!(parse_size("X", "1M").unwrap(), 1 << 20);
    assert_eq!(parse_size("X", "2MiB").unwrap(), 2 << 20);
    assert_eq!(parse_size("X", "1g").unwrap(), 1 << 30);
    assert!(parse_size("X", "2G").is_err());
    assert!(parse_size("X", "99999999999999999999K").is_err());
}
