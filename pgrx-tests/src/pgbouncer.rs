//! A real PgBouncer (Debian's `pgbouncer`) in front of a test cluster: it listens on 127.0.0.1
//! only, runs as the server user when the tests run as root (PgBouncer refuses root), and is
//! stopped and its directory deleted when dropped, even when the test panics.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::host::{chown_to_server_user, free_port, is_root, new_cluster_dir, SERVER_USER};
use crate::{wait_until, Client, Cluster, NoTls, PgError};

/// Where Debian's package puts the program.
const PGBOUNCER: &str = "/usr/sbin/pgbouncer";

/// How a [`PgBouncer`] pools `database`'s server connections.
pub struct Pooling<'a> {
    pub database: &'a str,
    /// `session`, `transaction` or `statement`.
    pub mode: &'a str,
    /// Server connections at most.
    pub server_connections: u32,
    /// Client connections at most.
    pub client_connections: u32,
}

pub struct PgBouncer {
    dir: PathBuf,
    port: u16,
    process: Child,
}

impl PgBouncer {
    /// Starts PgBouncer for `cluster` (trust authentication, user `postgres`) and waits until
    /// it accepts connections.
    pub fn start(cluster: &Cluster, pooling: &Pooling) -> PgBouncer {
        assert!(
            std::path::Path::new(PGBOUNCER).exists(),
            "{PGBOUNCER} is missing: install Debian's pgbouncer (the README's test command does)"
        );
        let dir = new_cluster_dir();
        let port = free_port();
        let Pooling {
            database,
            mode,
            server_connections,
            client_connections,
        } = pooling;
        std::fs::write(dir.join("userlist.txt"), "\"postgres\" \"\"\n").unwrap();
        let config = format!(
            "[databases]
{database} = host={socket_dir} port={server_port} dbname={database} user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {dir}/userlist.txt
pool_mode = {mode}
default_pool_size = {server_connections}
max_db_connections = {server_connections}
max_client_conn = {client_connections}
logfile = {dir}/pgbouncer.log
ignore_startup_parameters = extra_float_digits
",
            socket_dir = cluster.socket_dir().display(),
            server_port = cluster.port(),
            dir = dir.display(),
        );
        std::fs::write(dir.join("pgbouncer.ini"), config).unwrap();
        chown_to_server_user(&dir);
        // setpriv execs PgBouncer itself, so the child is PgBouncer and killing it stops it.
        let mut command = if is_root() {
            let mut command = Command::new("setpriv");
            command.args([
                &format!("--reuid={SERVER_USER}"),
                &format!("--regid={SERVER_USER}"),
                "--init-groups",
                "--",
                PGBOUNCER,
            ]);
            command
        } else {
            Command::new(PGBOUNCER)
        };
        let process = command
            .arg(dir.join("pgbouncer.ini"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pgbouncer");
        let bouncer = PgBouncer { dir, port, process };
        assert!(
            wait_until(Duration::from_secs(60), || bouncer
                .try_connect_to(database)
                .is_ok()),
            "pgbouncer did not accept connections:\n{}",
            bouncer.log()
        );
        bouncer
    }

    pub fn try_connect_to(&self, database: &str) -> Result<Client, PgError> {
        postgres::Config::new()
            .host("127.0.0.1")
            .port(self.port)
            .user("postgres")
            .dbname(database)
            .connect(NoTls)
    }

    /// PgBouncer's log file.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
