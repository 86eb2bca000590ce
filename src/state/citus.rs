//! Citus (docs/design.md §9): in a Citus cluster, snowflake sequences are cluster-wide. The
//! coordinator's catalog is the source. Creating or dropping a sequence there applies the same
//! change on every worker in the same transaction: Citus sends the command over its
//! transactional connections and commits all nodes by two-phase commit, so a rollback leaves
//! no node changed. A worker that joins later (`citus_add_node`, `citus_activate_node`, …)
//! receives every sequence in the transaction that activates it. Workers refuse to create or
//! drop sequences on their own.

use std::ffi::CStr;

use pgrx::prelude::*;
use pgrx::spi::quote_literal;
use snowflake_id_core::layout::Layout;

use crate::errors;
use crate::state::catalog::{self, CatalogTable};
use crate::state::extension;

/// The schema of the functions the commands sent to the workers call: the extension's own
/// (`catalog::INTERNAL_SCHEMA`), where only superusers can create anything (on every node),
/// since Citus runs them there as the superuser that owns the catalog table (the calling
/// function writes it as that owner, `privileges::as_owner`). A function
/// named in the extension's schema could be a look-alike that a worker database's owner
/// planted after renaming it.
fn internal_schema() -> std::borrow::Cow<'static, str> {
    catalog::INTERNAL_SCHEMA.to_string_lossy()
}

/// What this database is in a Citus cluster.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
    /// Citus is not installed in this database.
    Standalone,
    /// Citus's group 0: the coordinator (or a single Citus node), which propagates changes.
    Coordinator,
    /// Any other group: a worker, which takes its sequences from the coordinator.
    Worker,
}

/// This database's role, read from Citus's metadata (`pg_dist_local_group`).
pub fn role() -> Role {
    let group = Spi::connect(|client| {
        let citus = client.select(
            "SELECT FROM pg_catalog.pg_extension \
             WHERE extname OPERATOR(pg_catalog.=) 'citus'::pg_catalog.name",
            Some(1),
            &[],
        )?;
        if citus.is_empty() {
            return Ok(None);
        }
        client
            .select(
                "SELECT groupid FROM pg_catalog.pg_dist_local_group",
                Some(1),
                &[],
            )?
            .first()
            .get_one::<i32>()
    })
    .unwrap_or_else(|error| {
        errors::internal(format!("could not read Citus's node metadata: {error}")).raise()
    });
    match group {
        None => Role::Standalone,
        Some(0) => Role::Coordinator,
        Some(_) => Role::Worker,
    }
}

/// Whether Citus distributes table `table` (listed in `pg_dist_partition`: its rows are on the
/// workers, or in shards); false where Citus is not installed.
pub fn distributes(table: pg_sys::Oid) -> bool {
    // SAFETY: a syscache lookup of a name in pg_catalog, where only superusers create objects.
    let listed = unsafe {
        pg_sys::get_relname_relid(
            c"pg_dist_partition".as_ptr(),
            pg_sys::Oid::from(pg_sys::PG_CATALOG_NAMESPACE),
        )
    };
    listed != pg_sys::InvalidOid
        && Spi::get_one_with_args::<bool>(
            "SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition \
                             WHERE logicalrelid OPERATOR(pg_catalog.=) $1)",
            &[table.into()],
        )
        .unwrap_or_else(|error| {
            errors::internal(format!("could not read Citus's table metadata: {error}")).raise()
        })
        .unwrap_or(false)
}

impl Role {
    /// Raises 0A000 on a worker: `function` changes sequences on the coordinator only.
    pub fn refuse_on_worker(self, function: &str, sequence: &str) {
        if self == Role::Worker {
            errors::citus_worker_cannot_change_sequences(function, sequence).raise();
        }
    }

    /// On the coordinator, gives every worker the sequence just created here. A worker that has
    /// one of that name with another layout is named in a 42710 first: the worker would refuse
    /// it anyway, but Citus reports a failed command on a worker only as a failed connection.
    pub fn propagate_create(
        self,
        catalog: &CatalogTable,
        name: &str,
        preset: &str,
        layout: &Layout,
    ) {
        if self == Role::Coordinator {
            if let Some(workers) = workers_with_another_layout(name) {
                errors::citus_sequence_differs(name, &catalog.extension_schema(), &workers).raise();
            }
            send_to_workers(&receive_command(name, preset, layout));
        }
    }

    /// On the coordinator, drops the sequence just dropped here on every worker.
    pub fn propagate_drop(self, name: &str) {
        if self == Role::Coordinator {
            send_to_workers(&format!(
                "SELECT {}.citus_forget_sequence({})",
                internal_schema(),
                quote_literal(name)
            ));
        }
    }
}

/// The workers ("host:port, …") whose sequence `name` has another fingerprint than this node's,
/// read through Citus's `run_command_on_workers` (its own connections: a plain read).
fn workers_with_another_layout(name: &str) -> Option<String> {
    let fingerprint = format!(
        "SELECT {}.fingerprint({})",
        internal_schema(),
        quote_literal(name)
    );
    Spi::connect(|client| {
        client
            .select(
                &format!(
                    "SELECT pg_catalog.string_agg(pg_catalog.format('%s:%s', w.nodename, w.nodeport), ', ')
                       FROM pg_catalog.run_command_on_workers($1) AS w
                      WHERE w.success AND w.result OPERATOR(pg_catalog.<>) ''
                        AND w.result OPERATOR(pg_catalog.<>) ({fingerprint})"
                ),
                Some(1),
                &[fingerprint.as_str().into()],
            )?
            .first()
            .get_one::<String>()
    })
    .unwrap_or_else(|error| {
        errors::internal(format!("could not read the Citus workers' sequences: {error}")).raise()
    })
}

/// The command that gives a worker sequence `name` with `layout`
/// (`snowflake_citus_receive_sequence`, through its copy in the extension's own schema).
fn receive_command(name: &str, preset: &str, layout: &Layout) -> String {
    format!(
        "SELECT {}.citus_receive_sequence({}, {}, {}, {}, {}, {}, {}, {}, {})",
        internal_schema(),
        quote_literal(name),
        quote_literal(preset),
        layout.epoch_unix_us,
        layout.time_unit_us,
        layout.time_bits,
        layout.node_bits,
        layout.worker_bits,
        layout.sequence_bits,
        layout.gene_bits,
    )
}

/// Gives every worker every sequence of this database's catalog (those it has already are
/// checked to be equal). Run when a worker is activated; does nothing without the extension
/// or off the coordinator.
pub fn push_all_sequences() {
    if role() != Role::Coordinator {
        return;
    }
    let Some(catalog) = extension::find() else {
        return;
    };
    let commands: Vec<String> = catalog::all_sequences(&catalog)
        .iter()
        .map(|(name, preset, layout)| receive_command(name, preset, layout))
        .collect();
    send_to_workers(&commands.join(";\n"));
}

/// `text` as a `text` datum (never NULL: a Rust string always converts).
fn text_datum(text: &str) -> pg_sys::Datum {
    text.into_datum().unwrap_or_else(|| {
        errors::internal(format!("could not make a text datum of {text:?}")).raise()
    })
}

/// Runs `command` on every other active primary node of the Citus cluster (from the
/// coordinator: every worker), inside the current transaction. It goes through Citus's
/// `execute_command_on_remote_nodes_as_user(query, username)`, a version-1 C function of Citus
/// 13 and 14 (exported by its library, not declared in SQL): it sends the command on Citus's
/// transactional connections, marks the transaction for two-phase commit, and the workers
/// commit or roll back with it.
fn send_to_workers(command: &str) {
    // SAFETY: Citus is installed in this database (the caller checked its role), so its
    // library is loaded; static names, and an error if the symbol is missing.
    let symbol = unsafe {
        pg_sys::load_external_function(
            c"$libdir/citus".as_ptr(),
            c"execute_command_on_remote_nodes_as_user".as_ptr(),
            true,
            std::ptr::null_mut(),
        )
    };
    // SAFETY: the symbol is a version-1 function taking (text, text) and returning void.
    let function: unsafe extern "C-unwind" fn(pg_sys::FunctionCallInfo) -> pg_sys::Datum =
        unsafe { std::mem::transmute(symbol) };
    // SAFETY: a plain read of this backend's current role.
    let role = unsafe { pg_sys::GetUserId() };
    // SAFETY: a syscache lookup of the current role (the catalog table's owner, as whom the
    // caller writes it: Citus connects as that superuser): a palloc'd copy of its name.
    let user = unsafe { pg_sys::GetUserNameFromId(role, false) };
    // SAFETY: that copy, NUL-terminated.
    let user = unsafe { CStr::from_ptr(user) };
    // SAFETY: that function, called with its two text arguments; pg_sys's
    // DirectFunctionCall2Coll turns an ERROR it raises into this statement's error.
    unsafe {
        pg_sys::DirectFunctionCall2Coll(
            Some(function),
            pg_sys::InvalidOid,
            text_datum(command),
            text_datum(&user.to_string_lossy()),
        )
    };
}

// Workers that join later. Citus activates a node in the transaction of the function call that
// adds it; PostgreSQL's function-manager hooks let the extension act right after such a call
// returns, inside that transaction: it pushes every sequence to the workers (the new one
// included), so the new node commits with the sequences or not at all.

/// Citus's functions (in pg_catalog) that activate a worker and sync its metadata.
const NODE_ACTIVATORS: [&CStr; 6] = [
    c"citus_add_node",
    c"citus_activate_node",
    c"master_add_node",
    c"master_activate_node",
    c"start_metadata_sync_to_node",
    c"start_metadata_sync_to_all_nodes",
];

/// Whether the library list `libraries` (`shared_preload_libraries`: comma-separated, each
/// maybe quoted, a path or a name, with or without `.so`) names Citus.
pub fn lists_citus(libraries: &str) -> bool {
    libraries.split(',').any(|entry| {
        let entry = entry.trim().trim_matches('"');
        let file = entry.rsplit('/').next().unwrap_or(entry);
        file.strip_suffix(".so").unwrap_or(file) == "citus"
    })
}

/// Whether `function` is one of Citus's node activators. Called for every non-built-in
/// function PostgreSQL looks up, so it does one syscache read for functions outside pg_catalog.
pub fn is_node_activator(function: pg_sys::Oid) -> bool {
    // SAFETY: a syscache read inside a transaction (PostgreSQL looks functions up only there).
    let namespace = unsafe { pg_sys::get_func_namespace(function) };
    if namespace != pg_sys::Oid::from(pg_sys::PG_CATALOG_NAMESPACE) {
        return false;
    }
    // SAFETY: as above: a palloc'd copy of the name, or null.
    let name = unsafe { pg_sys::get_func_name(function) };
    if name.is_null() {
        return false;
    }
    // SAFETY: that copy, NUL-terminated.
    let found = NODE_ACTIVATORS.contains(&unsafe { CStr::from_ptr(name) });
    // SAFETY: that copy, freed once, after its last use.
    unsafe { pg_sys::pfree(name.cast()) };
    found
}
