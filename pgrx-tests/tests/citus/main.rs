//! Citus: snowflake IDs on the distributed tables of a real Citus cluster (docs/sharding.md,
//! "Citus", whose SQL this is). A coordinator and two workers on 127.0.0.1, each with its own
//! `snowflake_id.node_id`, Citus and snowflake_id preloaded in that order
//! (`snowflake_id_cluster_tests::citus`); a third worker joins later. One module per capability:
//!
//! - `sequences_on_every_node`: sequences made on the coordinator exist on every node (created,
//!   rolled back, dropped, and on the worker added later);
//! - `node_id_check`: one call on the coordinator checks every node's node id;
//! - `write_paths_and_shard_moves`: every path Citus writes rows by gives unique IDs that decode
//!   to the node that evaluated the default; shard moves and a rebalance keep every ID; a child
//!   row lands on its parent's shard.
//!
//! Built only with the `citus` feature: the test command runs it on every major, with the Citus
//! it builds for each (scripts/install-citus.sh: 14.0.1 for 17 and 18, 13.2.2 for 15). The tests
//! print what they measured (`--nocapture`). One test binary, so the test command's
//! `--test citus` runs them all.

mod node_id_check;
mod sequences_on_every_node;
mod write_paths_and_shard_moves;
