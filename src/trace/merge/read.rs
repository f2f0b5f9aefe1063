//! Reading the locales' part files: their headers, lanes and events,
//! and finding the newest parts of a trace.

use super::super::Event;
use super::super::lane::{
    self, FileHeader, HEADER_BYTES, LaneMeta, MAGIC, NAME_BYTES, PATH_BYTES, PATH_OFFSET, VERSION,
};
use super::super::private::Dir;
use std::path::{Path, PathBuf};

/// One lane of a part file, as read.
#[derive(Debug)]
pub struct Lane {
    /// The thread's name ("worker 0", a thread's name).
    pub name: String,
    /// Its events, in the order recorded (times never decrease).
    pub events: Vec<Event>,
    /// Events not recorded because the lane was full.
    pub dropped: u64,
    /// Whether it is a worker's lane.
    pub worker: bool,
}

/// One locale's part file, as read.
#[derive(Debug)]
pub struct Part {
    /// Its locale.
    pub locale: usize,
    /// Locales of the job.
    pub locales: usize,
    /// Its lanes (workers first).
    pub lanes: Vec<Lane>,
    /// Whether the locale stopped recording cleanly (else it died, or
    /// still runs).
    pub complete: bool,
    /// When it started recording.
    pub start_ns: u64,
    /// When it stopped (0 if it did not stop).
    pub end_ns: u64,
    /// Added to its times to align them with locale 0's clock.
    pub clock_offset_ns: i64,
    /// How far that offset may be off.
    pub clock_error_ns: u64,
    /// Events of threads that found no lane.
    pub unlaned: u64,
    /// The process that recorded it.
    pub pid: u32,
    /// The job it belongs to (the number in its directory's name).
    pub job: u64,
    /// The absolute path of the trace it was recorded for.
    pub trace: PathBuf,
}

pub(super) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

pub(super) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Reads a part file; an error says what is wrong with it.
pub fn read_part(path: &Path) -> Result<Part, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    read_part_with(&file, path, true)
}

/// Reads the part file `file` (at `path`): its header and lanes'
/// records, and their events if `with_events` (else every lane reads as
/// empty): only what was written is read, never the sparse file's
/// unwritten space.
pub(super) fn read_part_with(
    file: &std::fs::File,
    path: &Path,
    with_events: bool,
) -> Result<Part, String> {
    use std::os::unix::fs::FileExt;
    let io = |e: std::io::Error| format!("{}: {e}", path.display());
    let size = file.metadata().map_err(io)?.len() as usize;
    let mut b = vec![0u8; HEADER_BYTES.min(size)];
    file.read_exact_at(&mut b, 0).map_err(io)?;
    let bad = |what: &str| format!("{}: not a cantus trace part: {what}", path.display());
    if b.len() < HEADER_BYTES || b[..8] != MAGIC {
        return Err(bad("no header"));
    }
    if u32_at(&b, 8) != VERSION {
        return Err(bad(&format!("format version {}", u32_at(&b, 8))));
    }
    // FileHeader's fields, in order (repr(C), little-endian).
    let (locale, locales, workers) = (u32_at(&b, 12), u32_at(&b, 16), u32_at(&b, 20));
    let (lanes_max, lane_events) = (u32_at(&b, 24) as usize, u32_at(&b, 28) as usize);
    let start_ns = u64_at(&b, 32);
    let clock_offset_ns = u64_at(&b, 40) as i64;
    let lanes_used = u32_at(&b, 48) as usize;
    let done = u32_at(&b, 52);
    let end_ns = u64_at(&b, 56);
    let unlaned = u64_at(&b, 64);
    let tick0 = u64_at(&b, 72);
    let mut ns_per_tick = f64::from_bits(u64_at(&b, 80));
    let tick_end = u64_at(&b, 88);
    let clock_error_ns = u64_at(&b, 96);
    let pid = u32_at(&b, std::mem::offset_of!(FileHeader, pid));
    let path_len = u32_at(&b, std::mem::offset_of!(FileHeader, path_len)) as usize;
    let job = u64_at(&b, std::mem::offset_of!(FileHeader, job));
    if path_len > PATH_BYTES {
        return Err(bad("trace path"));
    }
    let trace = PathBuf::from(
        <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(
            &b[PATH_OFFSET..PATH_OFFSET + path_len],
        ),
    );
    debug_assert_eq!(std::mem::offset_of!(FileHeader, unlaned), 64);
    debug_assert_eq!(std::mem::offset_of!(FileHeader, tick_end), 88);
    if done == 1 && tick_end > tick0 && end_ns > start_ns {
        ns_per_tick = (end_ns - start_ns) as f64 / (tick_end - tick0) as f64;
    }
    if !ns_per_tick.is_finite() || ns_per_tick <= 0.0 {
        return Err(bad("clock rate"));
    }
    let to_ns =
        |t: u64| start_ns.wrapping_add(((t as f64 - tick0 as f64) * ns_per_tick) as i64 as u64);
    if lanes_max != lane::LANES_MAX || lane_events == 0 {
        return Err(bad("lane geometry"));
    }
    let mut lanes = Vec::new();
    for i in 0..lanes_used.min(lanes_max) {
        let m = lane::meta_offset(i);
        let len = u64_at(&b, m) as usize;
        let dropped = u64_at(&b, m + 8);
        let name_bytes = &b[m + 16..m + 16 + NAME_BYTES];
        debug_assert_eq!(std::mem::offset_of!(LaneMeta, name), 16);
        let end = name_bytes
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(NAME_BYTES);
        let name = String::from_utf8_lossy(&name_bytes[..end]).into_owned();
        if len > lane_events {
            return Err(bad(&format!("lane {i} claims {len} events")));
        }
        let at = lane::events_offset(i, lane_events);
        let len = if with_events { len } else { 0 };
        if at + len * 32 > size {
            return Err(bad(&format!("lane {i} is cut short")));
        }
        let mut raw = vec![0u8; len * 32];
        file.read_exact_at(&mut raw, at as u64).map_err(io)?;
        let events: Vec<Event> = raw
            .chunks_exact(32)
            .map(|r| Event {
                t: to_ns(u64_at(r, 0)),
                kind: u16::from_le_bytes([r[8], r[9]]),
                small: u16::from_le_bytes([r[10], r[11]]),
                word: u32_at(r, 12),
                a: u64_at(r, 16),
                b: u64_at(r, 24),
            })
            .collect();
        if name.is_empty() && events.is_empty() {
            continue; // a worker lane never claimed
        }
        lanes.push(Lane {
            name,
            events,
            dropped,
            worker: i < workers as usize,
        });
    }
    Ok(Part {
        locale: locale as usize,
        locales: locales as usize,
        lanes,
        complete: done == 1,
        start_ns,
        end_ns,
        clock_offset_ns,
        clock_error_ns,
        unlaned,
        pid,
        job,
        trace,
    })
}

/// Reads every part file in the parts directory `dir` (`locale-N.bin`),
/// by locale; a locale whose file is missing or unreadable is reported.
/// The directory must be this user's and private, and each part a
/// regular file of this user (never a link): anything else is reported
/// and not read (`private.rs`).
pub fn read_parts(dir: &Path) -> (Vec<Part>, Vec<String>) {
    match Dir::open(dir) {
        Ok(d) => read_parts_in(&d, true),
        Err(e) => (Vec::new(), vec![e]),
    }
}

/// How many locales' parts in `dir` are complete (read from the headers
/// only).
pub(crate) fn parts_complete(dir: &Path) -> usize {
    let Ok(d) = Dir::open(dir) else {
        return 0;
    };
    read_parts_in(&d, false)
        .0
        .iter()
        .filter(|p| p.complete)
        .count()
}

pub(super) fn read_parts_in(dir: &Dir, with_events: bool) -> (Vec<Part>, Vec<String>) {
    let mut parts: Vec<Part> = Vec::new();
    let mut problems = Vec::new();
    let mut names: Vec<(usize, String)> = match std::fs::read_dir(&dir.path) {
        Ok(d) => d
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|n| {
                let l = n
                    .strip_prefix("locale-")?
                    .strip_suffix(".bin")?
                    .parse()
                    .ok()?;
                Some((l, n))
            })
            .collect(),
        Err(e) => {
            problems.push(format!("{}: {e}", dir.path.display()));
            return (parts, problems);
        }
    };
    names.sort();
    for (locale, name) in names {
        let path = dir.path.join(&name);
        let read = dir
            .open_file(&name)
            .and_then(|f| read_part_with(&f, &path, with_events));
        match read {
            Ok(p) if p.locale != locale => problems.push(format!(
                "{}: the part of locale {}, not {locale}",
                path.display(),
                p.locale
            )),
            Ok(p) => match parts.first() {
                Some(first) if (first.job, &first.trace) != (p.job, &p.trace) => {
                    problems.push(format!(
                        "{}: a part of another job (of {}), not merged",
                        path.display(),
                        p.trace.display()
                    ))
                }
                _ => parts.push(p),
            },
            Err(e) => problems.push(e),
        }
    }
    if let Some(n) = parts.first().map(|p| p.locales) {
        for l in 0..n {
            if !parts.iter().any(|p| p.locale == l) {
                problems.push(format!("locale {l}: no part file"));
            }
        }
    }
    (parts, problems)
}

/// This user's parts directories of the trace `path`, newest first, and
/// what was passed over: every directory named as one of its parts
/// directories is opened without following a link and used only if it is
/// this user's and private and its parts record this trace; one that is
/// not is named in `ignored` with why.
#[derive(Debug, Default)]
pub struct Found {
    /// The trace's parts directories, newest first.
    pub dirs: Vec<PathBuf>,
    /// Directories of the trace's names that are not used, and why.
    pub ignored: Vec<String>,
}

/// Finds the parts directories of the trace `path` ([`Found`]), in the
/// directory where its parts are made (`CANTUS_TRACE_PARTS`, else
/// `/dev/shm`, else the trace's own directory).
pub fn find_parts(path: &Path) -> Found {
    let mut found = Found::default();
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let base = lane::parts_base(&absolute);
    let prefix = lane::parts_prefix(&absolute);
    let Ok(entries) = std::fs::read_dir(&base) else {
        return found;
    };
    let mut dirs = Vec::new();
    for e in entries.filter_map(Result::ok) {
        if !e.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        match Dir::open(&e.path()) {
            Ok(d) => {
                let (parts, _) = read_parts_in(&d, false);
                if parts.iter().any(|p| p.trace == absolute) {
                    dirs.push((d.changed_ns, d.path));
                }
            }
            Err(why) => found.ignored.push(why),
        }
    }
    dirs.sort_by(|a, b| b.cmp(a));
    found.dirs = dirs.into_iter().map(|(_, d)| d).collect();
    found
}

/// This user's parts directories of the trace `path`, newest first
/// ([`find_parts`]).
pub fn parts_dirs(path: &Path) -> Vec<PathBuf> {
    find_parts(path).dirs
}

/// Removes the parts directory `dir`, once checked to be this user's
/// private directory (a link there is not followed).
pub fn remove_parts(dir: &Path) -> Result<(), String> {
    Dir::open(dir)?;
    std::fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))
}
