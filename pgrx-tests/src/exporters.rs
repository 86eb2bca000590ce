//! The real exporters of `monitoring/` for a test cluster: postgres_exporter (Debian's
//! `prometheus-postgres-exporter`) with `postgres_exporter-queries.yaml` and none of its
//! default metrics, or any exporter command a test makes (query-exporter, from PyPI, in the
//! virtual environment the test command makes). Each listens on 127.0.0.1 only, reaches the
//! cluster through its Unix socket, and is stopped when dropped, even when the test panics.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::fixtures::workspace_root;
use crate::host::free_port;
use crate::{wait_until, Cluster};

/// Where Debian's package puts postgres_exporter.
pub const POSTGRES_EXPORTER: &str = "/usr/bin/prometheus-postgres-exporter";
/// Where the test command installs query-exporter (scripts/install-postgres.sh).
pub const QUERY_EXPORTER: &str = "/opt/snowflake_id/query-exporter/bin/query-exporter";

pub struct Exporter {
    port: u16,
    process: Child,
    /// The exporter's output.
    log: PathBuf,
}

impl Exporter {
    /// Starts postgres_exporter for database `database` of `cluster` (user `postgres`) and
    /// waits until it serves `/metrics`.
    pub fn postgres_exporter(cluster: &Cluster, database: &str) -> Exporter {
        Exporter::start_with(|port| {
            let queries = workspace_root().join("monitoring/postgres_exporter-queries.yaml");
            let mut command = program(POSTGRES_EXPORTER, "Debian's prometheus-postgres-exporter");
            command
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg(format!("--extend.query-path={}", queries.display()))
                .args(["--disable-default-metrics", "--disable-settings-metrics"])
                .env(
                    "DATA_SOURCE_NAME",
                    format!(
                        "host={} port={} user=postgres dbname={database} sslmode=disable",
                        cluster.socket_dir().display(),
                        cluster.port()
                    ),
                );
            command
        })
    }

    /// Starts the exporter `command_for(port)` makes, told to listen on 127.0.0.1:`port` (a
    /// free one), and waits until it serves `/metrics`. Its output goes to a file beside the
    /// clusters, shown if it never serves. The wait is long: query-exporter (Python) imports
    /// for seconds before it listens, and longer on a machine busy with other tests.
    pub fn start_with(command_for: impl FnOnce(u16) -> Command) -> Exporter {
        let port = free_port();
        let mut command = command_for(port);
        let log = std::env::temp_dir().join(format!("snowflake-exporter-{port}.log"));
        let output =
            File::create(&log).unwrap_or_else(|error| panic!("create {}: {error}", log.display()));
        let process = command
            .stdin(Stdio::null())
            .stdout(output.try_clone().expect("the exporter's log"))
            .stderr(output)
            .spawn()
            .unwrap_or_else(|error| panic!("start {command:?}: {error}"));
        let mut exporter = Exporter { port, process, log };
        let mut exited = None;
        let serves = wait_until(Duration::from_secs(60), || {
            exited = exporter.process.try_wait().ok().flatten();
            exited.is_some() || exporter.try_scrape().is_ok()
        });
        assert!(
            serves && exited.is_none(),
            "{command:?} does not serve /metrics on 127.0.0.1:{port} ({}); its output:\n{}",
            exited.map_or("still running".to_owned(), |status| status.to_string()),
            std::fs::read_to_string(&exporter.log).unwrap_or_default()
        );
        exporter
    }

    /// `GET /metrics`: the exposition text (panics if the exporter does not answer).
    pub fn scrape(&self) -> String {
        self.try_scrape().expect("scrape /metrics")
    }

    /// `GET /metrics`, or why it failed (the server restarting, the exporter not up yet).
    pub fn try_scrape(&self) -> std::io::Result<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(20)))?;
        stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        match response.split_once("\r\n\r\n") {
            Some((head, body))
                if head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200") =>
            {
                Ok(body.to_owned())
            }
            _ => Err(std::io::Error::other(format!(
                "not a 200 response: {response:.200}"
            ))),
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// A command for the exporter at `path`, which the test command installs (`what`).
pub fn program(path: &str, what: &str) -> Command {
    assert!(
        Path::new(path).exists(),
        "{path} is missing: install {what} (the README's test command does)"
    );
    Command::new(path)
}
