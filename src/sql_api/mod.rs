//! The SQL functions, by what a user calls them for; each is declared in the install script
//! (`#[pg_extern(sql = false)]`, docs/design.md §6).

pub mod decode;
pub mod floor;
pub mod ids;
pub mod monitoring;
pub mod partitions;
pub mod sequences;
