//! The files and directories of a trace, made so that only this user
//! reaches them (`README.md`, "Who can reach a trace"): a directory is
//! made with mode 0700, and used only once opened without following a
//! link and checked (a directory, this user's, entered by nobody else);
//! a file is created new (never an existing file, never through a link)
//! with mode 0600, inside such a directory, or beside the file it then
//! replaces by a rename. The owner and type are checked explicitly, not
//! left to the kernel's permission checks, which root bypasses.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// 64 random bits from the kernel (`getrandom(2)`), never 0: names that
/// another user cannot guess.
pub(crate) fn random() -> io::Result<u64> {
    loop {
        let mut v = 0u64;
        // SAFETY: writes at most 8 bytes into `v`, which is 8 bytes.
        let n = unsafe { libc::getrandom((&raw mut v).cast(), 8, 0) };
        match n {
            8 if v != 0 => return Ok(v),
            8 => {}
            n if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            n if n < 0 => return Err(io::Error::last_os_error()),
            _ => {} // a short read: ask again
        }
    }
}

fn c_path(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{}: a NUL byte in the path", p.display()))
}

/// This process's effective user.
fn me() -> libc::uid_t {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: an open descriptor and a buffer of a `stat`, written on
    // success before it is read.
    unsafe {
        if libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st.assume_init())
    }
}

/// What an open error on `path` (opened without following a link) means
/// to a user: a planted link is named as such.
fn open_error(path: &Path, e: io::Error) -> String {
    let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if link || e.raw_os_error() == Some(libc::ELOOP) {
        format!(
            "{}: a symbolic link; cantus never follows a link there (someone may have planted \
             it to aim a trace at another file)",
            path.display()
        )
    } else {
        format!("{}: {e}", path.display())
    }
}

/// Checks that `fd` (opened from `path`) is this user's, of the type
/// asked (`S_IFDIR` or `S_IFREG`), and for a directory that nobody else
/// may enter or change it.
fn check(fd: &OwnedFd, path: &Path, kind: libc::mode_t) -> Result<libc::stat, String> {
    let st = fstat(fd).map_err(|e| format!("{}: {e}", path.display()))?;
    let what = if kind == libc::S_IFDIR {
        "directory"
    } else {
        "regular file"
    };
    if st.st_mode & libc::S_IFMT != kind {
        return Err(format!(
            "{}: not a {what}; cantus does not use it",
            path.display()
        ));
    }
    if st.st_uid != me() {
        return Err(format!(
            "{}: owned by uid {}, not by this user (uid {}); someone else made it, and cantus \
             does not use it",
            path.display(),
            st.st_uid,
            me()
        ));
    }
    if kind == libc::S_IFDIR && st.st_mode & 0o077 != 0 {
        return Err(format!(
            "{}: others may enter it (mode {:o}); a directory of trace parts must be private \
             (0700), so cantus does not use it",
            path.display(),
            st.st_mode & 0o7777
        ));
    }
    Ok(st)
}

fn open_nofollow(path: &Path, flags: libc::c_int) -> Result<OwnedFd, String> {
    let c = c_path(path)?;
    // SAFETY: a NUL-terminated path; the descriptor is checked.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(open_error(path, io::Error::last_os_error()));
    }
    // SAFETY: a descriptor just opened, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A private directory of this user, open: its path and a descriptor
/// through which its files are made and opened (so that they are the
/// ones in the directory checked, whatever its path names later).
#[derive(Debug)]
pub(crate) struct Dir {
    pub(crate) path: PathBuf,
    fd: OwnedFd,
    /// When it last changed (its files were made), in nanoseconds.
    pub(crate) changed_ns: i128,
}

impl Dir {
    /// Makes the directory `path` (mode 0700) unless it exists, then
    /// opens it (see [`Dir::open`]). Another locale of the same job may
    /// have made it first; one made by anybody else is refused.
    pub(crate) fn make(path: &Path) -> Result<Dir, String> {
        let c = c_path(path)?;
        // SAFETY: a NUL-terminated path.
        if unsafe { libc::mkdir(c.as_ptr(), 0o700) } != 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::AlreadyExists {
                return Err(format!("{}: could not make it: {e}", path.display()));
            }
        }
        Dir::open(path)
    }

    /// Opens the directory `path` without following a link, and checks
    /// that it is a directory of this user that nobody else may enter.
    pub(crate) fn open(path: &Path) -> Result<Dir, String> {
        let fd = open_nofollow(path, libc::O_RDONLY | libc::O_DIRECTORY)?;
        let st = check(&fd, path, libc::S_IFDIR)?;
        Ok(Dir {
            path: path.to_owned(),
            fd,
            changed_ns: i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec),
        })
    }

    fn at(
        &self,
        name: &str,
        flags: libc::c_int,
        mode: libc::mode_t,
    ) -> Result<OwnedFd, (PathBuf, io::Error)> {
        let path = self.path.join(name);
        let c = CString::new(name).map_err(|_| {
            (
                path.clone(),
                io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the name"),
            )
        })?;
        // SAFETY: our directory's descriptor and a NUL-terminated name;
        // the descriptor returned is checked.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                libc::c_uint::from(mode),
            )
        };
        if fd < 0 {
            return Err((path, io::Error::last_os_error()));
        }
        // SAFETY: a descriptor just opened, owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Creates the file `name` in this directory, new (an existing file
    /// or link of that name is an error), mode 0600, for reading and
    /// writing.
    pub(crate) fn create(&self, name: &str) -> Result<File, String> {
        let fd = self
            .at(name, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL, 0o600)
            .map_err(|(p, e)| format!("{}: could not create it: {e}", p.display()))?;
        Ok(File::from(fd))
    }

    /// Opens the file `name` of this directory for reading, without
    /// following a link, and checks that it is a regular file of this
    /// user.
    pub(crate) fn open_file(&self, name: &str) -> Result<File, String> {
        let fd = self
            .at(name, libc::O_RDONLY | libc::O_NONBLOCK, 0)
            .map_err(|(p, e)| open_error(&p, e))?;
        check(&fd, &self.path.join(name), libc::S_IFREG)?;
        Ok(File::from(fd))
    }
}

/// Writes `bytes` to `path`, replacing whatever is there: into a new
/// file of a random name beside it (created exclusively, mode 0600,
/// never through a link), then renamed over `path`. The rename replaces a
/// link at `path` rather than following it, so no file elsewhere is
/// written; a file of another user at `path` in a sticky directory
/// (`/tmp`) cannot be replaced, and that is an error.
pub fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
    let mut tries = 0;
    let (tmp, file) = loop {
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".{:016x}.tmp", random()?));
        let tmp = dir.join(tmp_name);
        let c = CString::new(tmp.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
        // SAFETY: a NUL-terminated path; the descriptor is checked.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600 as libc::c_uint,
            )
        };
        if fd >= 0 {
            // SAFETY: a descriptor just opened, owned by nobody else.
            break (tmp, File::from(unsafe { OwnedFd::from_raw_fd(fd) }));
        }
        let e = io::Error::last_os_error();
        tries += 1;
        if e.kind() != io::ErrorKind::AlreadyExists || tries == 8 {
            return Err(e);
        }
    };
    let written = (|| {
        let mut w = io::BufWriter::new(file);
        w.write_all(bytes)?;
        w.flush()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// A fresh directory for a test, private to this user.
    fn scratch(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "cantus-private-{test}-{}-{:x}",
            std::process::id(),
            random().unwrap()
        ));
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        d
    }

    /// Another user's id (tests run as root, which may give files away;
    /// as another user they cannot, and say so).
    const OTHER: u32 = 12345;

    fn give_away(p: &Path) -> bool {
        std::os::unix::fs::lchown(p, Some(OTHER), Some(OTHER)).is_ok()
    }

    #[test]
    fn a_directory_is_made_private_and_found_again() {
        let s = scratch("made");
        let d = s.join("parts");
        let dir = Dir::make(&d).unwrap();
        let m = std::fs::symlink_metadata(&d).unwrap();
        assert!(m.is_dir());
        assert_eq!(m.mode() & 0o777, 0o700, "mode {:o}", m.mode());
        // Another locale of the job makes it too: the same directory.
        Dir::make(&d).unwrap();
        let f = dir.create("locale-0.bin").unwrap();
        assert_eq!(f.metadata().unwrap().mode() & 0o777, 0o600);
        dir.open_file("locale-0.bin").unwrap();
        std::fs::remove_dir_all(&s).unwrap();
    }

    /// A directory `parts` planted (in a scratch directory for `test`)
    /// with `mode`: (the scratch directory, the planted one).
    fn planted(test: &str, mode: u32) -> (PathBuf, PathBuf) {
        let s = scratch(test);
        let d = s.join("parts");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
        (s, d)
    }

    #[test]
    fn a_directory_of_another_user_is_refused() {
        let (s, d) = planted("other", 0o700);
        if give_away(&d) {
            let e = Dir::make(&d).unwrap_err();
            assert!(e.contains(&format!("owned by uid {OTHER}")), "{e}");
            let e = Dir::open(&d).unwrap_err();
            assert!(e.contains("not by this user"), "{e}");
        } else {
            eprintln!("skipped: cannot chown as this user");
        }
        std::fs::remove_dir_all(&s).unwrap();
    }

    #[test]
    fn a_directory_others_may_enter_is_refused() {
        let (s, d) = planted("open", 0o777);
        let e = Dir::make(&d).unwrap_err();
        assert!(e.contains("mode 777") && e.contains("private"), "{e}");
        std::fs::remove_dir_all(&s).unwrap();
    }

    #[test]
    fn a_link_to_a_directory_is_not_followed() {
        let s = scratch("dirlink");
        let real = s.join("real");
        Dir::make(&real).unwrap();
        let link = s.join("parts");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = Dir::make(&link).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        let e = Dir::open(&link).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        std::fs::remove_dir_all(&s).unwrap();
    }

    #[test]
    fn a_file_is_created_new_never_through_a_link() {
        let s = scratch("filelink");
        let dir = Dir::make(&s.join("parts")).unwrap();
        let victim = s.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path.join("locale-0.bin")).unwrap();
        assert!(dir.create("locale-0.bin").is_err(), "a planted link");
        let e = dir.open_file("locale-0.bin").unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        std::fs::write(dir.path.join("locale-1.bin"), b"old").unwrap();
        assert!(dir.create("locale-1.bin").is_err(), "an existing file");
        let v = std::fs::read(&victim).unwrap();
        assert!(
            v == b"precious",
            "the file a link aims at was written: now {} bytes",
            v.len()
        );
        std::fs::remove_dir_all(&s).unwrap();
    }

    #[test]
    fn a_file_of_another_user_is_not_read() {
        let s = scratch("otherfile");
        let dir = Dir::make(&s.join("parts")).unwrap();
        let f = dir.path.join("locale-1.bin");
        std::fs::write(&f, b"planted").unwrap();
        if !give_away(&f) {
            eprintln!("skipped: cannot chown as this user");
            return;
        }
        let e = dir.open_file("locale-1.bin").unwrap_err();
        assert!(e.contains(&format!("owned by uid {OTHER}")), "{e}");
        std::fs::remove_dir_all(&s).unwrap();
    }

    #[test]
    fn replacing_a_file_never_writes_through_a_planted_link() {
        let s = scratch("replace");
        let victim = s.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let out = s.join("trace.json");
        // Links where the file goes, and where a fixed temporary name
        // would be.
        std::os::unix::fs::symlink(&victim, &out).unwrap();
        std::os::unix::fs::symlink(&victim, s.join("trace.json.tmp")).unwrap();
        replace_file(&out, b"{}").unwrap();
        let v = std::fs::read(&victim).unwrap();
        assert!(
            v == b"precious",
            "the file a link aims at was written: now {} bytes",
            v.len()
        );
        let m = std::fs::symlink_metadata(&out).unwrap();
        assert!(m.is_file(), "the link was replaced by the file");
        assert_eq!(m.mode() & 0o777, 0o600);
        assert_eq!(std::fs::read(&out).unwrap(), b"{}");
        let left: Vec<_> = std::fs::read_dir(&s)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 3, "no temporary file left: {left:?}");
        std::fs::remove_dir_all(&s).unwrap();
    }
}
