//! How a new cluster is made ([`ClusterBuilder`]): fresh (initdb, or a copy of its template), as a
//! streaming standby of a running cluster, or as a point-in-time restore of a base backup; with
//! its settings, its server environment (libfaketime) and where its directory lives.

use std::path::{Path, PathBuf};

use crate::faults::faketime_environment;
use crate::host::{
    chown_to_server_user, copy_dir, free_port, new_cluster_dir, new_cluster_dir_in, PGBACKREST,
};
use crate::initdb_template;
use crate::installation::{pg_config_dir, postgres_bin_dir};
use crate::Cluster;

/// A tmpfs on Debian (and every Linux with glibc's POSIX shared memory).
const MEMORY_FILE_SYSTEM: &str = "/dev/shm";

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
pub(crate) enum Origin {
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
    /// A copy of the base backup `backup` started as it is, without `recovery.signal`: crash
    /// recovery to the backup's end, on the same timeline, as a restored file-system snapshot of
    /// a data directory starts.
    Snapshot { bin: PathBuf, backup: PathBuf },
    /// `pgbackrest … restore` into the new data directory (`restore` holds its arguments but
    /// `--pg1-path`); pgBackRest writes the recovery settings.
    PgBackRestRestore { bin: PathBuf, restore: Vec<String> },
}

impl Cluster {
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::from_origin(Origin::Initdb)
    }
}

impl ClusterBuilder {
    /// The default settings for a cluster whose data directory comes from `origin`.
    pub(crate) fn from_origin(origin: Origin) -> ClusterBuilder {
        ClusterBuilder {
            preload: true,
            settings: Vec::new(),
            environment: Vec::new(),
            faketime: None,
            wal_archive: false,
            in_memory: false,
            installation: None,
            origin,
        }
    }

    /// Leave `snowflake_id` out of `shared_preload_libraries`.
    pub fn without_preload(mut self) -> Self {
        self.preload = false;
        self
    }

    /// Adds a `postgresql.conf` line, e.g. `"snowflake_id.node_id = 3"`.
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
            Origin::Standby { bin, .. }
            | Origin::Restore { bin, .. }
            | Origin::Snapshot { bin, .. }
            | Origin::PgBackRestRestore { bin, .. } => bin.clone(),
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
                // initdb runs under the server's environment (libfaketime, a preloaded
                // library): a cluster that has one gets an initdb of its own, the others a copy
                // of the installation's template.
                if cluster.environment.is_empty() {
                    initdb_template::fresh_data_directory(&cluster);
                } else {
                    initdb_template::initdb(&cluster, &cluster.data);
                }
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
            Origin::Snapshot { backup, .. } => {
                copy_dir(backup, &cluster.data);
                config.push("archive_mode = off".to_owned());
            }
            Origin::PgBackRestRestore { restore, .. } => {
                cluster.server_command(PGBACKREST, |command| {
                    command
                        .arg(format!("--pg1-path={}", cluster.data.display()))
                        .args(restore);
                });
                config.extend([
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
            // Dynamic shared memory in the data directory (pg_dynshmem), which goes with the
            // cluster: a postmaster a test kills leaves its POSIX segments in /dev/shm until
            // the machine restarts (19 from 15's tests that do not run alone; 4 with this line,
            // from pg_auto_failover's servers, which pg_autoctl configures).
            "dynamic_shared_memory_type = mmap".to_owned(),
        ]);
        config.extend(self.settings);
        cluster.append_config(&config.join("\n"));
        cluster
    }
}
