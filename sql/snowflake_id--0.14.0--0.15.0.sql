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

-- Its privileges as the install script leaves every function's (docs/reference.md,
-- "Privileges"): EXECUTE for everybody, whatever default privileges granted besides.
DO $documented_privileges$
DECLARE
    function_oid oid := '@extschema@.snowflake_stats()'::pg_catalog.regprocedure;
    owner_name text;
    grantee_name text;
BEGIN
    SELECT pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(p.proowner)) INTO owner_name
      FROM pg_catalog.pg_proc AS p WHERE p.oid OPERATOR(pg_catalog.=) function_oid;
    FOR grantee_name IN
        SELECT 'PUBLIC'
        UNION
        SELECT owner_name
        UNION
        SELECT pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee))
          FROM pg_catalog.pg_proc AS p, pg_catalog.aclexplode(p.proacl) AS a
         WHERE p.oid OPERATOR(pg_catalog.=) function_oid
           AND a.grantee OPERATOR(pg_catalog.<>) 0
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM %s CASCADE',
                                  function_oid::pg_catalog.regprocedure, grantee_name);
    END LOOP;
    EXECUTE pg_catalog.format('GRANT ALL ON FUNCTION %s TO %s',
                              function_oid::pg_catalog.regprocedure, owner_name);
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC',
                              function_oid::pg_catalog.regprocedure);
END
$documented_privileges$;
