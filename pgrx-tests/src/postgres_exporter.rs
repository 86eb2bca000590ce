//! A real postgres_exporter (Debian's `prometheus-postgres-exporter`) for a test cluster, with
//! the repository's queries file (`monitoring/postgres_exporter-queries.yaml`) and none of its
//! default metrics: it listens on 127.0.0.1 only, reaches the cluster through its Unix socket,
//! and is stopped when dropped, even when the test panics.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::fixtures::workspace_root;
use crate::host::free_port;
use crate::{wait_until, Cluster};

/// Where Debian's package puts the program.
const EXPORTER: &str = "/usr/bin/prometheus-postgres-exporter";

pub struct PostgresExporter {
    port: u16,
    process: Child,
}

impl PostgresExporter {
    /// Starts the exporter for database `database` of `cluster` (user `postgres`) and waits
    /// until it serves `/metrics`.
    pub fn start(cluster: &Cluster, database: &str) -> PostgresExporter {
        assert!(
            std::path::Path::new(EXPORTER).exists(),
            "{EXPORTER} is missing: install Debian's prometheus-postgres-exporter (the README's \
             test command does)"
        );
        let port = free_port();
        let queries = workspace_root().join("monitoring/postgres_exporter-queries.yaml");
        let process = Command::new(EXPORTER)
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
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus-postgres-exporter");
        let exporter = PostgresExporter { port, process };
        assert!(
            wait_until(Duration::from_secs(20), || exporter.try_scrape().is_ok()),
            "prometheus-postgres-exporter does not serve /metrics on 127.0.0.1:{port}"
        );
        exporter
    }

    /// `GET /metrics`: the exposition text.
    pub fn scrape(&self) -> String {
        self.try_scrape().expect("scrape /metrics")
    }

    fn try_scrape(&self) -> std::io::Result<String> {
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

impl Drop for PostgresExporter {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}
