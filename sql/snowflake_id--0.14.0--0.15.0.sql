-- snowflake_id 0.14.0 → 0.15.0: snowflake_stats() also counts the operator's floor steps,
-- floor_raises (snowflake_raise_floor) and floor_accepts (snowflake_accept_floor), apart from
-- the clock's faults (docs/monitoring.md). The new columns come last, so the 0.14.0 definition
-- still works with the new library until this update runs; a view of yours over
-- snowflake_stats() must be dropped first (docs/reference.md, "Upgrading").
--
-- The rest is the library's (CHANGELOG.md). Every sequence, ID and floor is kept.

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
    reservation_write_failures bigint,
    floor_raises bigint,
    floor_accepts bigint
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_stats_wrapper';
COMMENT ON FUNCTION @extschema@.snowflake_stats() IS
    'The server''s clock steps, floor raises and accepts, reservation writes, worker ids in use and IDs issued';
