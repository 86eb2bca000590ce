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
//! ID can be stored in, in [`column_shapes`]; a Citus cluster, in [`citus`].
//!
//! The harness itself, by what each part provides: `cluster` (a running cluster: sessions,
//! start and stop, its log, removal on drop), `builder` (making one), `initdb_template` (fresh
//! data directories copied from one initdb per installation), `faults` (libfaketime,
//! planted files, killed backends), `replication` (standbys, restores, pg_rewind, pg_upgrade),
//! `installation` (the PostgreSQL under test, through `pg_config`), `host` (the server's OS
//! user, directories, ports) and `assertions` (polling, database errors).

pub use postgres::{Client, Error as PgError, NoTls, Row};

mod assertions;
mod builder;
mod cluster;
mod faults;
mod host;
mod initdb_template;
mod installation;
mod replication;

pub mod alert_rules;
pub mod auto_failover;
pub mod citus;
pub mod column_shapes;
pub mod exporters;
pub mod fixtures;
pub mod lagging_link;
pub mod pgbackrest;
pub mod pgbouncer;

pub use assertions::{error_parts, wait_until, within_tries};
pub use builder::ClusterBuilder;
pub use cluster::{Cluster, InDatabase, Server};
pub use faults::backend_pid;
pub use host::free_port;
pub use installation::{pg_config, pg_config_program, pg_major, postgres_bin_dir};
