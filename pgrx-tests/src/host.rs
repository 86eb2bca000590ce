//! The machine the servers run on: the OS user they run as when the tests run as root, where the
//! test command installed pgBackRest, fresh directories for clusters and their companions, ports
//! nothing else was handed, and the output of a finished program for failure messages.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Where the test command puts trixie's pgBackRest (`install_pgbackrest_from_trixie` in
/// scripts/install-postgres.sh; Debian 12's 2.45 refuses PostgreSQL 17 and 18).
pub(crate) const PGBACKREST: &str = "/opt/snowflake_id/pgbackrest/bin/pgbackrest";

/// The OS user that runs the servers when the tests run as root (initdb and postgres refuse
/// root).
pub(crate) const SERVER_USER: &str = "postgres";

/// Numbers the directories this test process makes (clusters, base backups), so none is made
/// twice.
pub(crate) static NEXT_DIRECTORY: AtomicUsize = AtomicUsize::new(0);

/// Whether the tests run as root, so servers must run as [`SERVER_USER`].
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { geteuid() == 0 }
}

extern "C" {
    fn geteuid() -> u32;
}

/// A fresh, empty directory for one cluster under the system temp dir.
pub(crate) fn new_cluster_dir() -> PathBuf {
    new_cluster_dir_in(&std::env::temp_dir())
}

/// A fresh, empty directory for one cluster under `parent`.
pub(crate) fn new_cluster_dir_in(parent: &Path) -> PathBuf {
    let number = NEXT_DIRECTORY.fetch_add(1, Ordering::Relaxed);
    let dir = parent.join(format!("snowflake-cluster-{}-{number}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("remove stale cluster directory");
    }
    std::fs::create_dir_all(&dir).expect("create cluster directory");
    dir
}

/// Gives `path` (recursively) to the server's OS user when the tests run as root.
pub(crate) fn chown_to_server_user(path: &Path) {
    if is_root() {
        let output = Command::new("chown")
            .arg("-R")
            .arg(SERVER_USER)
            .arg(path)
            .output()
            .expect("run chown");
        assert!(output.status.success(), "chown: {}", describe(&output));
    }
}

/// Copies directory `from` to the new path `to` (`cp -a`: modes and owners kept).
pub(crate) fn copy_dir(from: &Path, to: &Path) {
    let output = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .output()
        .expect("run cp");
    assert!(
        output.status.success(),
        "cp -a {} {}: {}",
        from.display(),
        to.display(),
        describe(&output)
    );
}

/// A finished program's status and output, for failure messages.
pub(crate) fn describe(output: &Output) -> String {
    format!(
        "{}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A port no one listens on now, and never handed out before to a test running on this machine:
/// the kernel may give a just-released port again, before the server it was meant for binds it
/// (a pg_auto_failover monitor and its first node once got the same one), and the tests run in
/// several processes at once (cargo-nextest). A port is claimed by creating a file named after
/// it in a directory all test processes share; claims older than a day are taken as stale.
pub fn free_port() -> u16 {
    let claims = std::env::temp_dir().join("snowflake-test-ports");
    std::fs::create_dir_all(&claims).expect("create the port claims' directory");
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        let claim = claims.join(port.to_string());
        let stale = std::fs::metadata(&claim)
            .and_then(|meta| meta.modified())
            .is_ok_and(|modified| {
                modified.elapsed().unwrap_or_default() > std::time::Duration::from_secs(86_400)
            });
        if stale {
            let _ = std::fs::remove_file(&claim);
        }
        if std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&claim)
            .is_ok()
        {
            return port;
        }
    }
}
