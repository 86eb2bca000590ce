//! Every error the extension's Rust code raises, in one place: `error.rs` the `Error` type and
//! the errors of setup, calls and state, `sequences.rs`, `decoding.rs`, and `floor.rs` those of
//! the reservation file and the floor: a SQLSTATE, a message that names the object, and a hint
//! where there is a fix. The reference's error table (docs/reference.md) lists exactly the
//! SQLSTATEs used here and in the PL/pgSQL of `sql/` (checked by
//! pgrx-tests/tests/error_table.rs), so no other Rust file raises an error itself.

mod decoding;
mod error;
mod floor;
mod sequences;

pub use decoding::*;
pub use error::*;
pub use floor::*;
pub use sequences::*;
