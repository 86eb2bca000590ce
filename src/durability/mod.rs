//! What keeps IDs unique across restarts, crashes and failovers (docs/design.md §5): the
//! cluster's durable reservation, the worker that renews it, and each database's floor relation.

pub mod database_floor;
pub mod floor_relations;
pub mod reservation;
pub mod reservation_worker;
