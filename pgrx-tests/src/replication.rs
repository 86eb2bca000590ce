//! Clusters made from, or rejoining, another cluster's data: streaming standbys and their
//! promotion, base backups and point-in-time restores from a WAL archive, pg_rewind and
//! pg_upgrade.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::builder::Origin;
use crate::host::NEXT_DIRECTORY;
use crate::{wait_until, Client, Cluster, ClusterBuilder};

impl Cluster {
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
        ClusterBuilder::from_origin(Origin::Standby {
            bin: self.bin.clone(),
            host: self.dir.clone(),
            port: self.port,
        })
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
        let number = NEXT_DIRECTORY.fetch_add(1, Ordering::Relaxed);
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
        ClusterBuilder::from_origin(Origin::Restore {
            bin: self.bin.clone(),
            backup: backup.to_owned(),
            archive: self.wal_archive_dir(),
        })
    }

    /// A builder for a copy of `backup` (from [`Cluster::base_backup`] of this cluster) started
    /// as it is: it recovers to the backup's end and stays on this cluster's timeline, as a
    /// restored file-system snapshot does.
    pub fn snapshot_copy(&self, backup: &Path) -> ClusterBuilder {
        ClusterBuilder::from_origin(Origin::Snapshot {
            bin: self.bin.clone(),
            backup: backup.to_owned(),
        })
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
