//! `cantus-trace`: what to do with a cantus timeline trace
//! (`CANTUS_TRACE=PATH`) besides opening it in Perfetto.
//!
//! ```text
//! cantus-trace svg TRACE.json [OUT.svg] [--width PIXELS]
//! cantus-trace summary TRACE.json
//! cantus-trace merge (TRACE.json | PARTS_DIR) [OUT.json] [--keep]
//! ```
//!
//! - `svg` draws the timeline: one lane per thread, grouped by locale;
//!   tasks coloured by kind, idle and asleep in greys; steals, messages
//!   and wakes as arrows. Opens in any browser.
//! - `summary` prints each worker's utilisation (busy, idle, asleep,
//!   other: a row adds up to 100%).
//! - `merge` merges the part files a run left (locale 0 does it at the end
//!   of a run; after a crash of locale 0 the parts stay, and this merges
//!   them) and prints the summary. Given a trace, it merges this user's
//!   newest parts of it; given a parts directory (the path locale 0
//!   printed), those. It then removes the parts, unless `--keep`, some
//!   could not be merged, or a locale of the job still runs, and says
//!   which and where they are.
//!
//! Every file it writes is this user's only (mode 0600) and is written
//! beside its name and renamed there, so that a link planted at that name
//! is replaced, never followed (`cantus::trace::replace_file`).

mod svg;

use serde_json::Value;
use std::path::Path;
use std::process::ExitCode;

const USAGE: &str = "usage: cantus-trace svg TRACE.json [OUT.svg] [--width PIXELS]\n       \
                     cantus-trace summary TRACE.json\n       \
                     cantus-trace merge (TRACE.json | PARTS_DIR) [OUT.json] [--keep]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cantus-trace: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let (cmd, rest) = args.split_first().ok_or(USAGE)?;
    match cmd.as_str() {
        "svg" => {
            let mut width = 1600u32;
            let mut files = Vec::new();
            let mut it = rest.iter();
            while let Some(a) = it.next() {
                if a == "--width" {
                    width = it
                        .next()
                        .and_then(|w| w.parse().ok())
                        .filter(|w| (200..=20_000).contains(w))
                        .ok_or("--width takes a number of pixels, 200..20000")?;
                } else {
                    files.push(a.clone());
                }
            }
            let input = files.first().ok_or(USAGE)?;
            let output = files
                .get(1)
                .cloned()
                .unwrap_or_else(|| format!("{}.svg", input.trim_end_matches(".json")));
            let trace = read(Path::new(input))?;
            let picture = svg::draw(&trace, width);
            cantus::trace::replace_file(Path::new(&output), picture.as_bytes())
                .map_err(|e| format!("{output}: {e}"))?;
            eprintln!("cantus-trace: wrote {output}");
            Ok(())
        }
        "summary" => {
            let input = rest.first().ok_or(USAGE)?;
            let trace = read(Path::new(input))?;
            print!("{}", svg::summary(&trace));
            Ok(())
        }
        "merge" => {
            let keep = rest.iter().any(|a| a == "--keep");
            if let Some(a) = rest.iter().find(|a| a.starts_with("--") && *a != "--keep") {
                return Err(format!(
                    "merge: unknown option {a} (it takes --keep)\n{USAGE}"
                ));
            }
            let files: Vec<&String> = rest.iter().filter(|a| *a != "--keep").collect();
            let (input, out) = match files[..] {
                [input] => (input, None),
                [input, out] => (input, Some(Path::new(out))),
                _ => {
                    return Err(format!(
                        "merge takes a trace or a parts directory, and at most an output file \
                         ({} given)\n{USAGE}",
                        files.len()
                    ));
                }
            };
            let merged = cantus::trace::merge::merge_job(Path::new(input), out, keep)?;
            eprint!("{merged}");
            Ok(())
        }
        _ => Err(USAGE.to_string()),
    }
}

/// A trace's events, read as a viewer reads them.
fn read(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a trace-event JSON file: {e}", path.display()))?;
    match v {
        Value::Object(mut o) => match o.remove("traceEvents") {
            Some(Value::Array(a)) => Ok(a),
            _ => Err(format!("{}: no traceEvents array", path.display())),
        },
        Value::Array(a) => Ok(a),
        _ => Err(format!("{}: not a trace-event JSON file", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `svg`, asked to write where another user planted a link to a file
    /// of this user, replaces the link and leaves the file.
    #[test]
    fn the_picture_is_never_written_through_a_planted_link() {
        let dir = std::env::temp_dir().join(format!("cantus-trace-svg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let (input, output, victim) = (dir.join("t.json"), dir.join("t.svg"), dir.join("precious"));
        std::fs::write(&input, r#"{"traceEvents":[]}"#).unwrap();
        std::fs::write(&victim, b"precious").unwrap();
        std::os::unix::fs::symlink(&victim, &output).unwrap();
        let arg = |p: &Path| p.to_str().unwrap().to_string();
        run(&["svg".into(), arg(&input), arg(&output)]).unwrap();
        let v = std::fs::read(&victim).unwrap();
        assert!(
            v == b"precious",
            "the file a link aims at was written: now {} bytes",
            v.len()
        );
        let m = std::fs::symlink_metadata(&output).unwrap();
        assert!(m.is_file(), "the link was replaced by the picture");
        assert!(
            std::fs::read_to_string(&output)
                .unwrap()
                .starts_with("<svg")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn merge_names_what_is_wrong_with_its_arguments() {
        let e = run(&["merge".into(), "a".into(), "b".into(), "c".into()]).unwrap_err();
        assert!(e.contains("at most an output file (3 given)"), "{e}");
        let e = run(&["merge".into(), "a".into(), "--kept".into()]).unwrap_err();
        assert!(e.contains("unknown option --kept"), "{e}");
    }
}
