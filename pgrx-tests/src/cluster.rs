//! A running throwaway cluster ([`Cluster`]): where it lives, sessions on it, starting and
//! stopping it, its log, dump and restore of a database, and its removal when dropped. How a
//! cluster is made is in `builder`; faults and replication add to it in `faults` and
//! `replication`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::host::{describe, is_root, SERVER_USER};
use crate::{Client, NoTls, PgError};

/// A running throwaway cluster.
pub struct Cluster {
    pub(crate) dir: PathBuf,
    pub(crate) data: PathBuf,
    pub(crate) bin: PathBuf,
    pub(crate) port: u16,
    pub(crate) environment: Vec<(String, String)>,
    pub(crate) running: bool,
    /// libfaketime's timestamp file when started with
    /// [`ClusterBuilder::faketime`](crate::ClusterBuilder::faketime).
    pub(crate) faketime_file: Option<PathBuf>,
}

impl Cluster {
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
        self.try_connect_as(database, "postgres")
    }

    /// Connects to `database` as role `user` (a role the test made; local connections trust).
    pub fn connect_as(&self, database: &str, user: &str) -> Client {
        self.try_connect_as(database, user).unwrap_or_else(|error| {
            panic!(
                "connect to {database} as {user}: {error}\n{}",
                self.log_tail()
            )
        })
    }

    fn try_connect_as(&self, database: &str, user: &str) -> Result<Client, PgError> {
        postgres::Config::new()
            .host_path(&self.dir)
            .port(self.port)
            .user(user)
            .dbname(database)
            .connect(NoTls)
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

    /// Dumps database `source` with pg_dump (custom format) and restores it into the existing,
    /// empty database `target` with pg_restore, stopping at the first error.
    pub fn dump_and_restore(&self, source: &str, target: &str) {
        self.dump_and_restore_into(source, self, target);
    }

    /// [`Cluster::dump_and_restore`] into database `target` of another cluster `into`.
    pub fn dump_and_restore_into(&self, source: &str, into: &Cluster, target: &str) {
        let dump = self.dump_as(source, "postgres");
        into.restore_dump(&dump, target, &[]);
    }

    /// Restores `dump` into database `target` with pg_restore `--exit-on-error` and `options`;
    /// panics with pg_restore's output when it fails.
    pub fn restore_dump(&self, dump: &Path, target: &str, options: &[&str]) {
        let restored = self.pg_restore(dump, target, &[&["--exit-on-error"], options].concat());
        assert!(
            restored.status.success(),
            "pg_restore: {}",
            describe(&restored)
        );
    }

    /// Dumps database `source` with pg_dump (custom format) as role `user`; panics with
    /// pg_dump's message when it fails. Returns the dump's path.
    pub fn dump_as(&self, source: &str, user: &str) -> PathBuf {
        self.dump_with(source, user, &[])
    }

    /// [`Cluster::dump_as`] with pg_dump's `options` too (e.g. `--schema`, `--extension`).
    pub fn dump_with(&self, source: &str, user: &str, options: &[&str]) -> PathBuf {
        self.try_dump_with(source, user, options)
            .unwrap_or_else(|failure| panic!("pg_dump of {source} as {user}: {failure}"))
    }

    /// [`Cluster::dump_with`], or what pg_dump said when it failed.
    pub fn try_dump_with(
        &self,
        source: &str,
        user: &str,
        options: &[&str],
    ) -> Result<PathBuf, String> {
        let dump = self.dir.join(format!(
            "{source}-by-{user}{}.dump",
            options.concat().replace(['-', '=', '/', ' '], "_")
        ));
        let dumped = Command::new(self.bin.join("pg_dump"))
            .args(self.client_options(user))
            .args(options)
            .args(["--format=custom", "--file"])
            .arg(&dump)
            .arg(source)
            .output()
            .expect("run pg_dump");
        if dumped.status.success() {
            Ok(dump)
        } else {
            Err(describe(&dumped))
        }
    }

    /// Restores `dump` into database `target` with this cluster's pg_restore as superuser
    /// `postgres`, with pg_restore's `options` (e.g. `--clean`, `--data-only`); its output.
    pub fn pg_restore(&self, dump: &Path, target: &str, options: &[&str]) -> std::process::Output {
        self.pg_restore_as(dump, target, "postgres", options)
    }

    /// [`Cluster::pg_restore`] as role `user`.
    pub fn pg_restore_as(
        &self,
        dump: &Path,
        target: &str,
        user: &str,
        options: &[&str],
    ) -> std::process::Output {
        Command::new(self.bin.join("pg_restore"))
            .args(self.client_options(user))
            .args(options)
            .args(["--dbname", target])
            .arg(dump)
            .output()
            .expect("run pg_restore")
    }

    /// The path of one of this cluster's PostgreSQL programs (e.g. `pg_restore`).
    pub fn program(&self, name: &str) -> PathBuf {
        self.bin.join(name)
    }

    /// The connection options of a client program (pg_dump, pg_restore) as role `user`.
    fn client_options(&self, user: &str) -> [String; 6] {
        [
            "--host".to_owned(),
            self.dir.display().to_string(),
            "--port".to_owned(),
            self.port.to_string(),
            "--username".to_owned(),
            user.to_owned(),
        ]
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
        self.try_start()
            .unwrap_or_else(|failure| panic!("pg_ctl start failed: {failure}"));
    }

    /// Starts the server; what pg_ctl and the server log said when it does not start.
    pub fn try_start(&mut self) -> Result<(), String> {
        let log = self.dir.join("server.log");
        self.try_server_command("pg_ctl", |command| {
            command
                .arg("--pgdata")
                .arg(&self.data)
                .arg("--log")
                .arg(&log);
            command.args(["--wait", "--timeout=60", "start"]);
        })?;
        self.running = true;
        Ok(())
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

    /// The whole server log.
    pub fn server_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Runs a server binary (as the server user) with this cluster's environment.
    pub(crate) fn server_command(&self, program: &str, configure: impl FnOnce(&mut Command)) {
        self.try_server_command(program, configure)
            .unwrap_or_else(|failure| panic!("{program} failed: {failure}"));
    }

    /// Runs `program` of this installation as the server's user; on failure, its output and
    /// the server log's tail.
    fn try_server_command(
        &self,
        program: &str,
        configure: impl FnOnce(&mut Command),
    ) -> Result<(), String> {
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
        if output.status.success() {
            Ok(())
        } else {
            Err(format!("{}\n{}", describe(&output), self.log_tail()))
        }
    }
}

/// A server tests open sessions on: a [`Cluster`], or a node of a
/// [`auto_failover::Formation`](crate::auto_failover::Formation).
pub trait Server: Sync {
    /// A new session as superuser `postgres` (a cluster's in database `postgres`); panics on
    /// failure.
    fn session(&self) -> Client;
}

impl Server for Cluster {
    fn session(&self) -> Client {
        self.connect()
    }
}

/// One database of a cluster, as a [`Server`] whose sessions connect to it.
pub struct InDatabase<'a> {
    pub cluster: &'a Cluster,
    pub database: &'a str,
}

impl Server for InDatabase<'_> {
    fn session(&self) -> Client {
        self.cluster.connect_to(self.database)
    }
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

/// The `runuser` (as root) or `sh` arguments that stop the server immediately, for `drop`.
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
