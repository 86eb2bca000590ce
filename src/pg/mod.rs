//! Small safe pieces over PostgreSQL's C API and its configuration, which the other folders use.

pub mod guards;
pub mod gucs;
pub mod lwlocks;
pub mod privileges;
pub mod subtransaction;
pub mod system_clock;
pub mod this_backend;
pub mod timestamps;
