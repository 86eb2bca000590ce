-- snowflake_id 0.8.0 → 0.9.0: the floor relations can be read by every role, so that any role
-- that can dump the database (its owner, a member of pg_read_all_data) dumps their values too.
-- pg_dump reads every configuration sequence of an extension; without SELECT on them a
-- non-superuser's dump failed with "permission denied for sequence snowflake_floor". What they
-- hold is not secret: a time already shown by snowflake_stats() and a system identifier that
-- pg_control_system() shows everybody. Writing them stays the owner's (a superuser's).
-- Up to 0.11.0 a fresh install ran this too (extension_sql_file! in src/lib.rs).

GRANT SELECT ON SEQUENCE snowflake_floor, snowflake_floor_writer TO PUBLIC;

-- snowflake_stats() also reports, for monitoring (docs/monitoring.md): the IDs issued since the
-- server started (a count that only rises; the sum over snowflake_workers falls when sessions
-- end), the end of the latest tick used, the reservation renewals the reservation worker made,
-- and the reservation writes that failed. The new columns come last, so the 0.8.0 definition
-- still works with the new library until this update runs.
DROP FUNCTION snowflake_stats();
CREATE FUNCTION snowflake_stats() RETURNS TABLE (
    backward_steps bigint,
    largest_backward_step_ms double precision,
    wall_clock_behind_ms double precision,
    borrowed_ticks bigint,
    throttle_sleeps bigint,
    reservation_writes bigint,
    reserved_until timestamp with time zone,
    cluster_clock timestamp with time zone,
    slots_in_use integer,
    max_workers integer,
    forward_jumps_followed bigint,
    forward_jumps_ignored bigint,
    durable_floor timestamp with time zone,
    sharing_sessions integer,
    tick_conflicts bigint,
    ids_issued bigint,
    last_tick_end timestamp with time zone,
    reservation_worker_writes bigint,
    reservation_write_failures bigint
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_stats_wrapper';

-- The catalog table loses its CHECK constraints and its column default (sql/bootstrap.sql says
-- why: opening a table that has them reads pg_constraint and pg_attrdef, a third of a new
-- connection's first ID). The extension's functions validate every layout before inserting it
-- and every read validates it again: a layout edited by hand into an invalid one is refused (XX001)
-- before any ID of it is made. In a fresh install the table has neither and this changes nothing.
DO $drop_catalog_checks$
DECLARE
    check_name name;
BEGIN
    FOR check_name IN
        SELECT conname FROM pg_catalog.pg_constraint
        WHERE conrelid OPERATOR(pg_catalog.=) '@extschema@.snowflake_sequence_catalog'::pg_catalog.regclass
          AND contype OPERATOR(pg_catalog.=) 'c'
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE @extschema@.snowflake_sequence_catalog DROP CONSTRAINT %I',
                                  check_name);
    END LOOP;
END
$drop_catalog_checks$;
ALTER TABLE snowflake_sequence_catalog ALTER COLUMN created_at DROP DEFAULT;
