//! Faults the tests inject: a server's wall clock moved under libfaketime, files planted in a
//! data directory, a backend killed with SIGKILL.

use std::path::{Path, PathBuf};

use crate::{Client, Cluster};

/// Debian's libfaketime, used unless `LIBFAKETIME` names another.
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// A libfaketime timestamp file `name` in `dir` at `offset`, and the environment that runs a
/// process under libfaketime (`LIBFAKETIME`, default Debian's `libfaketimeMT.so.1`) reading
/// that file on every clock call, with the monotonic clock left real.
pub(crate) fn faketime_environment(
    dir: &Path,
    name: &str,
    offset: &str,
) -> (PathBuf, Vec<(String, String)>) {
    let file = dir.join(name);
    write_fake_time(&file, offset);
    let library = std::env::var("LIBFAKETIME").unwrap_or_else(|_| LIBFAKETIME.to_owned());
    assert!(
        Path::new(&library).exists(),
        "libfaketime not found at {library} (install Debian's faketime or set LIBFAKETIME)"
    );
    let variables = [
        ("LD_PRELOAD", library.as_str()),
        ("FAKETIME_TIMESTAMP_FILE", &file.display().to_string()),
        ("FAKETIME_NO_CACHE", "1"),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
    ]
    .map(|(name, value)| (name.to_owned(), value.to_owned()));
    (file, variables.to_vec())
}

/// Replaces libfaketime's timestamp file `file` with `offset` atomically (rename), so a process
/// never reads a half-written one.
pub(crate) fn write_fake_time(file: &Path, offset: &str) {
    let temporary = file.with_extension("tmp");
    std::fs::write(&temporary, format!("{offset}\n")).expect("write the faketime file");
    std::fs::rename(&temporary, file).expect("replace the faketime file");
}

impl Cluster {
    /// Moves the wall clock of a server started with
    /// [`ClusterBuilder::faketime`](crate::ClusterBuilder::faketime): `offset` is a libfaketime
    /// relative offset from the real time, e.g. `"-10m"`, `"+1h"`, `"+0"`. The file is replaced
    /// atomically (rename), so the server never reads a half-written one; it takes effect at the
    /// server's next clock call.
    pub fn set_fake_time(&self, offset: &str) {
        let file = self
            .faketime_file
            .as_ref()
            .expect("set_fake_time needs a cluster started with ClusterBuilder::faketime()");
        write_fake_time(file, offset);
    }

    /// Writes `contents` to `name` in the data directory, owned by the server's OS user (for
    /// planting or repairing files while the server is stopped).
    pub fn write_data_file(&self, name: &str, contents: &[u8]) {
        use std::os::unix::fs::MetadataExt;
        let path = self.data.join(name);
        std::fs::write(&path, contents)
            .unwrap_or_else(|error| panic!("write {}: {error}", path.display()));
        let owner = std::fs::metadata(&self.data).expect("stat the data directory");
        std::os::unix::fs::chown(&path, Some(owner.uid()), Some(owner.gid()))
            .unwrap_or_else(|error| panic!("chown {}: {error}", path.display()));
    }

    /// The running postmaster's pid (first line of `postmaster.pid`).
    pub fn postmaster_pid(&self) -> i32 {
        let text = std::fs::read_to_string(self.data.join("postmaster.pid"))
            .expect("read postmaster.pid (is the server running?)");
        text.lines()
            .next()
            .and_then(|line| line.trim().parse().ok())
            .expect("postmaster.pid starts with the pid")
    }

    /// Sends SIGKILL to `pid`, which must be a child of this cluster's postmaster (a backend,
    /// e.g. from [`backend_pid`]). The postmaster then resets shared memory and runs crash
    /// recovery; [`Cluster::wait_for_connection`] waits for it to accept connections again.
    pub fn kill_backend(&self, pid: i32) {
        let postmaster = self.postmaster_pid();
        assert_eq!(
            parent_pid(pid),
            Some(postmaster),
            "pid {pid} is not a child of this cluster's postmaster {postmaster}"
        );
        const SIGKILL: i32 = 9;
        // SAFETY: kill has no memory-safety preconditions; the pid was checked to be ours.
        let result = unsafe { kill(pid, SIGKILL) };
        assert_eq!(
            result,
            0,
            "kill -9 {pid}: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// The server pid of `client`'s session (`pg_backend_pid()`).
pub fn backend_pid(client: &mut Client) -> i32 {
    client
        .query_one("SELECT pg_backend_pid()", &[])
        .expect("SELECT pg_backend_pid()")
        .get(0)
}

/// Parent pid of `pid` from /proc, or None when it does not exist.
fn parent_pid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the
    // last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

extern "C" {
    pub(crate) fn kill(pid: i32, signal: i32) -> i32;
}
