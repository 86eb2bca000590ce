-- snowflake_id 0.5.0 → 0.6.0: every session gets IDs (docs/design.md §4).
-- - Worker ids come from one space per worker width, lowest free first, so sessions using
--   sequences of other widths never crowd a space; when a space is full, sessions share a worker
--   id and take turns by tick instead of being refused (53400 is gone).
-- - snowflake_worker_slots() returns one row per worker id in use, with its space (worker_bits)
--   and how many sessions use it; the view snowflake_workers shows which ids are shared. Its
--   first five columns are those of 0.5.0, so the 0.5.0 definitions still work with the new
--   library until this update runs.
-- - snowflake_stats() also reports the sessions that share a worker id and the ticks sessions
--   found owned by another (tick_conflicts).
-- Up to 0.11.0 a fresh install ran this too (extension_sql_file! in src/lib.rs), recreating the two
-- functions exactly as pgrx declares them, so an updated database and a new one have identical
-- objects.

DROP VIEW IF EXISTS snowflake_workers;
DROP FUNCTION snowflake_worker_slots();
CREATE FUNCTION snowflake_worker_slots() RETURNS TABLE (
    worker integer,
    pid integer,
    database_oid oid,
    claimed_at timestamp with time zone,
    ids_issued bigint,
    worker_bits integer,
    sessions integer
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_worker_slots_wrapper';

CREATE VIEW snowflake_workers AS
SELECT w.worker_bits,
       w.worker,
       w.sessions,
       w.sessions > 1 AS shared,
       w.pid,
       d.datname AS database,
       w.claimed_at,
       w.ids_issued
FROM snowflake_worker_slots() AS w
LEFT JOIN pg_catalog.pg_database AS d ON d.oid = w.database_oid
ORDER BY w.worker_bits, w.worker;
COMMENT ON VIEW snowflake_workers IS
    'Worker ids in use, per worker space: how many sessions use each, and who took it first';
GRANT SELECT ON snowflake_workers TO PUBLIC;

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
    tick_conflicts bigint
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_stats_wrapper';
