//! What the extension refuses or warns of around ordinary commands, judged by what a command
//! does (docs/design.md §5.3, §6).

pub mod catalog_guard;
pub mod largest_stored_id;
pub mod locks;
pub mod publications;
pub mod stored_ids;
