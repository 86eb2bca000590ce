//! Creating and dropping snowflake sequences (docs/design.md §6), and the two calls the Citus
//! coordinator makes on its nodes (§9).

use pgrx::prelude::*;
use snowflake_id_core::layout::Layout;
use snowflake_id_core::sequence_options::{self, SequenceOptions};

use crate::errors;
use crate::ids::backend;
use crate::pg::privileges::{self, Caller};
use crate::pg::timestamps::unix_us;
use crate::shmem;
use crate::state::catalog;
use crate::state::citus;

/// Creates a named sequence from a preset, with any field overridden by name. For the
/// database's owner and superusers (`privileges`), whatever EXECUTE grants say; the catalog
/// is written as its owner.
#[allow(clippy::too_many_arguments)]
#[pg_extern(sql = false)]
fn snowflake_create_sequence(
    name: Option<&str>,
    preset: default!(Option<&str>, "'classic'"),
    epoch: default!(Option<TimestampWithTimeZone>, "NULL"),
    time_unit: default!(Option<Interval>, "NULL"),
    time_bits: default!(Option<i32>, "NULL"),
    node_bits: default!(Option<i32>, "NULL"),
    worker_bits: default!(Option<i32>, "NULL"),
    sequence_bits: default!(Option<i32>, "NULL"),
    gene_bits: default!(Option<i32>, "NULL"),
) {
    privileges::require(Caller::DatabaseCreator, "snowflake_create_sequence");
    refuse_in_read_only_transaction("snowflake_create_sequence");
    shmem::require_preloaded();
    let name = checked_name(name);
    let citus = citus::role();
    citus.refuse_on_worker("snowflake_create_sequence", name);
    let options = SequenceOptions {
        preset,
        epoch_unix_us: epoch.map(unix_us),
        time_unit: time_unit.map(|unit| sequence_options::Interval {
            months: unit.months(),
            days: unit.days(),
            micros: unit.micros(),
        }),
        time_bits,
        node_bits,
        worker_bits,
        sequence_bits,
        gene_bits,
    };
    let layout = options
        .resolve(|| shmem::state().read_clock().now_unix_us)
        .unwrap_or_else(|problem| errors::invalid_options(name, &problem).raise());
    let preset = options.preset.unwrap_or_default(); // resolve() refused a NULL preset
    let catalog = backend::catalog_table();
    privileges::as_owner(catalog.owner(), || {
        catalog::insert(&catalog, name, preset, &layout);
        citus.propagate_create(&catalog, name, preset, &layout);
    });
}

/// 25006 for `function`, which changes the catalog, in a read-only transaction.
fn refuse_in_read_only_transaction(function: &str) {
    // SAFETY: a plain read of this backend's transaction state.
    if unsafe { pg_sys::XactReadOnly } {
        errors::in_read_only_transaction(function).raise();
    }
}

/// Drops a named sequence. IDs it issued stay valid numbers, but can no longer be decoded
/// with its name, and a new sequence of the same name is a new ID space. Callers as for
/// `snowflake_create_sequence`.
#[pg_extern(sql = false)]
fn snowflake_drop_sequence(name: &str) {
    privileges::require(Caller::DatabaseCreator, "snowflake_drop_sequence");
    refuse_in_read_only_transaction("snowflake_drop_sequence");
    shmem::require_preloaded();
    if name == "default" {
        errors::cannot_drop_default().raise();
    }
    let citus = citus::role();
    citus.refuse_on_worker("snowflake_drop_sequence", name);
    let catalog = backend::catalog_table();
    privileges::as_owner(catalog.owner(), || {
        if !catalog::delete(&catalog, name) {
            errors::sequence_not_found(name, &catalog.extension_schema()).raise();
        }
        citus.propagate_drop(name);
    });
}

/// Citus only (docs/design.md §9): what the coordinator sends a worker (as a superuser, the only
/// caller it serves) so that it has sequence `name` with this layout. Creates it when absent;
/// an equal layout is left as it is; another layout is refused (42710), failing the
/// coordinator's transaction on every node.
#[allow(clippy::too_many_arguments)]
#[pg_extern(sql = false)]
fn snowflake_citus_receive_sequence(
    name: &str,
    preset: &str,
    epoch_unix_us: i64,
    time_unit_us: i64,
    time_bits: i32,
    node_bits: i32,
    worker_bits: i32,
    sequence_bits: i32,
    gene_bits: i32,
) {
    privileges::require(Caller::Superuser, "snowflake_citus_receive_sequence");
    shmem::require_preloaded();
    let name = checked_name(Some(name));
    let width = |bits: i32| u8::try_from(bits).unwrap_or(u8::MAX);
    let layout = Layout {
        time_bits: width(time_bits),
        node_bits: width(node_bits),
        worker_bits: width(worker_bits),
        sequence_bits: width(sequence_bits),
        gene_bits: width(gene_bits),
        time_unit_us,
        epoch_unix_us,
    };
    if let Err(problem) = layout.validate() {
        errors::stored_layout_invalid(name, &problem).raise();
    }
    let catalog = backend::catalog_table();
    match catalog::load_layout(&catalog, name) {
        None => catalog::insert(&catalog, name, preset, &layout),
        Some((existing, _)) if existing == layout => {}
        Some(_) => {
            errors::citus_sequence_differs(name, &catalog.extension_schema(), "this Citus worker")
                .raise()
        }
    }
}

/// Citus only (docs/design.md §9): what the coordinator sends a worker when it drops sequence
/// `name`. Deletes it if this node has it.
#[pg_extern(sql = false)]
fn snowflake_citus_forget_sequence(name: &str) {
    privileges::require(Caller::Superuser, "snowflake_citus_forget_sequence");
    shmem::require_preloaded();
    catalog::delete(&backend::catalog_table(), name);
}

fn checked_name(name: Option<&str>) -> &str {
    let name = name.unwrap_or_else(|| errors::null_sequence_name().raise());
    if !catalog::name_fits(name) {
        errors::invalid_sequence_name(name, catalog::MAX_NAME_BYTES).raise();
    }
    name
}
