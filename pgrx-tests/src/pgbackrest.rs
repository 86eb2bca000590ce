//! A pgBackRest repository (trixie's `pgbackrest`, which supports PostgreSQL 15 to 18) for a
//! test cluster: its configuration, repository, lock, log and spool directories live in a
//! directory of its own (owned by the server's OS user, who runs every pgBackRest command, as
//! `archive_command` does), removed when dropped. One stanza, `main`, for one cluster.

use std::path::PathBuf;
use std::time::Duration;

use crate::builder::Origin;
use crate::host::{chown_to_server_user, new_cluster_dir, PGBACKREST};
use crate::{wait_until, Client, Cluster, ClusterBuilder};

const STANZA: &str = "main";

pub struct PgBackRest {
    dir: PathBuf,
}

impl PgBackRest {
    /// A new, empty repository directory.
    pub fn new() -> PgBackRest {
        assert!(
            std::path::Path::new(PGBACKREST).exists(),
            "{PGBACKREST} is missing: the README's test command installs it"
        );
        let dir = new_cluster_dir();
        for sub in ["repo", "lock", "log", "spool"] {
            std::fs::create_dir(dir.join(sub)).expect("create a pgBackRest directory");
        }
        chown_to_server_user(&dir);
        PgBackRest { dir }
    }

    fn config(&self) -> PathBuf {
        self.dir.join("pgbackrest.conf")
    }

    /// The settings that archive a cluster's WAL into this repository (`archive-push`).
    pub fn archive_settings(&self) -> [String; 2] {
        [
            "archive_mode = on".to_owned(),
            format!(
                "archive_command = '{PGBACKREST} --config={} --stanza={STANZA} archive-push %p'",
                self.config().display()
            ),
        ]
    }

    /// Writes the configuration: the repository here, the stanza for `cluster`'s data
    /// directory and socket.
    pub fn configure(&self, cluster: &Cluster) {
        let dir = self.dir.display();
        std::fs::write(
            self.config(),
            format!(
                "[global]
repo1-path={dir}/repo
repo1-retention-full=2
lock-path={dir}/lock
log-path={dir}/log
spool-path={dir}/spool
log-level-console=warn
log-level-file=detail
start-fast=y

[{STANZA}]
pg1-path={data}
pg1-socket-path={socket}
pg1-port={port}
",
                data = cluster.data_dir().display(),
                socket = cluster.socket_dir().display(),
                port = cluster.port(),
            ),
        )
        .expect("write pgbackrest.conf");
        chown_to_server_user(&self.dir);
    }

    /// Runs `pgbackrest --config=… --stanza=main ARGS…` as the server user (with `cluster`'s
    /// environment); panics with its output on failure.
    pub fn run(&self, cluster: &Cluster, args: &[&str]) {
        cluster.server_command(PGBACKREST, |command| {
            command.args(self.common_args()).args(args);
        });
    }

    fn common_args(&self) -> [String; 2] {
        [
            format!("--config={}", self.config().display()),
            format!("--stanza={STANZA}"),
        ]
    }

    /// Switches `cluster` to a new WAL segment and waits until `archive-push` has stored the
    /// one it closed.
    pub fn archive_current_wal(&self, cluster: &Cluster, client: &mut Client) {
        let segment: String = client
            .query_one("SELECT pg_walfile_name(pg_switch_wal())", &[])
            .expect("pg_switch_wal()")
            .get(0);
        let archived = wait_until(Duration::from_secs(60), || {
            client
                .query_one(
                    "SELECT coalesce(last_archived_wal >= $1, false) FROM pg_stat_archiver",
                    &[&segment],
                )
                .map(|row| row.get::<_, bool>(0))
                .unwrap_or(false)
        });
        assert!(
            archived,
            "WAL segment {segment} not archived within 60 s\n{}",
            cluster.log_tail()
        );
    }

    /// A builder for a cluster restored from this repository (`pgbackrest restore`) up to
    /// `target`, a time, then promoted: `--type=time --target-action=promote`. Its binaries are
    /// `cluster`'s; it archives nothing.
    pub fn restore_to_time(&self, cluster: &Cluster, target: &str) -> ClusterBuilder {
        let mut restore: Vec<String> = self.common_args().into();
        restore.extend([
            "--type=time".to_owned(),
            format!("--target={target}"),
            "--target-action=promote".to_owned(),
            "restore".to_owned(),
        ]);
        ClusterBuilder::from_origin(Origin::PgBackRestRestore {
            bin: cluster.bin.clone(),
            restore,
        })
    }
}

impl Default for PgBackRest {
    fn default() -> Self {
        PgBackRest::new()
    }
}

impl Drop for PgBackRest {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
