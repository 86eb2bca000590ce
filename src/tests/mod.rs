//! The `#[pg_test]`s, run in a server that preloads the extension.

pub mod catalog;
pub mod convert_column;
pub mod helpers;
pub mod ids;
pub mod partitions;
pub mod sequences;
