//! A Citus cluster for the Citus tests (docs/sharding.md, "Citus"): a coordinator and workers
//! on 127.0.0.1, each a [`Cluster`] with its own `snowflake_id.node_id`, Citus and snowflake_id
//! preloaded in that order. Running it needs Citus installed in the PostgreSQL under test
//! (scripts/install-citus.sh); the tests that do are built only with the `citus` feature.

use std::thread;

use crate::{error_parts, Client, Cluster};

/// `postgresql.conf` of every Citus node. Citus must be loaded first; its nodes talk to each
/// other over TCP on 127.0.0.1 (initdb's pg_hba trusts it); its two-phase commit needs prepared
/// transactions.
const CITUS_SETTINGS: [&str; 3] = [
    "shared_preload_libraries = 'citus,snowflake_id'",
    "listen_addresses = '127.0.0.1'",
    "max_prepared_transactions = 100",
];
pub const COORDINATOR_NODE: i32 = 1;
pub const WORKER_NODES: [i32; 2] = [2, 3];
/// The worker that joins the running cluster (`citus_add_node`).
pub const LATER_WORKER_NODE: i32 = 4;

/// A coordinator and its workers.
pub struct CitusCluster {
    coordinator: Cluster,
    /// The workers, in the order they joined.
    pub workers: Vec<Cluster>,
}

/// Starts a Citus node with `snowflake_id.node_id = node_id`, Citus created in its database.
pub fn start_node(node_id: i32) -> Cluster {
    let mut builder = Cluster::builder().setting(&format!("snowflake_id.node_id = {node_id}"));
    for line in CITUS_SETTINGS {
        builder = builder.setting(line);
    }
    let cluster = builder.start();
    cluster
        .connect()
        .batch_execute("CREATE EXTENSION citus")
        .unwrap();
    cluster
}

/// Adds `worker` to the cluster of `coordinator` (what the sharding guide shows).
pub fn add_worker(coordinator: &mut Client, worker: &Cluster) {
    coordinator
        .execute(
            "SELECT citus_add_node('127.0.0.1', $1)",
            &[&i32::from(worker.port())],
        )
        .unwrap_or_else(|error| {
            panic!(
                "citus_add_node: {:?}\n{}",
                error_parts(&error),
                worker.log_tail()
            )
        });
}

impl CitusCluster {
    /// Starts the coordinator (node id 1) and two workers (2, 3) at once and forms the cluster.
    pub fn start() -> CitusCluster {
        let mut nodes: Vec<Cluster> = thread::scope(|scope| {
            let starting: Vec<_> = [COORDINATOR_NODE]
                .iter()
                .chain(&WORKER_NODES)
                .map(|&node_id| scope.spawn(move || start_node(node_id)))
                .collect();
            starting
                .into_iter()
                .map(|node| node.join().unwrap())
                .collect()
        });
        let coordinator = nodes.remove(0);
        let mut client = coordinator.connect();
        client
            .execute(
                "SELECT citus_set_coordinator_host('127.0.0.1', $1)",
                &[&i32::from(coordinator.port())],
            )
            .unwrap();
        for worker in &nodes {
            add_worker(&mut client, worker);
        }
        CitusCluster {
            coordinator,
            workers: nodes,
        }
    }

    /// A session on the coordinator.
    pub fn coordinator(&self) -> Client {
        self.coordinator.connect()
    }

    /// Every node, the coordinator first.
    pub fn nodes(&self) -> impl Iterator<Item = &Cluster> {
        std::iter::once(&self.coordinator).chain(&self.workers)
    }
}
