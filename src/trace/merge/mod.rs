//! Reading locales' part files and writing one Chrome trace-event JSON
//! file (`README.md`, "The merged file"), with each worker's utilisation.
//! A file per role: `read.rs` (part files), `chrome.rs` (the JSON),
//! `summary.rs` (the utilisation table); merging a directory or a job's
//! parts here.

use super::lane;
use super::private::replace_file;
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};

mod chrome;
mod read;
mod summary;
#[cfg(test)]
mod tests;

pub use chrome::to_json;
pub(crate) use read::parts_complete;
pub use read::{Found, Lane, Part, find_parts, parts_dirs, read_part, read_parts, remove_parts};
pub use summary::{LaneUse, Summary};

/// Merges this user's newest parts of the trace `path` ([`find_parts`])
/// into the Chrome JSON file `path` (replacing it), and returns what it
/// found. Parts stay in place.
pub fn merge(path: &Path) -> Result<Summary, String> {
    let found = find_parts(path);
    let dir = found.dirs.first().ok_or_else(|| no_parts(path, &found))?;
    merge_dir(dir, Some(path))
}

/// The error when the trace `path` has no parts of this user.
fn no_parts(path: &Path, found: &Found) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut e = format!(
        "{}: no parts of it to merge: no directory of this user named {}* in {} holds parts \
         of it",
        path.display(),
        lane::parts_prefix(&absolute),
        lane::parts_base(&absolute).display()
    );
    for i in &found.ignored {
        let _ = write!(e, "; ignored {i}");
    }
    e
}

/// Merges the parts in the parts directory `dir` into the Chrome JSON
/// file `out`, or the trace they were recorded for (replacing it:
/// [`replace_file`]), and returns what it found. Parts stay in place.
pub fn merge_dir(dir: &Path, out: Option<&Path>) -> Result<Summary, String> {
    let (parts, problems) = read_parts(dir);
    let Some(first) = parts.first() else {
        return Err(format!(
            "{}: no part files to merge ({})",
            dir.display(),
            problems.join("; ")
        ));
    };
    let output = out.map_or_else(|| first.trace.clone(), Path::to_owned);
    let (json, mut summary) = to_json(&parts);
    summary.problems.extend(problems);
    summary.parts = dir.to_owned();
    summary.running = parts
        .iter()
        .filter(|p| !p.complete && alive(p.pid))
        .map(|p| (p.locale, p.pid))
        .collect();
    replace_file(&output, json.as_bytes()).map_err(|e| format!("{}: {e}", output.display()))?;
    summary.output = output;
    Ok(summary)
}

/// Whether process `pid` runs (on this machine): it exists and is not a
/// zombie (a dead locale whose parent has not reaped it yet).
pub fn alive(pid: u32) -> bool {
    if pid == 0 {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command's closing parenthesis.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| !matches!(state, 'Z' | 'X' | 'x')),
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

/// What `cantus-trace merge` did ([`merge_job`]); its `Display` is the
/// report.
#[derive(Debug)]
pub struct Merged {
    /// The merge's summary (the parts and the trace written among it).
    pub summary: Summary,
    /// Whether the parts were removed.
    pub removed: bool,
    /// Why they were kept, if they were.
    pub kept: Option<String>,
    /// Other parts directories of the same trace (older jobs), left.
    pub others: Vec<PathBuf>,
    /// Directories named as the trace's parts that were not used, and why.
    pub ignored: Vec<String>,
}

/// Merges what a job left: `input` is a parts directory, or a trace whose
/// newest parts of this user are merged ([`find_parts`]); into `out`, or
/// the trace. Then removes the parts, unless `keep`, or some could not
/// be read, or a locale's process still runs (its job may still record):
/// [`Merged`] says which, and where they are.
pub fn merge_job(input: &Path, out: Option<&Path>, keep: bool) -> Result<Merged, String> {
    let is_dir = std::fs::symlink_metadata(input)
        .is_ok_and(|m| m.is_dir() || (m.file_type().is_symlink() && input.is_dir()));
    let (dir, others, ignored, out) = if is_dir {
        (input.to_owned(), Vec::new(), Vec::new(), out)
    } else {
        let found = find_parts(input);
        let mut dirs = found.dirs.iter();
        let dir = dirs.next().ok_or_else(|| no_parts(input, &found))?.clone();
        (
            dir,
            dirs.cloned().collect(),
            found.ignored,
            Some(out.unwrap_or(input)),
        )
    };
    let summary = merge_dir(&dir, out)?;
    let mut kept = if keep {
        Some("kept as asked".to_string())
    } else if !summary.problems.is_empty() {
        Some("some parts could not be merged (the problems above)".to_string())
    } else {
        summary.running.first().map(|(l, pid)| {
            format!("locale {l}'s process (pid {pid}) still runs, so its job may still record")
        })
    };
    let mut removed = false;
    if kept.is_none() {
        match remove_parts(&dir) {
            Ok(()) => removed = true,
            Err(e) => kept = Some(format!("could not remove them: {e}")),
        }
    }
    Ok(Merged {
        summary,
        removed,
        kept,
        others,
        ignored,
    })
}

impl fmt::Display for Merged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.summary;
        write!(f, "{s}")?;
        writeln!(f, "cantus trace: wrote {}", s.output.display())?;
        match &self.kept {
            None => writeln!(
                f,
                "cantus trace: removed the part files in {}",
                s.parts.display()
            )?,
            Some(why) => writeln!(
                f,
                "cantus trace: the part files stay in {}: {why}",
                s.parts.display()
            )?,
        }
        if !self.others.is_empty() {
            writeln!(
                f,
                "cantus trace: {} older parts directories of this trace remain (merge one with \
                 `cantus-trace merge DIR`): {}",
                self.others.len(),
                self.others
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )?;
        }
        for i in &self.ignored {
            writeln!(f, "cantus trace: ignored {i}")?;
        }
        Ok(())
    }
}
