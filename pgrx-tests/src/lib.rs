//! Throwaway PostgreSQL clusters for whole-cluster tests of snowflake_id.
//!
//! Each [`Cluster`] lives in a fresh directory under the system temp dir, listens only on a Unix
//! socket in that directory (no TCP), runs as the `postgres` OS user when the tests run as root
//! (initdb and postgres refuse root), and is stopped and deleted when dropped, even when the test
//! panics. The extension must already be installed into the server's directories
//! (the README's test command installs the Debian package; `cargo pgrx install` works too).
//!
//! What several test files share beside the clusters (the table `ids`, generating sessions,
//! `snowflake_stats()`, clusters of several nodes, …) is in [`fixtures`].

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub use postgres::{Client, Error as PgError, NoTls};

pub mod fixtures;

static NEXT_CLUSTER: AtomicUsize = AtomicUsize::new(0);

/// Settings for a new cluster.
#[derive(Clone, Debug)]
pub struct ClusterBuilder {
    preload: bool,
    settings: Vec<String>,
    environment: Vec<(String, String)>,
    faketime: bool,
}

impl ClusterBuilder {
    /// Leave `snowflake_id` out of `shared_preload_libraries`.
    pub fn without_preload(mut self) -> Self {
        self.preload = false;
        self
    }

    /// Adds a `postgresql.conf` line, e.g. `"snowflake.node_id = 3"`.
    pub fn setting(mut self, line: &str) -> Self {
        self.settings.push(line.to_owned());
        self
    }

    /// Adds an environment variable for the server process (e.g. libfaketime's).
    pub fn server_env(mut self, name: &str, value: &str) -> Self {
        self.environment.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Runs the server under libfaketime (`LIBFAKETIME`, default Debian's `libfaketimeMT.so.1`)
    /// with a timestamp file that starts at `+0` (the real time) and is re-read on every clock
    /// call, so [`Cluster::set_fake_time`] moves the running server's wall clock at once. The
    /// monotonic clock stays real.
    pub fn faketime(mut self) -> Self {
        self.faketime = true;
        self
    }

    /// Creates (initdb) and starts the cluster.
    pub fn start(self) -> Cluster {
        let number = NEXT_CLUSTER.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("snowflake-cluster-{}-{number}", std::process::id()));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).expect("remove stale cluster directory");
        }
        std::fs::create_dir_all(&dir).expect("create cluster directory");
        let mut environment = self.environment;
        let faketime_file = self.faketime.then(|| {
            let file = dir.join("faketime.rc");
            std::fs::write(&file, "+0\n").expect("write the faketime file");
            let library = std::env::var("LIBFAKETIME").unwrap_or_else(|_| LIBFAKETIME.to_owned());
            assert!(
                Path::new(&library).exists(),
                "libfaketime not found at {library} (install Debian's faketime or set LIBFAKETIME)"
            );
            for (name, value) in [
                ("LD_PRELOAD", library.as_str()),
                ("FAKETIME_TIMESTAMP_FILE", &file.display().to_string()),
                ("FAKETIME_NO_CACHE", "1"),
                ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
            ] {
                environment.push((name.to_owned(), value.to_owned()));
            }
            file
        });
        let mut cluster = Cluster {
            data: dir.join("data"),
            dir,
            bin: postgres_bin_dir(),
            port: free_port(),
            environment,
            running: false,
            faketime_file,
        };
        if is_root() {
            // The server user must own the cluster directory (initdb and postgres refuse root).
            let output = Command::new("chown")
                .arg("-R")
                .arg(SERVER_USER)
                .arg(&cluster.dir)
                .output();
            let output = output.expect("run chown");
            assert!(output.status.success(), "chown: {}", describe(&output));
        }
        cluster.server_command("initdb", |command| {
            command.arg("--pgdata").arg(&cluster.data).args([
                "--auth=trust",
                "--username=postgres",
                "--encoding=UTF8",
                "--no-sync",
            ]);
        });
        let mut config = vec![
            "listen_addresses = ''".to_owned(),
            format!("port = {}", cluster.port),
            format!("unix_socket_directories = '{}'", cluster.dir.display()),
            "fsync = off".to_owned(),
            "max_connections = 100".to_owned(),
        ];
        if self.preload {
            config.push("shared_preload_libraries = 'snowflake_id'".to_owned());
        }
        config.extend(self.settings);
        cluster.append_config(&config.join("\n"));
        cluster.start();
        cluster
    }
}

/// A running throwaway cluster.
pub struct Cluster {
    dir: PathBuf,
    data: PathBuf,
    bin: PathBuf,
    port: u16,
    environment: Vec<(String, String)>,
    running: bool,
    /// libfaketime's timestamp file when started with [`ClusterBuilder::faketime`].
    faketime_file: Option<PathBuf>,
}

const SERVER_USER: &str = "postgres";
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

impl Cluster {
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder {
            preload: true,
            settings: Vec::new(),
            environment: Vec::new(),
            faketime: false,
        }
    }

    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// Directory of the server's Unix socket (its `host` for libpq).
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// A libpq connection string for `database`, e.g. for postgres_fdw or a subscription.
    pub fn conninfo(&self, database: &str) -> String {
        format!(
            "host={} port={} user=postgres dbname={database}",
            self.dir.display(),
            self.port
        )
    }

    /// Connects to database `postgres` as superuser `postgres`.
    pub fn connect(&self) -> Client {
        self.connect_to("postgres")
    }

    pub fn connect_to(&self, database: &str) -> Client {
        self.try_connect_to(database)
            .unwrap_or_else(|error| panic!("connect to {database}: {error}\n{}", self.log_tail()))
    }

    pub fn try_connect_to(&self, database: &str) -> Result<Client, PgError> {
        postgres::Config::new()
            .host_path(&self.dir)
            .port(self.port)
            .user("postgres")
            .dbname(database)
            .connect(NoTls)
    }

    /// Dumps database `source` with pg_dump (custom format) and restores it into the existing,
    /// empty database `target` with pg_restore, stopping at the first error.
    pub fn dump_and_restore(&self, source: &str, target: &str) {
        let dump = self.dir.join(format!("{source}.dump"));
        let (host, port) = (self.dir.display().to_string(), self.port.to_string());
        let connection = ["--host", &host, "--port", &port, "--username", "postgres"];
        let dumped = Command::new("pg_dump")
            .args(connection)
            .args(["--format=custom", "--file"])
            .arg(&dump)
            .arg(source)
            .output()
            .expect("run pg_dump");
        assert!(dumped.status.success(), "pg_dump: {}", describe(&dumped));
        let restored = Command::new("pg_restore")
            .args(connection)
            .args(["--exit-on-error", "--dbname", target])
            .arg(&dump)
            .output()
            .expect("run pg_restore");
        assert!(
            restored.status.success(),
            "pg_restore: {}",
            describe(&restored)
        );
    }

    /// Appends lines to postgresql.conf (they take effect at the next start or reload).
    pub fn append_config(&self, lines: &str) {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(self.data.join("postgresql.conf"))
            .expect("open postgresql.conf");
        writeln!(file, "\n{lines}").expect("write postgresql.conf");
    }

    pub fn start(&mut self) {
        let log = self.dir.join("server.log");
        self.server_command("pg_ctl", |command| {
            command
                .arg("--pgdata")
                .arg(&self.data)
                .arg("--log")
                .arg(&log);
            command.args(["--wait", "--timeout=60", "start"]);
        });
        self.running = true;
    }

    /// Stops the server with `mode` (`fast`, `smart` or `immediate`).
    pub fn stop(&mut self, mode: &str) {
        self.server_command("pg_ctl", |command| {
            command.arg("--pgdata").arg(&self.data).args([
                "--wait",
                "--timeout=60",
                "--mode",
                mode,
                "stop",
            ]);
        });
        self.running = false;
    }

    /// The last lines of the server log, for failure messages.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let start = lines.len().saturating_sub(40);
        format!("--- server log (tail) ---\n{}", lines[start..].join("\n"))
    }

    /// Runs a server binary (as the server user) with this cluster's environment.
    fn server_command(&self, program: &str, configure: impl FnOnce(&mut Command)) {
        let mut command = if is_root() {
            let mut command = Command::new("runuser");
            command.args(["-u", SERVER_USER, "--", "env"]);
            for (name, value) in &self.environment {
                command.arg(format!("{name}={value}"));
            }
            command.arg(self.bin.join(program));
            command
        } else {
            let mut command = Command::new(self.bin.join(program));
            command.envs(self.environment.iter().map(|(n, v)| (n, v)));
            command
        };
        configure(&mut command);
        let output = command
            .output()
            .unwrap_or_else(|error| panic!("run {program}: {error}"));
        if !output.status.success() {
            panic!(
                "{program} failed: {}\n{}",
                describe(&output),
                self.log_tail()
            );
        }
    }
}

/// Fault injection and replication.
impl Cluster {
    /// Moves the wall clock of a server started with [`ClusterBuilder::faketime`]: `offset` is
    /// a libfaketime relative offset from the real time, e.g. `"-10m"`, `"+1h"`, `"+0"`. The
    /// file is replaced atomically (rename), so the server never reads a half-written one; it
    /// takes effect at the server's next clock call.
    pub fn set_fake_time(&self, offset: &str) {
        let file = self
            .faketime_file
            .as_ref()
            .expect("set_fake_time needs a cluster started with ClusterBuilder::faketime()");
        let temporary = file.with_extension("rc.tmp");
        std::fs::write(&temporary, format!("{offset}\n")).expect("write the faketime file");
        std::fs::rename(&temporary, file).expect("replace the faketime file");
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

    /// Polls until a connection succeeds (e.g. after crash recovery), up to `timeout`.
    pub fn wait_for_connection(&self, timeout: Duration) -> Client {
        let deadline = Instant::now() + timeout;
        loop {
            match self.try_connect_to("postgres") {
                Ok(client) => return client,
                Err(error) if Instant::now() >= deadline => panic!(
                    "no connection within {timeout:?}: {error}\n{}",
                    self.log_tail()
                ),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// The whole server log.
    pub fn server_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Makes a streaming replica of this running cluster (`pg_basebackup -R -X stream` over its
    /// Unix socket; initdb's default pg_hba trusts local replication) and starts it as a hot
    /// standby in a directory of its own, with the same harness guarantees (own socket dir, no
    /// TCP, stopped and removed on drop). The replica gets the primary's configuration and
    /// files (extension, reservation file) but none of its server environment (no faketime).
    pub fn start_replica(&self) -> Cluster {
        let number = NEXT_CLUSTER.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("snowflake-cluster-{}-{number}", std::process::id()));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).expect("remove stale cluster directory");
        }
        std::fs::create_dir_all(&dir).expect("create replica directory");
        let mut replica = Cluster {
            data: dir.join("data"),
            dir,
            bin: self.bin.clone(),
            port: free_port(),
            environment: Vec::new(),
            running: false,
            faketime_file: None,
        };
        if is_root() {
            let output = Command::new("chown")
                .arg("-R")
                .arg(SERVER_USER)
                .arg(&replica.dir)
                .output()
                .expect("run chown");
            assert!(output.status.success(), "chown: {}", describe(&output));
        }
        replica.server_command("pg_basebackup", |command| {
            command
                .arg("--pgdata")
                .arg(&replica.data)
                .arg("--host")
                .arg(&self.dir)
                .arg("--port")
                .arg(self.port.to_string())
                .args([
                    "--username=postgres",
                    "--write-recovery-conf",
                    "--wal-method=stream",
                    "--checkpoint=fast",
                    "--no-sync",
                ]);
        });
        replica.append_config(&format!(
            "port = {}\nunix_socket_directories = '{}'\nhot_standby = on",
            replica.port,
            replica.dir.display()
        ));
        replica.start();
        replica
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

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.running {
            let _ = Command::new(if is_root() { "runuser" } else { "sh" })
                .args(stop_args(&self.bin, &self.data))
                .output();
        }
        if std::env::var_os("SNOWFLAKE_KEEP_CLUSTERS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn stop_args(bin: &Path, data: &Path) -> Vec<String> {
    let pg_ctl = bin.join("pg_ctl").display().to_string();
    let data = data.display().to_string();
    let stop = ["--pgdata", &data, "--mode", "immediate", "--wait", "stop"];
    if is_root() {
        ["-u", SERVER_USER, "--", &pg_ctl]
            .iter()
            .chain(stop.iter())
            .map(|s| s.to_string())
            .collect()
    } else {
        let quoted: Vec<String> = stop.iter().map(|s| format!("'{s}'")).collect();
        vec!["-c".into(), format!("'{pg_ctl}' {}", quoted.join(" "))]
    }
}

fn describe(output: &Output) -> String {
    format!(
        "{}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { geteuid() == 0 }
}

extern "C" {
    fn geteuid() -> u32;
    fn kill(pid: i32, signal: i32) -> i32;
}

/// A directory of the PostgreSQL installation the tests run against: `$PG_CONFIG flag`
/// (default `pg_config` on PATH), e.g. `--sharedir`, `--pkglibdir`.
pub fn pg_config(flag: &str) -> PathBuf {
    let pg_config = std::env::var("PG_CONFIG").unwrap_or_else(|_| "pg_config".into());
    let output = Command::new(&pg_config)
        .arg(flag)
        .output()
        .unwrap_or_else(|error| panic!("run {pg_config}: {error}"));
    assert!(
        output.status.success(),
        "{pg_config} {flag}: {}",
        describe(&output)
    );
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

/// The server's bin directory (initdb, pg_ctl, pg_dump, psql): `pg_config --bindir`.
pub fn postgres_bin_dir() -> PathBuf {
    pg_config("--bindir")
}

/// A port no one listens on now; it only names the Unix socket, as TCP is off.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Polls `condition` every 50 ms until it holds or `timeout` passes; returns whether it held.
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SQLSTATE, message and hint of a database error, for assertions.
pub fn error_parts(error: &PgError) -> (String, String, String) {
    match error.as_db_error() {
        Some(db) => (
            db.code().code().to_owned(),
            db.message().to_owned(),
            db.hint().unwrap_or_default().to_owned(),
        ),
        None => (String::new(), error.to_string(), String::new()),
    }
}
