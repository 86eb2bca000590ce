//! A pg_auto_failover formation on this machine: a monitor and data nodes, each a `pg_autoctl run`
//! keeper that starts and supervises its own PostgreSQL server of the installation under test
//! (`--pgctl`). For PostgreSQL 15 that is Debian's `postgresql-15-auto-failover` with the
//! `pg_autoctl` of `pg-auto-failover-cli`; for the source-built majors, `pg_autoctl` and the
//! extension built by `scripts/install-postgres.sh` into the installation of
//! `AUTO_FAILOVER_PG_CONFIG` (its `bin/pg_autoctl` is used when it exists), which also runs the
//! monitor.
//!
//! Same guarantees as [`Cluster`](crate::Cluster): everything lives in a fresh directory under
//! the system temp dir (data directories, sockets, and pg_autoctl's configuration, state and
//! pid files through `XDG_CONFIG_HOME`, `XDG_DATA_HOME`, `XDG_RUNTIME_DIR`), servers run as the
//! `postgres` OS user and listen on 127.0.0.1 and a Unix socket in that directory only
//! (`--listen 127.0.0.1`, `--auth trust` entries for 127.0.0.0/8, `--no-ssl`), and dropping the
//! [`Formation`] stops every keeper (its process group: keeper, its services and its
//! postmaster) and every server, even when the test panics. The data nodes preload
//! snowflake_id (with `snowflake_id.node_id` unset) beside pg_autoctl's `pg_stat_statements`; the
//! monitor checks health every 500 ms and fails over after 2 s without a report, so a failover
//! takes seconds.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::faults::{faketime_environment, kill, write_fake_time};
use crate::host::{
    chown_to_server_user, describe, free_port, is_root, new_cluster_dir, SERVER_USER,
};
use crate::installation::pg_config_dir;
use crate::{postgres_bin_dir, wait_until, Client, NoTls, PgError, Server};

const SIGTERM: i32 = 15;
const SIGKILL: i32 = 9;

/// A monitor and data nodes, each run by a `pg_autoctl run` keeper.
pub struct Formation {
    dir: PathBuf,
    /// The data nodes' installation (the one under test).
    bin: PathBuf,
    /// The installation holding `pg_autoctl` and the `pgautofailover` extension, for the
    /// monitor: `AUTO_FAILOVER_PG_CONFIG`'s, by default the one under test. (pg_auto_failover
    /// supports PostgreSQL up to 17, so for 18 scripts/test.sh points it at 17.)
    monitor_bin: PathBuf,
    monitor_port: u16,
    /// Every server's data directory, for the final `pg_ctl stop`.
    data_dirs: Vec<PathBuf>,
    keepers: Vec<Keeper>,
    /// libfaketime's timestamp file of the first node, when it runs under libfaketime.
    faketime_file: Option<PathBuf>,
    /// The first node's environment (libfaketime's), for its pg_autoctl commands and keeper.
    first_environment: Vec<(String, String)>,
}

/// One running `pg_autoctl run`, leader of its own process group.
struct Keeper {
    name: String,
    child: Child,
}

/// A data node: its name (e.g. `node1`), port and socket directory.
#[derive(Clone, Debug)]
pub struct Node {
    pub name: String,
    pub port: u16,
    socket_dir: PathBuf,
}

impl Node {
    /// Connects to database `postgres` over the node's Unix socket.
    pub fn try_connect(&self) -> Result<Client, PgError> {
        postgres::Config::new()
            .host_path(&self.socket_dir)
            .port(self.port)
            .user("postgres")
            .dbname("postgres")
            .connect(NoTls)
    }
}

impl Server for Node {
    fn session(&self) -> Client {
        self.try_connect()
            .unwrap_or_else(|error| panic!("connect to {}: {error}", self.name))
    }
}

/// The monitor's view of a node (`pgautofailover.node`).
#[derive(Clone, Debug)]
pub struct NodeState {
    pub name: String,
    pub reported: String,
    pub goal: String,
}

impl Formation {
    /// Creates and runs the monitor, then `nodes` data nodes one after the other (the first
    /// initdb's and becomes the primary, the others are base backups of it), and waits until the
    /// monitor reports one primary and the rest secondaries. With `first_clock`, the first
    /// node (pg_autoctl and its server) runs under libfaketime with its wall clock at that
    /// offset from the start (see [`Formation::set_fake_time`]).
    pub fn start(nodes: usize, first_clock: Option<&str>) -> (Formation, Vec<Node>) {
        let dir = new_cluster_dir();
        for sub in ["config", "share", "run"] {
            std::fs::create_dir(dir.join(sub)).expect("create pg_autoctl's directories");
        }
        chown_to_server_user(&dir);
        let mut formation = Formation {
            dir,
            bin: postgres_bin_dir(),
            monitor_bin: std::env::var("AUTO_FAILOVER_PG_CONFIG")
                .map(|pg_config| pg_config_dir(&pg_config, "--bindir"))
                .unwrap_or_else(|_| postgres_bin_dir()),
            monitor_port: free_port(),
            data_dirs: Vec::new(),
            keepers: Vec::new(),
            faketime_file: None,
            first_environment: Vec::new(),
        };
        if let Some(offset) = first_clock {
            let (file, environment) =
                faketime_environment(&formation.dir, "node1.faketime", offset);
            chown_to_server_user(&file);
            formation.faketime_file = Some(file);
            formation.first_environment = environment;
        }
        let monitor_data = formation.dir.join("monitor");
        formation.data_dirs.push(monitor_data.clone());
        formation.autoctl(false, &formation.monitor_bin, |command| {
            command
                .args(["create", "monitor", "--pgdata"])
                .arg(&monitor_data)
                .arg("--pgport")
                .arg(formation.monitor_port.to_string());
        });
        formation.append_auto_conf(
            &monitor_data,
            // Checked often (a killed node refuses connections at once), but a node whose
            // keeper a busy machine starves for a few seconds is not failed over before the
            // test kills it.
            "pgautofailover.health_check_period = 500
             pgautofailover.health_check_timeout = 3000
             pgautofailover.health_check_max_retries = 1
             pgautofailover.health_check_retry_delay = 200
             pgautofailover.node_considered_unhealthy_timeout = 10000
             pgautofailover.primary_demote_timeout = 5000
             pgautofailover.startup_grace_period = 1000",
        );
        formation.run_keeper("monitor", &monitor_data, false);
        let mut created = Vec::new();
        for number in 1..=nodes {
            let node = Node {
                name: format!("node{number}"),
                port: free_port(),
                socket_dir: formation.dir.clone(),
            };
            let data = formation.dir.join(&node.name);
            formation.data_dirs.push(data.clone());
            let monitor_uri = format!(
                "postgres://autoctl_node@127.0.0.1:{}/pg_auto_failover?sslmode=disable",
                formation.monitor_port
            );
            formation.autoctl(number == 1, &formation.bin, |command| {
                command
                    .args(["create", "postgres", "--pgdata"])
                    .arg(&data)
                    .arg("--pgport")
                    .arg(node.port.to_string())
                    .args(["--pghost", "127.0.0.1", "--name", &node.name])
                    .args(["--monitor", &monitor_uri]);
            });
            // Later nodes are base backups of the first and bring these lines along.
            if number == 1 {
                formation.append_auto_conf(
                    &data,
                    "shared_preload_libraries = 'pg_stat_statements,snowflake_id'",
                );
            }
            formation.run_keeper(&node.name, &data, number == 1);
            created.push(node);
            let expected = created.len();
            formation.wait_for(
                Duration::from_secs(60),
                "the nodes to be in sync",
                |states| {
                    states.len() == expected
                        && states.iter().all(|s| s.reported == s.goal)
                        && states.iter().all(|s| {
                            ["single", "primary", "secondary"].contains(&s.reported.as_str())
                        })
                },
            );
        }
        (formation, created)
    }

    /// The monitor's view of every node, in node id order.
    pub fn states(&self) -> Result<Vec<NodeState>, PgError> {
        let mut monitor = postgres::Config::new()
            .host_path(&self.dir)
            .port(self.monitor_port)
            .user("postgres")
            .dbname("pg_auto_failover")
            .connect(NoTls)?;
        let rows = monitor.query(
            "SELECT nodename, reportedstate::text, goalstate::text
             FROM pgautofailover.node ORDER BY nodeid",
            &[],
        )?;
        Ok(rows
            .iter()
            .map(|row| NodeState {
                name: row.get(0),
                reported: row.get(1),
                goal: row.get(2),
            })
            .collect())
    }

    /// Polls the monitor until `condition` holds for the node states, up to `timeout`; panics
    /// with the last states and `what` otherwise.
    pub fn wait_for(
        &self,
        timeout: Duration,
        what: &str,
        mut condition: impl FnMut(&[NodeState]) -> bool,
    ) -> Vec<NodeState> {
        let mut last = Vec::new();
        let held = wait_until(timeout, || {
            last = self.states().unwrap_or_default();
            !last.is_empty() && condition(&last)
        });
        assert!(
            held,
            "pg_auto_failover: no {what} within {timeout:?}; node states: {last:?}\n{}",
            self.log_tails()
        );
        last
    }

    /// Kills `node`'s keeper and its server at once (SIGKILL to the keeper's process group:
    /// pg_autoctl, its services and the postmaster), as when the node's machine dies.
    pub fn kill_node(&mut self, node: &Node) {
        let index = self
            .keepers
            .iter()
            .position(|keeper| keeper.name == node.name)
            .unwrap_or_else(|| panic!("no running keeper for {}", node.name));
        let mut keeper = self.keepers.remove(index);
        let group = keeper.child.id() as i32;
        // SAFETY: kill has no memory-safety preconditions; the group is the keeper's own.
        let result = unsafe { kill(-group, SIGKILL) };
        assert_eq!(
            result,
            0,
            "kill -9 -{group}: {}",
            std::io::Error::last_os_error()
        );
        let _ = keeper.child.wait();
    }

    /// The end of every keeper's log, for failure messages.
    pub fn log_tails(&self) -> String {
        let mut text = String::new();
        for name in std::iter::once("monitor".to_owned())
            .chain(self.data_dirs.iter().skip(1).map(|d| file_name(d)))
        {
            let log =
                std::fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let start = lines.len().saturating_sub(15);
            text += &format!(
                "--- {name} keeper log (tail) ---\n{}\n",
                lines[start..].join("\n")
            );
        }
        text
    }

    /// Moves the wall clock of the first node (started with `first_clock`), pg_autoctl's and
    /// its server's, like [`Cluster::set_fake_time`](crate::Cluster::set_fake_time).
    pub fn set_fake_time(&self, offset: &str) {
        let file = self
            .faketime_file
            .as_ref()
            .expect("set_fake_time needs a formation started with first_clock");
        write_fake_time(file, offset);
    }

    /// Runs one `pg_autoctl create` command to completion as the server user, for a server of
    /// the installation in `bin` (with the first node's environment when `first`).
    fn autoctl(&self, first: bool, bin: &Path, configure: impl FnOnce(&mut Command)) {
        let mut command = self.autoctl_command(first);
        configure(&mut command);
        command.args([
            "--hostname",
            "127.0.0.1",
            "--listen",
            "127.0.0.1",
            "--auth",
            "trust",
            "--no-ssl",
            "--pgctl",
        ]);
        command.arg(bin.join("pg_ctl"));
        let output = command
            .output()
            .expect("run pg_autoctl (scripts/test.sh installs it)");
        assert!(
            output.status.success(),
            "pg_autoctl failed: {}\n{}",
            describe(&output),
            self.log_tails()
        );
    }

    /// `pg_autoctl` as the server user, with its files in the formation's directory (and the
    /// first node's environment when `first`).
    fn autoctl_command(&self, first: bool) -> Command {
        let mut command = if is_root() {
            let mut command = Command::new("runuser");
            command.args(["-u", SERVER_USER, "--", "env"]);
            command
        } else {
            Command::new("env")
        };
        for (name, sub) in [
            ("XDG_CONFIG_HOME", "config"),
            ("XDG_DATA_HOME", "share"),
            ("XDG_RUNTIME_DIR", "run"),
        ] {
            command.arg(format!("{name}={}", self.dir.join(sub).display()));
        }
        if first {
            for (name, value) in &self.first_environment {
                command.arg(format!("{name}={value}"));
            }
        }
        let own = self.monitor_bin.join("pg_autoctl");
        command.arg(if own.exists() {
            own
        } else {
            PathBuf::from("pg_autoctl")
        });
        command.current_dir(&self.dir);
        command
    }

    /// Starts `pg_autoctl run` for `data` in a process group of its own, logging to
    /// `<name>.log` (with the first node's environment when `first`).
    fn run_keeper(&mut self, name: &str, data: &Path, first: bool) {
        use std::os::unix::process::CommandExt;
        let log = std::fs::File::create(self.dir.join(format!("{name}.log")))
            .expect("create the keeper log");
        let mut command = self.autoctl_command(first);
        command
            .args(["run", "--pgdata"])
            .arg(data)
            .stdout(log.try_clone().expect("clone the log file"))
            .stderr(log)
            .process_group(0);
        let child = command
            .spawn()
            .expect("start pg_autoctl (scripts/test.sh installs it)");
        self.keepers.push(Keeper {
            name: name.to_owned(),
            child,
        });
    }

    /// Appends settings to a server's `postgresql.auto.conf`, read after pg_autoctl's own
    /// configuration file: small shared buffers instead of pg_autoctl's share of the machine's
    /// memory, the Unix socket in the formation's directory, and `lines`.
    fn append_auto_conf(&self, data: &Path, lines: &str) {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.auto.conf"))
            .expect("open postgresql.auto.conf");
        writeln!(
            file,
            "shared_buffers = '16MB'\nunix_socket_directories = '{}'",
            self.dir.display()
        )
        .expect("write postgresql.auto.conf");
        for line in lines.lines() {
            writeln!(file, "{}", line.trim()).expect("write postgresql.auto.conf");
        }
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl Drop for Formation {
    fn drop(&mut self) {
        // Data nodes first, the monitor (started first) last.
        for keeper in self.keepers.iter_mut().rev() {
            let group = keeper.child.id() as i32;
            // SAFETY: kill has no memory-safety preconditions; the group is the keeper's own.
            unsafe { kill(-group, SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(15);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = keeper.child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            // Whatever is left of the group (SIGKILL to a group that is gone fails harmlessly).
            // SAFETY: as above.
            unsafe { kill(-group, SIGKILL) };
            let _ = keeper.child.wait();
        }
        // Every postmaster was in its keeper's process group; one that is somehow still there
        // (its pid file names a live process started on this data directory) is killed too.
        for data in &self.data_dirs {
            let pid = std::fs::read_to_string(data.join("postmaster.pid"))
                .ok()
                .and_then(|text| text.lines().next()?.trim().parse::<i32>().ok());
            let ours = pid.is_some_and(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .map(|cmdline| {
                        String::from_utf8_lossy(&cmdline).contains(&*data.to_string_lossy())
                    })
                    .unwrap_or(false)
            });
            if let (true, Some(pid)) = (ours, pid) {
                // SAFETY: kill has no memory-safety preconditions; the pid is our postmaster's.
                unsafe { kill(pid, SIGKILL) };
            }
        }
        if std::env::var_os("SNOWFLAKE_KEEP_CLUSTERS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
