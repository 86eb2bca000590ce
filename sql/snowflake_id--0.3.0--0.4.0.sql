-- snowflake_id 0.3.0 → 0.4.0: Citus (docs/design.md §9, docs/sharding.md "Citus").
-- - snowflake_citus_receive_sequence / snowflake_citus_forget_sequence: what the coordinator
--   of a Citus cluster runs on every worker, inside its own transaction, when it creates or
--   drops a sequence or activates a worker. Internal: only superusers may call them.
-- - snowflake_citus_node_ids(): every Citus node's snowflake.node_id from one call on the
--   coordinator; an error naming the nodes when one is unset, unreadable or shared.
-- CREATE OR REPLACE, so the same text works in a fresh install (extension_sql_file! in
-- src/lib.rs), and an updated database and a new one have identical objects.

CREATE OR REPLACE FUNCTION snowflake_citus_receive_sequence(
    name text, preset text, epoch_unix_us bigint, time_unit_us bigint, time_bits integer,
    node_bits integer, worker_bits integer, sequence_bits integer, gene_bits integer
) RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_citus_receive_sequence_wrapper';

CREATE OR REPLACE FUNCTION snowflake_citus_forget_sequence(name text) RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_citus_forget_sequence_wrapper';

REVOKE EXECUTE ON FUNCTION
    snowflake_citus_receive_sequence(text, text, bigint, bigint, integer, integer, integer, integer, integer),
    snowflake_citus_forget_sequence(text)
FROM PUBLIC;

CREATE OR REPLACE FUNCTION snowflake_citus_node_ids()
RETURNS TABLE (citus_nodeid integer, nodename text, nodeport integer, node_id integer)
VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
LANGUAGE plpgsql
AS $function$
DECLARE
    -- One answer per node, as parallel arrays: Citus's run_command_on_all_nodes answers for
    -- every active primary node and for the node this runs on (nodeid 0 when that is a
    -- coordinator outside Citus's node list).
    ids       integer[];
    names     text[];
    ports     integer[];
    answered  boolean[];
    results   text[];
    problem   text;
    problems  text[] := '{}';
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
        RAISE EXCEPTION 'snowflake_citus_node_ids() needs Citus, which is not installed in database "%"',
                        pg_catalog.current_database()
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Run it in the database of a Citus cluster, on its coordinator.';
    END IF;
    SELECT pg_catalog.array_agg(r.nodeid ORDER BY r.nodename, r.nodeport),
           pg_catalog.array_agg(r.nodename ORDER BY r.nodename, r.nodeport),
           pg_catalog.array_agg(r.nodeport ORDER BY r.nodename, r.nodeport),
           pg_catalog.array_agg(r.success ORDER BY r.nodename, r.nodeport),
           pg_catalog.array_agg(r.result ORDER BY r.nodename, r.nodeport)
    INTO ids, names, ports, answered, results
    FROM (SELECT a.nodeid,
                 COALESCE(n.nodename, pg_catalog.current_setting('citus.local_hostname')) AS nodename,
                 COALESCE(n.nodeport, pg_catalog.current_setting('port')::integer) AS nodeport,
                 a.success, a.result
          FROM pg_catalog.run_command_on_all_nodes('SHOW snowflake.node_id') AS a
          LEFT JOIN pg_catalog.pg_dist_node AS n ON n.nodeid OPERATOR(pg_catalog.=) a.nodeid) AS r;

    FOR problem IN
        SELECT pg_catalog.format('%s:%s cannot report its snowflake.node_id (%s)',
                                 a.nodename, a.nodeport, a.result)
        FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(names), pg_catalog.unnest(ports),
                        pg_catalog.unnest(answered), pg_catalog.unnest(results))
             AS a(citus_nodeid, nodename, nodeport, success, result)
        WHERE NOT a.success
    UNION ALL
        SELECT pg_catalog.format('snowflake.node_id is not set on %s',
                                 pg_catalog.string_agg(pg_catalog.format('%s:%s', a.nodename, a.nodeport), ', '))
        FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(names), pg_catalog.unnest(ports),
                        pg_catalog.unnest(answered), pg_catalog.unnest(results))
             AS a(citus_nodeid, nodename, nodeport, success, result)
        WHERE a.success AND a.result OPERATOR(pg_catalog.=) '-1'
        HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 0
    UNION ALL
        SELECT pg_catalog.format('snowflake.node_id = %s is set on more than one node: %s', a.result,
                                 pg_catalog.string_agg(pg_catalog.format('%s:%s', a.nodename, a.nodeport), ', '))
        FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(names), pg_catalog.unnest(ports),
                        pg_catalog.unnest(answered), pg_catalog.unnest(results))
             AS a(citus_nodeid, nodename, nodeport, success, result)
        WHERE a.success AND a.result OPERATOR(pg_catalog.<>) '-1'
        GROUP BY a.result
        HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1
    LOOP
        problems := problems || problem;
    END LOOP;
    IF pg_catalog.cardinality(problems) OPERATOR(pg_catalog.>) 0 THEN
        RAISE EXCEPTION 'the Citus nodes do not have one snowflake.node_id each: %',
                        pg_catalog.array_to_string(problems, '; ')
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Give every node (the coordinator too) its own snowflake.node_id in '
                         'postgresql.conf, with snowflake_id in shared_preload_libraries, and restart it.';
    END IF;
    RETURN QUERY
        SELECT a.citus_nodeid, a.nodename, a.nodeport, a.result::integer
        FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(names), pg_catalog.unnest(ports),
                        pg_catalog.unnest(answered), pg_catalog.unnest(results))
             AS a(citus_nodeid, nodename, nodeport, success, result);
END;
$function$;
