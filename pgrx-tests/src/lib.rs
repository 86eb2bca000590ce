//! Throwaway PostgreSQL clusters for whole-cluster tests of snowflake_id.
//!
//! Each [`Cluster`] lives in a fresh directory under the system temp dir, listens only on a Unix
//! socket in that directory (no TCP), runs as the `postgres` OS user when the tests run as root
//! (initdb and postgres refuse root), and is stopped and deleted when dropped, even when the test
//! panics. The extension must already be installed into the server's directories
//! (the README's test command installs the Debian package; `cargo pgrx install` works too).
//! `PG_CONFIG` picks the installation (default `pg_config` on PATH): its bin directory provides
//! every server program the harness runs.
//!
//! A cluster is made fresh ([`Cluster::builder`]), as a streaming standby of another
//! ([`Cluster::replica`], promoted with [`Cluster::promote`]), as a point-in-time restore of a
//! base backup with a WAL archive ([`ClusterBuilder::wal_archive`], [`Cluster::base_backup`],
//! [`Cluster::restore`]), or left unstarted as the target of [`Cluster::upgrade_from`]
//! (pg_upgrade); a former primary rejoins with [`Cluster::rewind_from`] (pg_rewind). A
//! pg_auto_failover formation (monitor, keepers and their servers) is in [`auto_failover`].
//!
//! What several test files share beside the clusters (the table `ids`, generating sessions,
//! `snowflake_stats()`, clusters of several nodes, …) is in [`fixtures`]; the column shapes an
//! ID can be stored in, in [`column_shapes`].

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use postgres::{Client, Error as PgError, NoTls, Row};

pub mod auto_failover;
pub mod column_shapes;
pub mod fixtures;
pub mod lagging_link;
pub mod pgbouncer;

static NEXT_CLUSTER: AtomicUsize = AtomicUsize::new(0);

/// Settings for a new cluster: a fresh one ([`Cluster::builder`]), a streaming standby of a
/// running one ([`Cluster::replica`]) or a point-in-time restore of a base backup
/// ([`Cluster::restore`]).
#[derive(Clone, Debug)]
pub struct ClusterBuilder {
    preload: bool,
    settings: Vec<String>,
    environment: Vec<(String, String)>,
    /// libfaketime's offset at start, when the server runs under it.
    faketime: Option<String>,
    wal_archive: bool,
    /// The cluster directory lives on the memory file system (`MEMORY_FILE_SYSTEM`).
    in_memory: bool,
    /// The bin directory of the installation a fresh cluster runs on (default: `PG_CONFIG`'s).
    installation: Option<PathBuf>,
    origin: Origin,
}

/// Where a new cluster's data directory comes from.
#[derive(Clone, Debug)]
enum Origin {
    /// initdb.
    Initdb,
    /// `pg_basebackup -R -X stream` from the running server listening in `host` on `port`: a
    /// hot standby that streams from it.
    Standby {
        bin: PathBuf,
        host: PathBuf,
        port: u16,
    },
    /// A copy of the base backup `backup` that recovers from the WAL archive `archive`
    /// (`recovery.signal`, `restore_command`), archiving nothing itself.
    Restore {
        bin: PathBuf,
        backup: PathBuf,
        archive: PathBuf,
    },
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
    pub fn faketime(self) -> Self {
        self.faketime_at("+0")
    }

    /// [`ClusterBuilder::faketime`] with the wall clock at `offset` from its first start on
    /// (e.g. `"-15s"`, `"+30s"`): a server whose clock is wrong from the beginning, rather than
    /// one whose clock steps.
    pub fn faketime_at(mut self, offset: &str) -> Self {
        self.faketime = Some(offset.to_owned());
        self
    }

    /// Archives WAL (`archive_mode = on`, `archive_command = 'cp %p …'`) into a directory of
    /// its own, [`Cluster::wal_archive_dir`], for point-in-time restores ([`Cluster::restore`]).
    pub fn wal_archive(mut self) -> Self {
        self.wal_archive = true;
        self
    }

    /// Puts the cluster directory on the memory file system (`/dev/shm`), where an fsync costs
    /// nothing: the server's fsyncs then take just what the test adds (a delay through
    /// `LD_PRELOAD`), not whatever the machine's disk does at that moment.
    pub fn in_memory(mut self) -> Self {
        self.in_memory = true;
        self
    }

    /// Runs a fresh cluster on the installation of `pg_config` (another major than the one the
    /// tests run on, e.g. the old cluster of a pg_upgrade across majors).
    pub fn installation(mut self, pg_config: &str) -> Self {
        self.installation = Some(pg_config_dir(pg_config, "--bindir"));
        self
    }

    /// Creates the cluster (initdb, base backup or restore) and starts it.
    pub fn start(self) -> Cluster {
        let mut cluster = self.create();
        cluster.start();
        cluster
    }

    /// Creates the cluster (initdb, base backup or restore) and its configuration without
    /// starting it (e.g. as the new cluster of [`Cluster::upgrade_from`]).
    pub fn create(self) -> Cluster {
        let dir = if self.in_memory {
            let memory = Path::new(MEMORY_FILE_SYSTEM);
            assert!(
                memory.is_dir(),
                "{MEMORY_FILE_SYSTEM} does not exist: this test needs a memory file system"
            );
            new_cluster_dir_in(memory)
        } else {
            new_cluster_dir()
        };
        let mut environment = self.environment;
        let faketime_file = self.faketime.map(|offset| {
            let (file, variables) = faketime_environment(&dir, "faketime.rc", &offset);
            environment.extend(variables);
            file
        });
        let bin = match &self.origin {
            Origin::Initdb => self.installation.clone().unwrap_or_else(postgres_bin_dir),
            Origin::Standby { bin, .. } | Origin::Restore { bin, .. } => bin.clone(),
        };
        let cluster = Cluster {
            data: dir.join("data"),
            dir,
            bin,
            port: free_port(),
            environment,
            running: false,
            faketime_file,
        };
        // The server user must own the cluster directory (initdb and postgres refuse root).
        chown_to_server_user(&cluster.dir);
        let mut config = Vec::new();
        match &self.origin {
            Origin::Initdb => {
                cluster.server_command("initdb", |command| {
                    command.arg("--pgdata").arg(&cluster.data).args([
                        "--auth=trust",
                        "--username=postgres",
                        "--encoding=UTF8",
                        // Every major alike (PostgreSQL 18's initdb turns checksums on by
                        // default), so pg_upgrade from 15 to 18 finds them equal.
                        "--data-checksums",
                        "--no-sync",
                    ]);
                });
                config.extend([
                    "listen_addresses = ''".to_owned(),
                    "fsync = off".to_owned(),
                    "max_connections = 100".to_owned(),
                ]);
                if self.preload {
                    config.push("shared_preload_libraries = 'snowflake_id'".to_owned());
                }
            }
            Origin::Standby { host, port, .. } => {
                cluster.server_command("pg_basebackup", |command| {
                    command
                        .arg("--pgdata")
                        .arg(&cluster.data)
                        .arg("--host")
                        .arg(host)
                        .arg("--port")
                        .arg(port.to_string())
                        .args([
                            "--username=postgres",
                            "--write-recovery-conf",
                            "--wal-method=stream",
                            "--checkpoint=fast",
                            "--no-sync",
                        ]);
                });
                config.push("hot_standby = on".to_owned());
            }
            Origin::Restore {
                backup, archive, ..
            } => {
                copy_dir(backup, &cluster.data);
                cluster.write_data_file("recovery.signal", b"");
                config.extend([
                    format!("restore_command = 'cp {}/%f %p'", archive.display()),
                    "archive_mode = off".to_owned(),
                    "hot_standby = on".to_owned(),
                ]);
            }
        }
        if self.wal_archive {
            let archive = cluster.wal_archive_dir();
            std::fs::create_dir(&archive).expect("create the WAL archive directory");
            chown_to_server_user(&archive);
            config.extend([
                "archive_mode = on".to_owned(),
                format!("archive_command = 'cp %p {}/%f'", archive.display()),
            ]);
        }
        // The source's own port and socket directory come along in copied configurations;
        // these later lines win.
        config.extend([
            format!("port = {}", cluster.port),
            format!("unix_socket_directories = '{}'", cluster.dir.display()),
        ]);
        config.extend(self.settings);
        cluster.append_config(&config.join("\n"));
        cluster
    }
}

/// A libfaketime timestamp file `name` in `dir` at `offset`, and the environment that runs a
/// process under libfaketime (`LIBFAKETIME`, default Debian's `libfaketimeMT.so.1`) reading
/// that file on every clock call, with the monotonic clock left real.
fn faketime_environment(dir: &Path, name: &str, offset: &str) -> (PathBuf, Vec<(String, String)>) {
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
fn write_fake_time(file: &Path, offset: &str) {
    let temporary = file.with_extension("tmp");
    std::fs::write(&temporary, format!("{offset}\n")).expect("write the faketime file");
    std::fs::rename(&temporary, file).expect("replace the faketime file");
}

/// A fresh, empty directory for one cluster under the system temp dir.
pub(crate) fn new_cluster_dir() -> PathBuf {
    new_cluster_dir_in(&std::env::temp_dir())
}

/// A fresh, empty directory for one cluster under `parent`.
fn new_cluster_dir_in(parent: &Path) -> PathBuf {
    let number = NEXT_CLUSTER.fetch_add(1, Ordering::Relaxed);
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
fn copy_dir(from: &Path, to: &Path) {
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

pub(crate) const SERVER_USER: &str = "postgres";
/// A tmpfs on Debian (and every Linux with glibc's POSIX shared memory).
const MEMORY_FILE_SYSTEM: &str = "/dev/shm";
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

impl Cluster {
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder {
            preload: true,
            settings: Vec::new(),
            environment: Vec::new(),
            faketime: None,
            wal_archive: false,
            in_memory: false,
            installation: None,
            origin: Origin::Initdb,
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
        self.dump_and_restore_into(source, self, target);
    }

    /// [`Cluster::dump_and_restore`] into database `target` of another cluster `into`.
    pub fn dump_and_restore_into(&self, source: &str, into: &Cluster, target: &str) {
        let dump = self.dir.join(format!("{source}.dump"));
        let connection = |cluster: &Cluster| {
            let (host, port) = (cluster.dir.display().to_string(), cluster.port.to_string());
            ["--host".to_owned(), host, "--port".to_owned(), port]
                .into_iter()
                .chain(["--username".to_owned(), "postgres".to_owned()])
        };
        let dumped = Command::new(self.bin.join("pg_dump"))
            .args(connection(self))
            .args(["--format=custom", "--file"])
            .arg(&dump)
            .arg(source)
            .output()
            .expect("run pg_dump");
        assert!(dumped.status.success(), "pg_dump: {}", describe(&dumped));
        let restored = Command::new(into.bin.join("pg_restore"))
            .args(connection(into))
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

    /// Makes a streaming replica of this running cluster and starts it: [`Cluster::replica`]
    /// with no further settings.
    pub fn start_replica(&self) -> Cluster {
        self.replica().start()
    }

    /// A builder for a streaming replica of this running cluster (`pg_basebackup -R -X stream`
    /// over its Unix socket; initdb's default pg_hba trusts local replication), a hot standby in
    /// a directory of its own with the same harness guarantees (own socket dir, no TCP, stopped
    /// and removed on drop). The replica gets the primary's configuration and files (extension,
    /// reservation file) but none of its server environment: no faketime unless the builder
    /// asks for it.
    pub fn replica(&self) -> ClusterBuilder {
        ClusterBuilder {
            origin: Origin::Standby {
                bin: self.bin.clone(),
                host: self.dir.clone(),
                port: self.port,
            },
            ..Cluster::builder()
        }
    }

    /// Waits until `standby` has replayed everything this primary has written so far, up to
    /// `timeout`.
    pub fn wait_for_standby(&self, standby: &Cluster, timeout: Duration) {
        let written: String = self
            .connect()
            .query_one("SELECT pg_current_wal_lsn()::text", &[])
            .expect("pg_current_wal_lsn()")
            .get(0);
        let mut client = standby.connect();
        let mut replayed = String::new();
        let caught_up = wait_until(timeout, || {
            let row = client
                .query_one(
                    "SELECT pg_last_wal_replay_lsn()::text,
                            pg_last_wal_replay_lsn() >= $1::text::pg_lsn",
                    &[&written],
                )
                .expect("pg_last_wal_replay_lsn()");
            replayed = row.get::<_, Option<String>>(0).unwrap_or_default();
            row.get::<_, Option<bool>>(1).unwrap_or(false)
        });
        assert!(
            caught_up,
            "the standby replayed up to {replayed}, not {written}, within {timeout:?}\n{}",
            standby.log_tail()
        );
    }

    /// Promotes this standby to a primary (`pg_ctl promote --wait`): returns once it accepts
    /// writes.
    pub fn promote(&self) {
        self.server_command("pg_ctl", |command| {
            command
                .arg("--pgdata")
                .arg(&self.data)
                .args(["--wait", "--timeout=60", "promote"]);
        });
    }

    /// Waits until this server has left recovery (e.g. a point-in-time restore that promotes
    /// at its target), up to `timeout`.
    pub fn wait_until_primary(&self, timeout: Duration) {
        let mut client = self.wait_for_connection(timeout);
        let promoted = wait_until(timeout, || {
            !client
                .query_one("SELECT pg_is_in_recovery()", &[])
                .map(|row| row.get::<_, bool>(0))
                .unwrap_or(true)
        });
        assert!(
            promoted,
            "still in recovery after {timeout:?}\n{}",
            self.log_tail()
        );
    }

    /// The WAL archive of a cluster started with [`ClusterBuilder::wal_archive`].
    pub fn wal_archive_dir(&self) -> PathBuf {
        self.dir.join("wal-archive")
    }

    /// Takes a plain-format base backup of this running cluster (`pg_basebackup -X stream`)
    /// into a new directory inside its own (removed with it); returns that directory.
    pub fn base_backup(&self) -> PathBuf {
        let number = NEXT_CLUSTER.fetch_add(1, Ordering::Relaxed);
        let backup = self.dir.join(format!("base-backup-{number}"));
        self.server_command("pg_basebackup", |command| {
            command
                .arg("--pgdata")
                .arg(&backup)
                .arg("--host")
                .arg(&self.dir)
                .arg("--port")
                .arg(self.port.to_string())
                .args([
                    "--username=postgres",
                    "--wal-method=stream",
                    "--checkpoint=fast",
                    "--no-sync",
                ]);
        });
        backup
    }

    /// Switches to a new WAL segment and waits until the archiver has archived the one it
    /// closed, so everything written so far is in [`Cluster::wal_archive_dir`].
    pub fn archive_current_wal(&self, client: &mut Client) {
        let segment: String = client
            .query_one("SELECT pg_walfile_name(pg_switch_wal())", &[])
            .expect("pg_switch_wal()")
            .get(0);
        let archived = wait_until(Duration::from_secs(30), || {
            self.wal_archive_dir().join(&segment).exists()
        });
        assert!(
            archived,
            "WAL segment {segment} not archived within 30 s\n{}",
            self.log_tail()
        );
    }

    /// A builder for a point-in-time restore of `backup` (from [`Cluster::base_backup`] of this
    /// cluster) that replays this cluster's WAL archive, so this cluster (whose directory holds
    /// the archive) must outlive the recovery; the test adds the recovery target
    /// (`recovery_target_name`, …) as settings. A restored copy archives nothing.
    pub fn restore(&self, backup: &Path) -> ClusterBuilder {
        ClusterBuilder {
            origin: Origin::Restore {
                bin: self.bin.clone(),
                backup: backup.to_owned(),
                archive: self.wal_archive_dir(),
            },
            ..Cluster::builder()
        }
    }

    /// Rewinds this stopped (cleanly shut down) former primary to the timeline of `source`, a
    /// running server that was promoted from its standby (`pg_rewind --source-server
    /// --write-recovery-conf`), so it can start as `source`'s standby. pg_rewind copies
    /// `source`'s configuration files; this cluster's own port and socket directory are
    /// appended again.
    pub fn rewind_from(&self, source: &Cluster) {
        assert!(!self.running, "pg_rewind needs the target stopped");
        self.server_command("pg_rewind", |command| {
            command
                .arg("--target-pgdata")
                .arg(&self.data)
                .arg(format!("--source-server={}", source.conninfo("postgres")))
                .args(["--write-recovery-conf", "--no-sync"]);
        });
        self.append_config(&format!(
            "port = {}\nunix_socket_directories = '{}'\nhot_standby = on",
            self.port,
            self.dir.display()
        ));
    }

    /// Upgrades the stopped cluster `old` into this new, stopped, never started cluster with
    /// pg_upgrade (copy mode), run as the server user from this cluster's directory, with both
    /// servers on Unix sockets in it. Afterwards `old` is left as it was (copy mode).
    pub fn upgrade_from(&self, old: &Cluster) {
        assert!(
            !self.running && !old.running,
            "pg_upgrade needs both clusters stopped"
        );
        self.server_command("pg_upgrade", |command| {
            command
                .current_dir(&self.dir)
                .arg("--old-bindir")
                .arg(&old.bin)
                .arg("--new-bindir")
                .arg(&self.bin)
                .arg("--old-datadir")
                .arg(&old.data)
                .arg("--new-datadir")
                .arg(&self.data)
                .arg("--old-port")
                .arg(old.port.to_string())
                .arg("--new-port")
                .arg(self.port.to_string())
                .arg("--socketdir")
                .arg(&self.dir)
                .args(["--username=postgres", "--no-sync"]);
        });
    }
}

/// A server tests open sessions on: a [`Cluster`], or a node of a
/// [`auto_failover::Formation`].
pub trait Server: Sync {
    /// A new session in database `postgres` as superuser `postgres`; panics on failure.
    fn session(&self) -> Client;
}

impl Server for Cluster {
    fn session(&self) -> Client {
        self.connect()
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

pub(crate) fn is_root() -> bool {
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
    pg_config_dir(&pg_config_program(), flag)
}

/// The `pg_config` of the installation the tests run against: `$PG_CONFIG`, default the one on
/// PATH.
pub fn pg_config_program() -> String {
    std::env::var("PG_CONFIG").unwrap_or_else(|_| "pg_config".into())
}

/// The major version of the installation the tests run against (`pg_config --version`).
pub fn pg_major() -> u32 {
    let version = pg_config("--version");
    let version = version.to_string_lossy();
    version
        .strip_prefix("PostgreSQL ")
        .and_then(|rest| rest.split(['.', ' ']).next())
        .and_then(|major| major.parse().ok())
        .unwrap_or_else(|| panic!("no major version in pg_config --version: {version}"))
}

/// `pg_config flag` of a given `pg_config` program.
pub(crate) fn pg_config_dir(pg_config: &str, flag: &str) -> PathBuf {
    let output = Command::new(pg_config)
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

/// A port no one listens on now, and never handed out before in this test process: the kernel
/// may give a just-released port again, before the server it was meant for binds it (a
/// pg_auto_failover monitor and its first node once got the same one).
pub(crate) fn free_port() -> u16 {
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        if HANDED_OUT
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(port)
        {
            return port;
        }
    }
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
