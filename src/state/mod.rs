//! The extension's objects in each database (docs/design.md §6): the catalog table, the
//! extension's members, the server's directory of them as a backend uses it, this backend's
//! cache of sequence layouts, and Citus's nodes.

pub mod catalog;
pub mod citus;
pub mod extension;
pub mod extension_directory;
pub mod sequence_cache;
