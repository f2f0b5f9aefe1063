//! The C ABI end to end: builds the C library with cargo (release, in its
//! own target directory `target/capi`, so it never waits on the outer
//! cargo's lock), installs it with `scripts/install-c.sh` into a prefix
//! under that directory, then compiles every C program of `tests/c/` and
//! `examples/c/` with `gcc $(pkg-config --cflags --libs cantus)` and runs
//! it: plainly and under AddressSanitizer + UndefinedBehaviorSanitizer. It
//! links `libcantus.a` into a dynamic program and, with exactly the flags
//! of `pkg-config --static`, into a fully static one (`-static`); checks
//! that a counting sinc never finalised does not grow memory; and checks
//! that the headers and the library agree: every declared function is
//! exported and every exported function declared, with the parameter and
//! return types of its Rust definition (`static` inline helpers defined in
//! a header are not symbols and are left out of that comparison).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

struct Setup {
    prefix: PathBuf,
    bin: PathBuf,
    /// `pkg-config --cflags --libs cantus`, split.
    flags: Vec<String>,
}

fn repo() -> &'static Path {
    Path::new(REPO)
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Builds and installs the library once per test binary.
fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let target = repo().join("target/capi");
        let prefix = target.join("test-prefix");
        let bin = target.join("test-bin");
        std::fs::create_dir_all(&bin).unwrap();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = run(Command::new("sh")
            .arg(repo().join("scripts/install-c.sh"))
            .arg("--prefix")
            .arg(&prefix)
            .arg("--target-dir")
            .arg(&target)
            .env("CARGO", cargo));
        assert!(
            out.status.success(),
            "scripts/install-c.sh failed:\n{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        let pc_dir = prefix.join("lib/pkgconfig");
        let flags = match Command::new("pkg-config")
            .args(["--cflags", "--libs", "cantus"])
            .env("PKG_CONFIG_PATH", &pc_dir)
            .output()
        {
            Ok(o) => {
                assert!(o.status.success(), "pkg-config: {}", text(&o.stderr));
                text(&o.stdout)
            }
            // No pkg-config on this machine: read the .pc file ourselves.
            Err(_) => flags_from_pc(&pc_dir.join("cantus.pc"), false),
        };
        Setup {
            prefix,
            bin,
            flags: flags.split_whitespace().map(String::from).collect(),
        }
    })
}

/// Cflags and Libs (and Libs.private if `private`) of a .pc file, with
/// `${var}` substituted.
fn flags_from_pc(pc: &Path, private: bool) -> String {
    let mut vars = BTreeMap::new();
    let mut flags = String::new();
    let subst = |s: &str, vars: &BTreeMap<String, String>| {
        let mut s = s.to_string();
        for (k, v) in vars {
            s = s.replace(&format!("${{{k}}}"), v);
        }
        s
    };
    for line in std::fs::read_to_string(pc).unwrap().lines() {
        if let Some((k, v)) = line.split_once('=') {
            if !k.contains(':') {
                let v = subst(v, &vars);
                vars.insert(k.trim().to_string(), v);
            }
        } else if let Some(v) = line
            .strip_prefix("Cflags:")
            .or_else(|| line.strip_prefix("Libs:"))
            .or_else(|| line.strip_prefix("Libs.private:").filter(|_| private))
        {
            flags.push(' ');
            flags.push_str(&subst(v, &vars));
        }
    }
    flags
}

/// Compiles `src` (relative to the repo) into `target/capi/test-bin/name`.
fn compile(src: &str, name: &str, extra: &[&str]) -> PathBuf {
    let s = setup();
    let exe = s.bin.join(name);
    let out = run(Command::new("gcc")
        .args(["-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(repo().join("tests/c"))
        .arg(repo().join(src))
        .args(extra)
        .args(&s.flags)
        .arg("-lpthread")
        .arg("-o")
        .arg(&exe));
    assert!(
        out.status.success(),
        "gcc {src} failed:\n{}",
        text(&out.stderr)
    );
    exe
}

/// Runs a compiled program with a small, deterministic configuration.
/// Seconds a C test program may run before `timeout` kills it (a hang
/// must fail the test fast, never stall CI).
const PROGRAM_TIMEOUT_S: &str = "120";

fn execute(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    // `timeout` exits with 137 (128 + SIGKILL) if it had to kill.
    let mut cmd = Command::new("timeout");
    cmd.args(["-s", "KILL", PROGRAM_TIMEOUT_S])
        .arg(exe)
        .args(args)
        .env("CANTUS_WORKERS", "2")
        .env_remove("CANTUS_STACK_SIZE")
        .env_remove("CANTUS_WAIT_POLICY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    run(&mut cmd)
}

fn assert_ok(what: &str, out: &Output, expect: &str) {
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success() && stdout.contains(expect),
        "{what}: {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
}

/// Every installed header, relative to `include/`.
const HEADERS: [&str; 20] = [
    "cantus.h",
    "qthread/qthread.h",
    "qthread/sinc.h",
    "qthread/qloop.h",
    "qthread/barrier.h",
    "qthread/qtimer.h",
    "qthread/qutil.h",
    "qthread/cacheline.h",
    "qthread/io.h",
    "qthread/hash.h",
    "qthread/dictionary.h",
    "qthread/qarray.h",
    "qthread/allpairs.h",
    "qthread/wavefront.h",
    "qthread/qlfqueue.h",
    "qthread/qswsrqueue.h",
    "qthread/qdqueue.h",
    "qthread/qpool.h",
    "qthread/qalloc.h",
    "qthread/qt_syscalls.h",
];

const PROGRAMS: [(&str, &str, &str); 16] = [
    (
        "examples/c/fib.c",
        "fib",
        "fib(20) = 6765 on 2 shepherds (correct)",
    ),
    (
        "examples/c/producer_consumer.c",
        "producer_consumer",
        "(correct)",
    ),
    ("tests/c/test_cantus_api.c", "test_cantus_api", " 0 failed"),
    (
        "tests/c/test_qthread_api.c",
        "test_qthread_api",
        " 0 failed",
    ),
    (
        "tests/c/test_qthread_compat.c",
        "test_qthread_compat",
        " 0 failed",
    ),
    ("tests/c/test_qutil.c", "test_qutil", " 0 failed"),
    (
        "tests/c/test_qthread_state.c",
        "test_qthread_state",
        " 0 failed",
    ),
    (
        "tests/c/test_qthread_tasklocal.c",
        "test_qthread_tasklocal",
        " 0 failed",
    ),
    (
        "tests/c/test_qthread_sched.c",
        "test_qthread_sched",
        " 0 failed",
    ),
    ("tests/c/test_qthread_io.c", "test_qthread_io", " 0 failed"),
    ("tests/c/test_qthread_ds.c", "test_qthread_ds", " 0 failed"),
    (
        "tests/c/test_qthread_main.c",
        "test_qthread_main",
        " 0 failed",
    ),
    (
        "tests/c/test_qthread_dict_loops.c",
        "test_qthread_dict_loops",
        " 0 failed",
    ),
    (
        "tests/c/test_qthread_more.c",
        "test_qthread_more",
        " 0 failed",
    ),
    (
        "tests/c/test_qthread_qarray.c",
        "test_qthread_qarray",
        " 0 failed",
    ),
    (
        "examples/c/chapel_shim.c",
        "chapel_shim",
        "chapel shim: all checks passed (correct)",
    ),
];

#[test]
fn c_programs_compile_and_pass() {
    for (src, name, expect) in PROGRAMS {
        let exe = compile(src, name, &[]);
        assert_ok(name, &execute(&exe, &["20"], &[]), expect);
    }
}

/// ASan and UBSan both work with cantus's stack switching: the C code runs
/// on task stacks that cantus maps itself, and neither sanitizer reports
/// anything on it.
#[test]
fn c_programs_pass_under_address_and_undefined_sanitizers() {
    for (src, name, expect) in PROGRAMS {
        let name = format!("{name}_asan");
        let exe = compile(
            src,
            &name,
            &[
                "-fsanitize=address,undefined",
                "-fno-sanitize-recover=undefined",
                "-fno-omit-frame-pointer",
            ],
        );
        let out = execute(&exe, &["20"], &[("ASAN_OPTIONS", "detect_leaks=0")]);
        assert_ok(&name, &out, expect);
        let stderr = text(&out.stderr);
        assert!(
            !stderr.contains("runtime error") && !stderr.contains("Sanitizer"),
            "{name}: sanitizer report:\n{stderr}"
        );
    }
}

/// The C++ headers (`qthread/qloop.hpp`, `qthread/qthread.hpp`,
/// `qthread/syncvar.hpp`) in a program that runs: loops over function
/// objects visit every index once, and the syncvar class keeps the
/// full/empty protocol (a hand-off between tasks).
#[test]
fn cplusplus_headers_work() {
    let s = setup();
    let exe = s.bin.join("test_qthread_hpp");
    let out = run(Command::new("g++")
        .args(["-std=c++11", "-g", "-O1", "-Wall", "-Wextra", "-Werror"])
        .arg(repo().join("tests/cxx/test_qthread_hpp.cpp"))
        .args(&s.flags)
        .arg("-lpthread")
        .arg("-o")
        .arg(&exe));
    assert!(out.status.success(), "g++: {}", text(&out.stderr));
    assert_ok("test_qthread_hpp", &execute(&exe, &[], &[]), " 0 failed");
}

/// `pkg-config --libs --static cantus`, split (Libs and Libs.private).
fn static_flags() -> Vec<String> {
    let s = setup();
    let pc_dir = s.prefix.join("lib/pkgconfig");
    let out = Command::new("pkg-config")
        .args(["--cflags", "--libs", "--static", "cantus"])
        .env("PKG_CONFIG_PATH", &pc_dir)
        .output();
    let flags = match out {
        Ok(o) => {
            assert!(
                o.status.success(),
                "pkg-config --static: {}",
                text(&o.stderr)
            );
            text(&o.stdout)
        }
        // No pkg-config on this machine: read the .pc file ourselves.
        Err(_) => flags_from_pc(&pc_dir.join("cantus.pc"), true),
    };
    flags.split_whitespace().map(String::from).collect()
}

/// Links `src` with exactly `flags` (plus the test include directory).
fn link(src: &str, name: &str, flags: &[String], extra: &[&str]) -> PathBuf {
    let exe = setup().bin.join(name);
    let out = run(Command::new("gcc")
        .args(["-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(repo().join("tests/c"))
        .arg(repo().join(src))
        .args(flags)
        .args(extra)
        .arg("-o")
        .arg(&exe));
    assert!(
        out.status.success(),
        "gcc {src} {flags:?} {extra:?} failed:\n{}",
        text(&out.stderr)
    );
    exe
}

/// libcantus.a in an otherwise dynamic program: the library's path, then
/// the private libraries `pkg-config --static` lists.
#[test]
fn static_library_links() {
    let s = setup();
    let lib = s.prefix.join("lib/libcantus.a");
    let mut flags = vec![
        "-I".to_string(),
        s.prefix.join("include").to_str().unwrap().to_string(),
        lib.to_str().unwrap().to_string(),
    ];
    flags.extend(
        static_flags()
            .into_iter()
            .filter(|f| f.starts_with("-l") && f != "-lcantus"),
    );
    let exe = link("examples/c/fib.c", "fib_static", &flags, &[]);
    let ldd = run(Command::new("ldd").arg(&exe));
    assert!(
        !text(&ldd.stdout).contains("libcantus.so"),
        "linked the shared library instead of libcantus.a"
    );
    assert_ok("fib_static", &execute(&exe, &["18"], &[]), "(correct)");
}

/// A fully static program (`-static`: static glibc too), linked with
/// exactly what `pkg-config --cflags --libs --static cantus` says: the
/// unwinder must be libgcc_eh (libgcc_s has no static archive). The
/// Qthreads API test and the C API test run in it.
#[test]
fn fully_static_program_links_with_pkg_config_static() {
    let flags = static_flags();
    assert!(
        !flags.iter().any(|f| f == "-lgcc_s"),
        "Libs.private names -lgcc_s, which cannot be linked with -static: {flags:?}"
    );
    for (src, name) in [
        (
            "tests/c/test_qthread_api.c",
            "test_qthread_api_fully_static",
        ),
        ("tests/c/test_cantus_api.c", "test_cantus_api_fully_static"),
    ] {
        let exe = link(src, name, &flags, &["-static"]);
        let ldd = run(Command::new("ldd").arg(&exe));
        let says = format!("{}{}", text(&ldd.stdout), text(&ldd.stderr));
        assert!(
            says.contains("not a dynamic executable") || says.contains("statically linked"),
            "{name} is not fully static: ldd says {says}"
        );
        assert_ok(name, &execute(&exe, &["20"], &[]), " 0 failed");
    }
}

/// A counting sinc that is initialised, used and never finalised a
/// million times (as Qthreads' own programs do) does not grow the
/// program: the C program measures its resident set and fails if it grew
/// by 16 MiB or more. Not under ASan (its allocator keeps freed memory).
#[test]
fn counting_sinc_without_fini_does_not_grow_memory() {
    let exe = compile("tests/c/sinc_no_fini.c", "sinc_no_fini", &["-O2"]);
    let out = execute(&exe, &["1000000"], &[]);
    assert_ok("sinc_no_fini", &out, " 0 failed");
}

#[test]
fn benchmark_program_runs() {
    let exe = compile("examples/c/bench_capi.c", "bench_capi", &["-O2"]);
    let out = execute(&exe, &["20000"], &[]);
    assert_ok("bench_capi", &out, "capi_spawn_join ");
    let stdout = text(&out.stdout);
    for name in [
        "capi_spawn_join",
        "capi_feb_handoff",
        "capi_fork_readff",
        "capi_fork_sinc",
        "capi_qt_loop",
    ] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} line in:\n{stdout}"));
        let ns: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(ns > 0.0 && line.ends_with(" ns"), "{line}");
    }
}

/// A C program whose main thread waits on a word nobody will fill gets the
/// deadlock report and an abort, not a silent hang; one whose filler thread
/// declared itself busy (`cantus_outside_activity_begin`) is left alone.
#[test]
fn deadlock_in_c_is_reported() {
    let exe = compile("tests/c/deadlock.c", "deadlock", &[]);
    // A few runs here; scripts/deadlock-stress.sh does a thousand.
    for _ in 0..5 {
        let stderr = aborted_with_report(&exe, &[]);
        assert!(stderr.contains("outside thread"), "{stderr}");
        // Who waits on what (the word's address) and how to declare a
        // thread that will still fill it.
        assert!(stderr.contains(" at 0x"), "{stderr}");
        assert!(stderr.contains("cantus_outside_activity_begin"), "{stderr}");
    }
    // Main running shepherd 0 (after qthread_initialize): its wait runs
    // the worker's loop, which samples the runtime as a blocked outside
    // thread does; the report lists main and the task of shepherd 0.
    for _ in 0..3 {
        let stderr = aborted_with_report(&exe, &["main"]);
        assert!(stderr.contains("1 outside thread"), "{stderr}");
        assert!(
            stderr.contains("(the thread that runs worker 0)"),
            "{stderr}"
        );
        assert!(stderr.contains("(worker 0)"), "{stderr}");
        assert!(!stderr.contains("did not answer"), "{stderr}");
    }
    // A thread that declared itself busy keeps the detector quiet.
    let out = execute(&exe, &["busy"], &[("CANTUS_DEADLOCK_MS", "200")]);
    assert_ok("deadlock busy", &out, "read 7");
}

/// A traced Qthreads program: main, which runs shepherd 0, is task 1 on
/// worker 0's lane (begun as a root, stopped for each wait, resumed after
/// it, done at the end), and the tasks forked to shepherd 0 run on that
/// lane between its spans.
#[test]
fn main_task_in_a_trace() {
    let exe = compile("tests/c/trace_main.c", "trace_main", &[]);
    let path = std::env::temp_dir().join(format!("cantus-trace-main-{}.json", std::process::id()));
    let out = execute(&exe, &[], &[("CANTUS_TRACE", path.to_str().unwrap())]);
    assert_ok("trace_main", &out, "sum 6");
    let text = std::fs::read_to_string(&path).expect("the trace was written");
    let _ = std::fs::remove_file(&path);
    let v: serde_json::Value = serde_json::from_str(&text).expect("the trace is JSON");
    let events = v["traceEvents"].as_array().expect("traceEvents");
    let spans: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["cat"] == "task" && e["tid"] == 0)
        .collect();
    let main: Vec<&&serde_json::Value> = spans.iter().filter(|e| e["args"]["task"] == 1).collect();
    assert!(main.len() >= 4, "main's spans: {main:?}");
    assert_eq!(main[0]["args"]["how"], "root", "{main:?}");
    assert!(
        main[1..].iter().all(|e| e["args"]["how"] == "resumed"),
        "{main:?}"
    );
    assert_eq!(main.last().unwrap()["args"]["end"], "done", "{main:?}");
    assert!(
        main[..main.len() - 1]
            .iter()
            .all(|e| e["args"]["end"] == "blocked"),
        "{main:?}"
    );
    let forked = spans.iter().filter(|e| e["args"]["task"] != 1).count();
    assert!(forked >= 3, "the forks ran on worker 0's lane: {spans:?}");
}

/// Runs `exe` with a 200 ms grace period; asserts that it aborted with a
/// deadlock report, and returns its standard error.
fn aborted_with_report(exe: &Path, args: &[&str]) -> String {
    use std::os::unix::process::ExitStatusExt;
    let out = execute(exe, args, &[("CANTUS_DEADLOCK_MS", "200")]);
    let stderr = text(&out.stderr);
    let aborted = out.status.signal() == Some(6) || out.status.code() == Some(134);
    assert!(
        aborted,
        "the deadlock must abort, got {:?}: {stderr}",
        out.status
    );
    assert!(stderr.contains("cantus: deadlock"), "{stderr}");
    stderr
}

/// The headers also compile as C++ (extern "C", no C-only syntax in
/// declarations).
#[test]
fn headers_compile_as_cplusplus() {
    let s = setup();
    let src = s.bin.join("headers.cpp");
    std::fs::write(
        &src,
        "#include <cantus.h>\n#include <qthread/qthread.h>\n#include <qthread/sinc.h>\n\
         #include <qthread/qloop.h>\n#include <qthread/barrier.h>\n#include <qthread/qtimer.h>\n\
         #include <qthread/qutil.h>\n#include <qthread/cacheline.h>\n#include <qthread/io.h>\n\
         #include <qthread/qarray.h>\n#include <qthread/allpairs.h>\n#include <qthread/wavefront.h>\n\
         #include <qthread/qt_syscalls.h>\n\
         static aligned_t f(void *a) { return (aligned_t)(a != 0); }\n\
         int main() { bool b = true; aligned_t r, p = 0;\n\
         qthread_fork_precond(f, 0, &r, 1, &p); qtimer_destroy(qtimer_create());\n\
         return b + cantus_is_running() + (int)qthread_num_workers(); }\n",
    )
    .unwrap();
    let out = run(Command::new("g++")
        .args(["-Wall", "-Werror"])
        .arg(&src)
        .args(&s.flags)
        .arg("-o")
        .arg(s.bin.join("headers_cpp")));
    assert!(out.status.success(), "g++: {}", text(&out.stderr));
}

// ---- headers against the library and the Rust definitions ----

/// A function signature in canonical C spelling: return type and
/// parameter types, e.g. ("int", ["uint64_t*", "const uint64_t*"]).
type Sig = (String, Vec<String>);

/// Canonical C spelling of a type: typedef aliases resolved, pointer stars
/// attached, single spaces.
fn canon_c(ty: &str) -> String {
    let ty = ty.replace('*', " * ");
    let mut words: Vec<&str> = ty.split_whitespace().collect();
    for w in &mut words {
        *w = match *w {
            "aligned_t" => "uint64_t",
            "saligned_t" => "int64_t",
            "qthread_shepherd_id_t" | "qthread_worker_id_t" => "unsigned short",
            "qthread_queue_t" => "void *",
            "off_t" => "int64_t",
            _ => w,
        };
    }
    let mut s = words.join(" ");
    if s == "unsigned" {
        s = "unsigned int".into();
    }
    s = s.replace("unsigned *", "unsigned int *");
    s.replace(" *", "*")
}

/// The function declarations of a header (macros and comments removed).
fn header_functions(text: &str) -> BTreeMap<String, Sig> {
    let mut code = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("/*") {
        code.push_str(&rest[..i]);
        let j = rest[i..].find("*/").expect("unterminated comment") + i + 2;
        rest = &rest[j..];
    }
    code.push_str(rest);
    let mut lines = Vec::new();
    let mut continued = false;
    for line in code.lines() {
        let pre = continued || line.trim_start().starts_with('#');
        continued = pre && line.ends_with('\\');
        if !pre {
            lines.push(line);
        }
    }
    let code = without_static_functions(&lines.join("\n").replace("extern \"C\" {", ""));
    let mut fns = BTreeMap::new();
    for stmt in code.split([';', '{', '}']) {
        let stmt = stmt.trim();
        if stmt.starts_with("typedef") || !stmt.ends_with(')') {
            continue;
        }
        let Some(open) = stmt.find('(') else { continue };
        let head = stmt[..open].trim();
        let params = &stmt[open + 1..stmt.len() - 1];
        if params.contains('(') {
            continue;
        }
        let name_at = head
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(0, |i| i + 1);
        let (ret, name) = (&head[..name_at], &head[name_at..]);
        let params: Vec<String> = params
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty() && *p != "void")
            .map(|p| {
                // Drop the parameter's name (the last identifier).
                let cut = p
                    .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .map_or(0, |i| i + 1);
                canon_c(&p[..cut])
            })
            .collect();
        fns.insert(name.to_string(), (canon_c(ret), params));
    }
    fns
}

/// `code` without its `static` functions (inline helpers defined in a
/// header, such as `qthread_fork_precond`): they are not library symbols.
/// A definition is cut from `static` to its matching closing brace.
fn without_static_functions(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(i) = rest.find("static ") {
        let word_start = i == 0 || !rest[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_');
        out.push_str(&rest[..i]);
        if !word_start {
            out.push_str("static ");
            rest = &rest[i + "static ".len()..];
            continue;
        }
        let tail = &rest[i..];
        let (brace, semi) = (tail.find('{'), tail.find(';'));
        let end = match (brace, semi) {
            (Some(b), s) if s.is_none_or(|s| b < s) => {
                let mut depth = 0;
                let mut end = tail.len();
                for (k, c) in tail[b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (_, Some(s)) => s + 1,
            _ => tail.len(),
        };
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// C spelling of a Rust type used in the ABI.
fn rust_to_c(ty: &str) -> String {
    let ty = ty.trim();
    if let Some(t) = ty.strip_prefix("*const ") {
        return format!("const {}*", rust_to_c(t));
    }
    if let Some(t) = ty.strip_prefix("*mut ") {
        return format!("{}*", rust_to_c(t));
    }
    let c = match ty {
        "Code" | "c_int" => "int",
        "c_uint" => "unsigned int",
        "c_ushort" => "unsigned short",
        "c_ulong" => "unsigned long",
        "IntrospectiveState" => "enum introspective_state",
        "c_long" => "long",
        "c_char" => "char",
        "c_void" | "()" => "void",
        "bool" => "bool",
        "u8" => "uint8_t",
        "u64" => "uint64_t",
        "i64" => "int64_t",
        "f32" => "float",
        "f64" => "double",
        "usize" => "size_t",
        "CantusConfig" => "cantus_config_t",
        "CantusSync" => "cantus_sync_t",
        "CantusCounts" => "cantus_counts_t",
        "CantusTaskList" => "cantus_task_list_t",
        "CantusTaskFn" => "cantus_task_fn",
        "CantusIndexFn" => "cantus_index_fn",
        "QthreadF" => "qthread_f",
        "Syncvar" => "syncvar_t",
        "QthreadSpinlock" => "qthread_spinlock_t",
        "QtSinc" => "qt_sinc_t",
        "QtSincOpF" => "qt_sinc_op_f",
        "QtLoopF" => "qt_loop_f",
        "QtLooprF" => "qt_loopr_f",
        "QtBarrier" => "qt_barrier_t",
        "QtBarrierBtype" => "qt_barrier_btype",
        "QtBarrierDtype" => "qt_barrier_dtype",
        "QtimerT" => "qtimer_t",
        "QtDictionary" => "qt_dictionary",
        "DictIterator" => "qt_dictionary_iterator",
        "ListEntry" => "list_entry",
        "QtDictKeyEqualsF" => "qt_dict_key_equals_f",
        "QtDictHashF" => "qt_dict_hash_f",
        "QtDictCleanupF" => "qt_dict_cleanup_f",
        "QqloopHandle" => "qqloop_handle_t",
        "QtLoopQueueType" => "qt_loop_queue_type",
        "QArray" => "qarray",
        "DistributionT" => "distribution_t",
        "QaLoopF" => "qa_loop_f",
        "QaLooprF" => "qa_loopr_f",
        "QaCloopF" => "qa_cloop_f",
        "QtAccumF" => "qt_accum_f",
        "DistF" => "dist_f",
        "DistOutF" => "dist_out_f",
        "WaveCompF" => "wave_comp_f",
        "WavefrontLattice" => "qt_wavefront_lattice",
        "IntRows" => "int* const*",
        "QlfQueue" => "qlfqueue_t",
        "QswsrQueue" => "qswsrqueue_t",
        "QdQueue" => "qdqueue_t",
        "Qpool" => "qpool",
        "StatMap" => "mapinfo_t",
        "DynMap" => "dynmapinfo_t",
        "SsizeT" => "ssize_t",
        "PidT" => "pid_t",
        "SocklenT" => "socklen_t",
        "NfdsT" => "nfds_t",
        "Sockaddr" => "struct sockaddr",
        "Pollfd" => "struct pollfd",
        "FdSet" => "fd_set",
        "Timeval" => "struct timeval",
        "Rusage" => "struct rusage",
        other => panic!("tests/c_abi.rs: no C spelling for Rust type `{other}`; add it"),
    };
    c.to_string()
}

/// Every `extern "C" fn` defined under src/ffi, with its C signature.
fn rust_functions() -> BTreeMap<String, Sig> {
    let mut files = vec![repo().join("src/ffi")];
    let mut fns = BTreeMap::new();
    while let Some(p) = files.pop() {
        if p.is_dir() {
            files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if p.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let src = std::fs::read_to_string(&p).unwrap();
        let mut rest = src.as_str();
        while let Some(i) = rest.find("extern \"C\" fn ") {
            rest = &rest[i + "extern \"C\" fn ".len()..];
            let open = rest.find('(').unwrap();
            let name = rest[..open].trim().to_string();
            let mut depth = 0;
            let mut close = 0;
            for (k, c) in rest[open..].char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            close = open + k;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let params: Vec<String> = split_top_level(&rest[open + 1..close])
                .into_iter()
                .map(|p| {
                    let ty = p.split_once(':').expect("param: type").1;
                    rust_to_c(ty)
                })
                .collect();
            let after = &rest[close + 1..rest[close..].find('{').unwrap() + close];
            let ret = after
                .trim()
                .strip_prefix("->")
                .map_or("void".to_string(), rust_to_c);
            fns.insert(name, (ret, params));
        }
    }
    fns
}

fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' | '<' => depth += 1,
            ')' | '>' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

#[test]
fn headers_match_exported_symbols_and_rust_signatures() {
    let s = setup();
    let mut declared = BTreeMap::new();
    for h in HEADERS {
        let text = std::fs::read_to_string(repo().join("include").join(h)).unwrap();
        for (name, sig) in header_functions(&text) {
            assert!(
                declared.insert(name.clone(), sig).is_none(),
                "{name} declared twice"
            );
        }
    }
    assert!(declared.len() > 60, "parsed only {declared:?}");

    let nm = run(Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(s.prefix.join("lib/libcantus.so")));
    assert!(nm.status.success(), "nm: {}", text(&nm.stderr));
    let exported: BTreeSet<String> = text(&nm.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[1] == "T").then(|| f[2].to_string())
        })
        .collect();
    let names: BTreeSet<String> = declared.keys().cloned().collect();
    let undeclared: Vec<_> = exported.difference(&names).collect();
    let missing: Vec<_> = names.difference(&exported).collect();
    assert!(
        undeclared.is_empty(),
        "exported by libcantus.so but not declared in include/: {undeclared:?}"
    );
    assert!(
        missing.is_empty(),
        "declared in include/ but not exported by libcantus.so: {missing:?}"
    );

    let defined = rust_functions();
    assert_eq!(
        defined.keys().collect::<BTreeSet<_>>(),
        declared.keys().collect::<BTreeSet<_>>(),
        "extern \"C\" functions in src/ffi and declarations in include/ differ"
    );
    for (name, sig) in &declared {
        assert_eq!(
            &defined[name], sig,
            "{name}: Rust definition (left) and header declaration (right) differ"
        );
    }
}

#[test]
fn header_parser_reads_declarations() {
    let fns = header_functions(
        "/* c */ #define X(a) \\\n  foo(a)\nint f(const uint64_t *w, uint64_t v);\n\
         typedef void (*g)(void *);\nvoid h(void);\nunsigned q(aligned_t *d);\n\
         static inline int s(int n, ...) { if (n) { return g2(n); } while (n) n--; return 0; }\n\
         static int t(void);\nint nonstatic_;",
    );
    assert_eq!(
        fns["f"],
        (
            "int".into(),
            vec!["const uint64_t*".into(), "uint64_t".into()]
        )
    );
    assert_eq!(fns["h"], ("void".into(), vec![]));
    assert_eq!(fns["q"], ("unsigned int".into(), vec!["uint64_t*".into()]));
    assert_eq!(fns.len(), 3);
}
