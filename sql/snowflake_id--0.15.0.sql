-- snowflake_id 0.15.0: the whole extension as this version defines it, each object once
-- (docs/design.md §7). A fresh CREATE EXTENSION runs this file; a database made by an earlier
-- release gets the same objects from the update scripts sql/snowflake_id--<from>--<to>.sql
-- (pgrx-tests/tests/updates_match_a_fresh_install.rs compares the two from the catalog).
-- sql/snowflake_id--0.1.0.sql is the 0.1.0 release's install script, shipped so that a dump of
-- any release can be restored at its own version (CREATE EXTENSION snowflake_id VERSION '…')
-- before the update (docs/reference.md "Upgrading").
--
-- Nothing here depends on search_path when it is created or when it runs: every operator is
-- OPERATOR(pg_catalog.…), every function and type is pg_catalog's or the extension's, named by
-- schema, and every function whose body is text runs with search_path = pg_catalog, pg_temp
-- (pgrx-tests/tests/sealed_by_construction.rs). The functions that change the extension's state
-- check who calls them when they run (src/pg/privileges.rs); none is SECURITY DEFINER.

-- The extension's state and internal functions live in a schema it creates itself, so that no
-- role but the superuser running this owns anything there (docs/design.md §6). A schema of that
-- name made by somebody else would put the state back in a role's hands.
DO $own_schema$
DECLARE
    owner_name name;
BEGIN
    SELECT pg_catalog.pg_get_userbyid(nspowner) INTO owner_name
      FROM pg_catalog.pg_namespace WHERE nspname OPERATOR(pg_catalog.=) 'snowflake_id_internal';
    IF FOUND THEN
        RAISE EXCEPTION 'schema "snowflake_id_internal" already exists (owner "%")', owner_name
            USING ERRCODE = 'duplicate_schema',
                  DETAIL = 'snowflake_id keeps its state in a schema that it creates itself and that only superusers control.',
                  HINT = 'Look at what is in that schema, then drop or rename it (a superuser or its owner) and run the command again.';
    END IF;
END
$own_schema$;
CREATE SCHEMA snowflake_id_internal;
COMMENT ON SCHEMA snowflake_id_internal IS 'snowflake_id''s own state and internal functions (do not edit)';

-- The fields of an ID, as snowflake_decode() returns them.
CREATE TYPE snowflake_parts AS (
    ts       timestamptz,  -- start of the ID's tick
    node     integer,
    worker   integer,
    sequence integer,
    gene     integer
);
COMMENT ON TYPE snowflake_parts IS 'The fields of a snowflake ID, as returned by snowflake_decode()';

-- One row per named sequence. A layout never changes once created (docs/design.md §2), so rows are
-- only ever inserted or deleted, never updated (the guard trigger below). No CHECK constraint and
-- no column default: the extension's functions validate a layout before they insert it, every read
-- validates it again (catalog::load_layout), and a table without them opens without reading
-- pg_constraint and pg_attrdef, which was a third of a new connection's first ID.
CREATE TABLE snowflake_id_internal.snowflake_sequence_catalog (
    name          text PRIMARY KEY,
    preset        text,
    epoch         timestamptz NOT NULL,
    time_unit_us  bigint NOT NULL,
    time_bits     integer NOT NULL,
    node_bits     integer NOT NULL,
    worker_bits   integer NOT NULL,
    sequence_bits integer NOT NULL,
    gene_bits     integer NOT NULL,
    created_at    timestamptz NOT NULL
);
COMMENT ON TABLE snowflake_id_internal.snowflake_sequence_catalog IS 'Layouts of the snowflake sequences (do not edit by hand)';

-- The built-in sequence: the classic 41/10/12 layout at 1 ms from 2025-01-01 UTC.
INSERT INTO snowflake_id_internal.snowflake_sequence_catalog
    (name, preset, epoch, time_unit_us, time_bits, node_bits, worker_bits, sequence_bits, gene_bits,
     created_at)
VALUES ('default', 'classic', '2025-01-01 00:00:00+00', 1000, 41, 0, 10, 12, 0, pg_catalog.now());

-- User sequences are data: pg_dump keeps them; the built-in row comes with CREATE EXTENSION.
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_internal.snowflake_sequence_catalog',
                                           'WHERE name <> ''default''');

-- The floor of this database (docs/design.md §5.3): a time (µs since 1970) that no tick of an ID
-- issued here ends after. The extension writes it before IDs above it leave; PostgreSQL carries it
-- (WAL, pg_upgrade, pg_dump as setval of a configuration sequence).
CREATE SEQUENCE snowflake_id_internal.snowflake_floor AS bigint MINVALUE 0 START WITH 0 NO CYCLE;
COMMENT ON SEQUENCE snowflake_id_internal.snowflake_floor IS
    'snowflake_id: no ID issued in this database has a tick ending after this time (µs since 1970)';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_internal.snowflake_floor', '');
-- Which cluster and WAL timeline wrote snowflake_floor (floor::writer_identity; 0 for none): a
-- value written elsewhere (pg_upgrade, a restored dump, another timeline) raises this server's
-- floor, one this server wrote is already below its reservation file and WAL records.
CREATE SEQUENCE snowflake_id_internal.snowflake_floor_writer AS bigint
    MINVALUE -9223372036854775808 START WITH 0 NO CYCLE;
COMMENT ON SEQUENCE snowflake_id_internal.snowflake_floor_writer IS
    'snowflake_id: the cluster (system identifier) and WAL timeline that last wrote snowflake_floor';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_internal.snowflake_floor_writer', '');

-- Rows are only inserted (rows the extension can serve: 23514 otherwise), and deleted by
-- snowflake_drop_sequence: the guard refuses every other UPDATE or DELETE, also by roles
-- PostgreSQL lets write every table (pg_write_all_data) (src/checks/catalog_guard.rs).
CREATE FUNCTION snowflake_id_internal.catalog_guard() RETURNS trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_catalog_guard';
CREATE TRIGGER changed_only_by_snowflake_id
    BEFORE INSERT OR UPDATE OR DELETE ON snowflake_id_internal.snowflake_sequence_catalog
    FOR EACH ROW EXECUTE FUNCTION snowflake_id_internal.catalog_guard();

-- The SQL functions (src/sql_api/). snowflake_nextval(seq) is the hot path, a bare C function
-- rather than a pgrx wrapper (src/sql_api/ids.rs says why).
CREATE FUNCTION snowflake_nextval(seq text DEFAULT 'default') RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_nextval_wrapper';

CREATE FUNCTION snowflake_nextval(seq text, gene bigint) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_nextval_with_gene_wrapper';

CREATE FUNCTION snowflake_currval(seq text DEFAULT 'default') RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_currval_wrapper';

CREATE FUNCTION snowflake_lastval() RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_lastval_wrapper';

CREATE FUNCTION snowflake_decode(id bigint, seq text DEFAULT 'default') RETURNS snowflake_parts
STRICT STABLE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_decode_wrapper';

CREATE FUNCTION snowflake_timestamp(id bigint, seq text DEFAULT 'default') RETURNS timestamptz
STRICT STABLE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_timestamp_wrapper';

CREATE FUNCTION snowflake_min_id(ts timestamptz, seq text DEFAULT 'default') RETURNS bigint
STRICT STABLE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_min_id_wrapper';

CREATE FUNCTION snowflake_max_id(ts timestamptz, seq text DEFAULT 'default') RETURNS bigint
STRICT STABLE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_max_id_wrapper';

CREATE FUNCTION snowflake_to_base32(id bigint) RETURNS text
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_to_base32_wrapper';

CREATE FUNCTION snowflake_from_base32(text text) RETURNS bigint
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_from_base32_wrapper';

CREATE FUNCTION snowflake_partition_width(span interval, seq text DEFAULT 'default') RETURNS bigint
STRICT STABLE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_partition_width_wrapper';

CREATE FUNCTION snowflake_partition_bounds(ts timestamptz, span interval, seq text DEFAULT 'default')
RETURNS TABLE (lower bigint, upper bigint)
STRICT STABLE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_partition_bounds_at_wrapper';

CREATE FUNCTION snowflake_partition_bounds(id bigint, span interval, seq text DEFAULT 'default')
RETURNS TABLE (lower bigint, upper bigint)
STRICT STABLE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_partition_bounds_of_wrapper';

-- Creating and dropping sequences: for the database's owner and superusers, checked when they
-- run; the catalog is written as its owner (src/pg/privileges.rs).
CREATE FUNCTION snowflake_create_sequence(
    name text,
    preset text DEFAULT 'classic',
    epoch timestamptz DEFAULT NULL,
    time_unit interval DEFAULT NULL,
    time_bits integer DEFAULT NULL,
    node_bits integer DEFAULT NULL,
    worker_bits integer DEFAULT NULL,
    sequence_bits integer DEFAULT NULL,
    gene_bits integer DEFAULT NULL
) RETURNS void
VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_create_sequence_wrapper';

CREATE FUNCTION snowflake_drop_sequence(name text) RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_drop_sequence_wrapper';

-- The floor's steps (docs/reference.md "Moving to a new cluster"): raising it, for the
-- database's owner and superusers; accepting one written elsewhere beyond the bound, for
-- superusers.
CREATE FUNCTION snowflake_raise_floor(until timestamptz) RETURNS timestamptz
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_raise_floor_wrapper';
COMMENT ON FUNCTION snowflake_raise_floor(timestamptz) IS
    'No ID issued from now on is in a tick ending at or before this time: the cut-over step of a move from another cluster';

CREATE FUNCTION snowflake_accept_floor() RETURNS timestamptz
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_accept_floor_wrapper';

-- Monitoring (docs/monitoring.md).
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

-- The extension directory of the server, per database (docs/design.md §6).
CREATE FUNCTION snowflake_directory() RETURNS TABLE (
    database_oid oid,
    database text,
    current boolean,
    layouts integer,
    answered bigint,
    looked_up bigint,
    off text
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_directory_wrapper';

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
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_worker_slots_wrapper';

-- Citus (docs/design.md §9): what the coordinator runs on every worker inside its own
-- transaction when it creates or drops a sequence or activates a worker, for superusers only;
-- the copies in snowflake_id_internal are the ones it names.
CREATE FUNCTION snowflake_citus_receive_sequence(
    name text, preset text, epoch_unix_us bigint, time_unit_us bigint, time_bits integer,
    node_bits integer, worker_bits integer, sequence_bits integer, gene_bits integer
) RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_citus_receive_sequence_wrapper';

CREATE FUNCTION snowflake_citus_forget_sequence(name text) RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_citus_forget_sequence_wrapper';

-- Every Citus node's snowflake_id.node_id from one call on the coordinator; an error naming the
-- nodes when one is unset, unreadable or shared.
CREATE FUNCTION snowflake_citus_node_ids()
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
          FROM pg_catalog.run_command_on_all_nodes('SHOW snowflake_id.node_id') AS a
          LEFT JOIN pg_catalog.pg_dist_node AS n ON n.nodeid OPERATOR(pg_catalog.=) a.nodeid) AS r;

    FOR problem IN
        SELECT pg_catalog.format('%s:%s cannot report its snowflake_id.node_id (%s)',
                                 a.nodename, a.nodeport, a.result)
        FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(names), pg_catalog.unnest(ports),
                        pg_catalog.unnest(answered), pg_catalog.unnest(results))
             AS a(citus_nodeid, nodename, nodeport, success, result)
        WHERE NOT a.success
    UNION ALL
        SELECT pg_catalog.format('snowflake_id.node_id is not set on %s',
                                 pg_catalog.string_agg(pg_catalog.format('%s:%s', a.nodename, a.nodeport), ', '))
        FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(names), pg_catalog.unnest(ports),
                        pg_catalog.unnest(answered), pg_catalog.unnest(results))
             AS a(citus_nodeid, nodename, nodeport, success, result)
        WHERE a.success AND a.result OPERATOR(pg_catalog.=) '-1'
        HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 0
    UNION ALL
        SELECT pg_catalog.format('snowflake_id.node_id = %s is set on more than one node: %s', a.result,
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
        RAISE EXCEPTION 'the Citus nodes do not have one snowflake_id.node_id each: %',
                        pg_catalog.array_to_string(problems, '; ')
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Give every node (the coordinator too) its own snowflake_id.node_id in '
                         'postgresql.conf, with snowflake_id in shared_preload_libraries, and restart it.';
    END IF;
    RETURN QUERY
        SELECT a.citus_nodeid, a.nodename, a.nodeport, a.result::integer
        FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(names), pg_catalog.unnest(ports),
                        pg_catalog.unnest(answered), pg_catalog.unnest(results))
             AS a(citus_nodeid, nodename, nodeport, success, result);
END;
$function$;

-- What privileged SQL calls, in the extension's own schema: the same C functions as the
-- user-facing ones; the Citus receivers; a layout's fingerprint (as the view
-- snowflake_sequences has it); the extension's own user-facing functions by OID.
CREATE FUNCTION snowflake_id_internal.nextval(seq text) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_nextval_wrapper';
CREATE FUNCTION snowflake_id_internal.min_id(ts timestamptz, seq text) RETURNS bigint
STRICT STABLE PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_min_id_wrapper';
CREATE FUNCTION snowflake_id_internal.max_id(ts timestamptz, seq text) RETURNS bigint
STRICT STABLE PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_max_id_wrapper';
CREATE FUNCTION snowflake_id_internal.tick_start(id bigint, seq text) RETURNS timestamptz
STRICT STABLE PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_timestamp_wrapper';

-- What the Citus coordinator runs on its workers (docs/design.md §9), as the superuser owning
-- the calling function: copies of the receiving functions, and the layout's fingerprint (as
-- the view snowflake_sequences has it), named in this schema on every node.
CREATE FUNCTION snowflake_id_internal.citus_receive_sequence(
    name text, preset text, epoch_unix_us bigint, time_unit_us bigint, time_bits integer,
    node_bits integer, worker_bits integer, sequence_bits integer, gene_bits integer
) RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_citus_receive_sequence_wrapper';
CREATE FUNCTION snowflake_id_internal.citus_forget_sequence(name text) RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_citus_forget_sequence_wrapper';
CREATE FUNCTION snowflake_id_internal.fingerprint(name text) RETURNS text
STRICT STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
LANGUAGE sql
AS $fingerprint$
    SELECT pg_catalog.md5(pg_catalog.concat_ws('/', time_bits, node_bits, worker_bits, sequence_bits,
                                               gene_bits, time_unit_us,
                                               (EXTRACT(epoch FROM epoch) OPERATOR(pg_catalog.*) 1000000)::bigint))
      FROM snowflake_id_internal.snowflake_sequence_catalog
     WHERE snowflake_sequence_catalog.name OPERATOR(pg_catalog.=) $1
$fingerprint$;

-- The OID of the extension's user-facing function `name` with `arguments` arguments, found
-- among its members in the schema it was created in (whatever that schema is called now).
CREATE FUNCTION snowflake_id_internal.user_function(name name, arguments integer) RETURNS oid
STRICT STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
LANGUAGE sql
AS $user_function$
    SELECT p.oid
      FROM pg_catalog.pg_extension e
      JOIN pg_catalog.pg_depend d ON d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                                 AND d.refobjid OPERATOR(pg_catalog.=) e.oid
                                 AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                                 AND d.deptype OPERATOR(pg_catalog.=) 'e'
      JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) d.objid
     WHERE e.extname OPERATOR(pg_catalog.=) 'snowflake_id'
       AND p.pronamespace OPERATOR(pg_catalog.=) e.extnamespace
       AND p.proname OPERATOR(pg_catalog.=) $1
       AND p.pronargs OPERATOR(pg_catalog.=) $2
$user_function$;

-- Switches a serial, bigserial or identity column (and the columns referencing it) to snowflake
-- IDs (docs/reference.md). STRICT: a NULL argument converts nothing.
CREATE FUNCTION snowflake_convert_column(tbl regclass, col name, seq text DEFAULT 'default')
RETURNS text
LANGUAGE plpgsql
-- STRICT: a NULL argument converts nothing (0.2.0 set DEFAULT snowflake_nextval(NULL)).
STRICT
SET search_path = pg_catalog, pg_temp
AS $convert$
DECLARE
    target_attnum smallint;
    target_type regtype;
    identity_kind "char";
    kind "char";
    owned_sequence text;
    first_id bigint;
    last_id bigint;
    probe_columns text;
    probe_id bigint;
    check_constraint record;
    accepted boolean;
    current_max bigint;
    lead interval;
    old_default text;
    widen record;
    problem text;
    changes text[] := '{}';
    -- The extension's own snowflake_nextval(text), found by OID among its members (not by a
    -- name in a schema a role may own or rename), and the default that calls it.
    nextval_oid oid := snowflake_id_internal.user_function('snowflake_nextval', 1);
    nextval_call text := format('%s(%L::text)', nextval_oid::regproc, seq);
BEGIN
    SELECT c.relkind INTO kind FROM pg_class c WHERE c.oid = tbl;
    IF kind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION '"%" is not a table', tbl
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'snowflake_convert_column converts a column of an ordinary or partitioned table.';
    END IF;
    SELECT a.attnum, a.atttypid::regtype, a.attidentity
      INTO target_attnum, target_type, identity_kind
      FROM pg_attribute a
     WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column "%" of table "%" does not exist', col, tbl USING ERRCODE = 'undefined_column';
    END IF;
    IF target_type NOT IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype) THEN
        RAISE EXCEPTION 'column "%" of table "%" is of type %, not an integer type', col, tbl, target_type
            USING ERRCODE = 'datatype_mismatch',
                  HINT = 'Snowflake IDs are bigint; smallint, integer and bigint columns can be converted.';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_index i
                    WHERE i.indrelid = tbl AND i.indisunique AND i.indpred IS NULL
                      AND target_attnum = ANY (i.indkey::int2[])) THEN
        RAISE EXCEPTION 'column "%" of table "%" is not unique', col, tbl
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = format('Add a primary key or unique constraint first, e.g. ALTER TABLE %s ADD PRIMARY KEY (%I).', tbl, col);
    END IF;

    -- The column and every column referencing it through foreign keys, at any depth, that is
    -- not bigint yet.
    CREATE TEMPORARY TABLE snowflake_convert_targets ON COMMIT DROP AS
    WITH RECURSIVE refs(relid, attnum) AS (
        SELECT tbl::oid, target_attnum
        UNION
        SELECT con.conrelid, con.conkey[k.i]
          FROM refs r
          JOIN pg_constraint con ON con.contype = 'f' AND con.confrelid = r.relid
         CROSS JOIN LATERAL generate_subscripts(con.confkey, 1) AS k(i)
         WHERE con.confkey[k.i] = r.attnum
    )
    SELECT r.relid, r.attnum, a.attname, a.atttypid::regtype AS type, c.relowner
      FROM refs r
      JOIN pg_attribute a ON a.attrelid = r.relid AND a.attnum = r.attnum
      JOIN pg_class c ON c.oid = r.relid;

    SELECT string_agg(DISTINCT t.relid::regclass::text, ', ') INTO problem
      FROM snowflake_convert_targets t WHERE NOT pg_has_role(t.relowner, 'USAGE');
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'must be owner of table % to convert column "%" of table "%"', problem, col, tbl
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Run snowflake_convert_column as the owner of the table and of the tables referencing it.';
    END IF;
    -- Fails for an unknown sequence (42704) or one that cannot generate here (e.g. node id unset).
    first_id := snowflake_id_internal.min_id(clock_timestamp(), seq);
    PERFORM snowflake_id_internal.nextval(seq);
    EXECUTE format('SELECT max(%I)::bigint FROM %s', col, tbl) INTO current_max;
    IF current_max >= first_id THEN
        -- IDs of this very layout a little ahead of the clock (pgEdge's snowflake.nextval runs
        -- ahead when a millisecond's 4096 IDs are used up): wait until the clock has passed
        -- them, so the new IDs continue above every stored one.
        BEGIN
            lead := snowflake_id_internal.tick_start(current_max, seq) - clock_timestamp();
        EXCEPTION WHEN OTHERS THEN
            lead := NULL;  -- not an ID of this layout
        END;
        IF lead <= interval '2 seconds' THEN
            PERFORM pg_sleep(extract(epoch FROM lead) + 0.002);
            first_id := snowflake_id_internal.min_id(clock_timestamp(), seq);
        END IF;
    END IF;
    IF current_max >= first_id THEN
        SELECT pg_get_expr(d.adbin, d.adrelid) INTO old_default
          FROM pg_attrdef d WHERE d.adrelid = tbl AND d.adnum = target_attnum;
        RAISE EXCEPTION 'column "%" of table "%" holds values up to %, not below the next IDs of snowflake sequence "%" (from %)',
                        col, tbl, current_max, seq, first_id
            USING ERRCODE = 'numeric_value_out_of_range',
                  HINT = CASE WHEN old_default LIKE 'snowflake.nextval(%' THEN
                             'The column''s default is pgEdge''s snowflake.nextval: convert it with a sequence of the preset ''pgedge'', whose IDs continue pgEdge''s, e.g. SELECT snowflake_create_sequence(''from_pgedge'', preset => ''pgedge'').'
                         ELSE
                             'New IDs could collide with existing rows; use a sequence whose IDs are larger (an earlier epoch or more time bits).'
                         END;
    END IF;

    -- Every CHECK constraint on the column must accept the IDs the sequence makes, from now to
    -- the end of its time field, or later INSERTs would fail. Each is evaluated on a row of the
    -- table's columns where the column is the bigint it becomes and every other column is NULL
    -- (which a CHECK lets pass).
    last_id := snowflake_id_internal.max_id('infinity', seq);
    SELECT string_agg(CASE WHEN a.attnum = target_attnum THEN '$1::bigint'
                           ELSE format('NULL::%s', format_type(a.atttypid, a.atttypmod)) END
                      || format(' AS %I', a.attname), ', ' ORDER BY a.attnum)
      INTO probe_columns
      FROM pg_attribute a
     WHERE a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped;
    FOR check_constraint IN
        SELECT con.conname, pg_get_expr(con.conbin, con.conrelid) AS expr
          FROM pg_constraint con
         WHERE con.conrelid = tbl AND con.contype = 'c' AND target_attnum = ANY (con.conkey)
         ORDER BY con.conname
    LOOP
        FOREACH probe_id IN ARRAY ARRAY[first_id, last_id] LOOP
            EXECUTE format('SELECT %s FROM (SELECT %s) AS probe', check_constraint.expr, probe_columns)
               INTO accepted USING probe_id;
            IF NOT accepted THEN
                RAISE EXCEPTION 'check constraint "%" of table "%" rejects ID % of snowflake sequence "%": %',
                                check_constraint.conname, tbl, probe_id, seq, check_constraint.expr
                    USING ERRCODE = 'check_violation',
                          HINT = format('The sequence makes IDs from %s to %s; drop or change the constraint so that it accepts them, then convert.',
                                        first_id, last_id);
            END IF;
        END LOOP;
    END LOOP;

    SELECT string_agg(DISTINCT format('%s.%I (%s)', t.relid::regclass, t.attname, t.type), ', ') INTO problem
      FROM snowflake_convert_targets t
     WHERE t.type NOT IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype);
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'cannot widen referencing columns % to bigint', problem USING ERRCODE = 'datatype_mismatch';
    END IF;
    SELECT string_agg(DISTINCT format('%s (using %s.%I)', rw.ev_class::regclass, t.relid::regclass, t.attname), ', ')
      INTO problem
      FROM snowflake_convert_targets t
      JOIN pg_depend d ON d.refclassid = 'pg_class'::regclass AND d.refobjid = t.relid
                      AND d.refobjsubid = t.attnum AND d.classid = 'pg_rewrite'::regclass
      JOIN pg_rewrite rw ON rw.oid = d.objid
     WHERE t.type <> 'bigint'::regtype;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'cannot change the column type to bigint: views or rules use it: %', problem
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Drop those views or rules, convert, and create them again, in one transaction.';
    END IF;

    -- Detach the old generator.
    IF identity_kind <> '' THEN
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I DROP IDENTITY', tbl, col);
        changes := changes || 'identity dropped'::text;
    ELSE
        owned_sequence := pg_get_serial_sequence(tbl::text, col);
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I DROP DEFAULT', tbl, col);
        IF owned_sequence IS NOT NULL THEN
            EXECUTE format('DROP SEQUENCE %s', owned_sequence);
            changes := changes || format('sequence %s dropped', owned_sequence);
        END IF;
    END IF;

    FOR widen IN
        SELECT t.relid::regclass AS rel,
               string_agg(format('ALTER COLUMN %I TYPE bigint', t.attname), ', ' ORDER BY t.attnum) AS clauses,
               string_agg(format('%s.%I', t.relid::regclass, t.attname), ', ' ORDER BY t.attnum) AS names
          FROM snowflake_convert_targets t
         WHERE t.type <> 'bigint'::regtype
         GROUP BY t.relid
         ORDER BY t.relid <> tbl, t.relid::regclass::text
    LOOP
        EXECUTE format('ALTER TABLE %s %s', widen.rel, widen.clauses);
        changes := changes || format('%s widened to bigint', widen.names);
    END LOOP;
    DROP TABLE snowflake_convert_targets;

    EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %s', tbl, col, nextval_call);
    -- The default must call exactly that function: a look-alike overload planted in its schema
    -- (whose owner may be the database's owner) fails here, and the whole conversion with it.
    IF NOT EXISTS (SELECT FROM pg_attrdef ad
                     JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid
                                     AND d.refclassid = 'pg_proc'::regclass AND d.refobjid = nextval_oid
                    WHERE ad.adrelid = tbl AND ad.adnum = target_attnum) THEN
        RAISE EXCEPTION 'the default of column "%" of table "%" does not call snowflake_id''s snowflake_nextval (%)',
                        col, tbl, nextval_oid::regprocedure
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'A function of that name in the extension''s schema took the call: drop it, then convert again.';
    END IF;
    changes := changes || format('default %s(%L)', nextval_oid::regproc, seq);
    RETURN format('%s.%I: %s', tbl, col, array_to_string(changes, '; '));
END
$convert$;

COMMENT ON FUNCTION snowflake_convert_column(regclass, name, text) IS
    'Switches a serial, bigserial or identity column (and the columns referencing it) to snowflake IDs';

-- Rows that come without their database's floor (a dump made with pg_dump -n or -t but without
-- --extension=snowflake_id, rows copied from another server) can hold IDs that new ones would
-- repeat. pg_restore builds a table's keys after its rows: when a command leaves a valid, whole
-- btree index whose first column is a bigint defaulting to snowflake_nextval(['<sequence>']), the
-- index's last entry is compared with where this database's new IDs begin, and a WARNING names a
-- superuser's step when it lies beyond (src/checks/stored_ids.rs; docs/reference.md "Moving to a new
-- cluster"). No value in a table moves the floor, no role's code runs, no role is switched. The
-- check never fails the command; Citus tables are left out (their rows are on the workers). A C
-- function: a command that can neither build an index nor set a default (told apart by its
-- parse tree) costs one call that returns, and nothing is planned again at each firing.
CREATE FUNCTION snowflake_id_internal.stored_ids_ahead_of_new_indexes() RETURNS event_trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_stored_ids_ahead_of_new_indexes';

CREATE EVENT TRIGGER snowflake_id_warn_of_stored_ids_ahead ON ddl_command_end
    WHEN TAG IN ('CREATE INDEX', 'ALTER TABLE')
    EXECUTE FUNCTION snowflake_id_internal.stored_ids_ahead_of_new_indexes();

-- The layouts and what follows from them. Read-only: rows come from a subquery, so the view is
-- not automatically updatable (no grant on it reaches the catalog table through it). A row that
-- names no valid layout (only a superuser with triggers off can insert one) shows its own
-- columns and NULL for what derives from them, so it breaks nobody's read. Then the worker ids
-- in use, per worker space.
CREATE VIEW @extschema@.snowflake_sequences AS
SELECT c.name,
       c.preset,
       c.time_bits, c.node_bits, c.worker_bits, c.sequence_bits, c.gene_bits,
       CASE WHEN c.servable
            THEN pg_catalog.make_interval(secs => c.time_unit_us OPERATOR(pg_catalog./) 1e6)
       END AS time_unit,
       c.epoch,
       CASE WHEN NOT c.servable THEN NULL
            WHEN ((2::double precision OPERATOR(pg_catalog.^) c.time_bits)
                  OPERATOR(pg_catalog.*) c.time_unit_us OPERATOR(pg_catalog./) 1e6)
                 OPERATOR(pg_catalog.>) 2.5e11
            THEN 'infinity'::pg_catalog.timestamptz
            ELSE c.epoch OPERATOR(pg_catalog.+) pg_catalog.make_interval(
                     secs => (2::double precision OPERATOR(pg_catalog.^) c.time_bits)
                             OPERATOR(pg_catalog.*) c.time_unit_us OPERATOR(pg_catalog./) 1e6)
       END AS runs_out_at,
       CASE WHEN c.servable
            THEN (2::double precision OPERATOR(pg_catalog.^) c.sequence_bits)::bigint
       END AS ids_per_tick,
       CASE WHEN c.servable
            THEN ((2::double precision OPERATOR(pg_catalog.^) c.sequence_bits)
                  OPERATOR(pg_catalog.*) 1e6 OPERATOR(pg_catalog./) c.time_unit_us)::bigint
       END AS ids_per_second_per_session,
       CASE WHEN c.servable
            THEN (2::double precision OPERATOR(pg_catalog.^) c.worker_bits)::bigint
       END AS sessions_per_node,
       CASE WHEN c.servable
            THEN (2::double precision OPERATOR(pg_catalog.^) c.node_bits)::bigint
       END AS nodes,
       -- Equal on two nodes exactly when their layouts are equal (sharding guide).
       pg_catalog.md5(pg_catalog.concat_ws('/', c.time_bits, c.node_bits, c.worker_bits,
                                           c.sequence_bits, c.gene_bits, c.time_unit_us,
                                           (EXTRACT(epoch FROM c.epoch)
                                            OPERATOR(pg_catalog.*) 1000000)::bigint)) AS fingerprint
FROM (SELECT s.*,
             s.time_unit_us OPERATOR(pg_catalog.=) ANY ('{1000,10000,100000,1000000}'::bigint[])
             AND s.time_bits OPERATOR(pg_catalog.>=) 1
             AND s.sequence_bits OPERATOR(pg_catalog.>=) 1
             AND s.node_bits OPERATOR(pg_catalog.>=) 0
             AND s.worker_bits OPERATOR(pg_catalog.>=) 0
             AND s.gene_bits OPERATOR(pg_catalog.>=) 0
             AND s.time_bits OPERATOR(pg_catalog.<=) 63
             AND (s.node_bits::bigint OPERATOR(pg_catalog.+) s.worker_bits
                  OPERATOR(pg_catalog.+) s.sequence_bits OPERATOR(pg_catalog.+) s.gene_bits
                  OPERATOR(pg_catalog.+) s.time_bits) OPERATOR(pg_catalog.<=) 63 AS servable
        FROM snowflake_id_internal.snowflake_sequence_catalog AS s) AS c
ORDER BY c.name;
COMMENT ON VIEW @extschema@.snowflake_sequences IS
    'Snowflake sequences with their layouts and capacities';

CREATE VIEW @extschema@.snowflake_workers AS
SELECT w.worker_bits,
       w.worker,
       w.sessions,
       w.sessions OPERATOR(pg_catalog.>) 1 AS shared,
       w.pid,
       d.datname AS database,
       w.claimed_at,
       w.ids_issued
FROM @extschema@.snowflake_worker_slots() AS w
LEFT JOIN pg_catalog.pg_database AS d ON d.oid OPERATOR(pg_catalog.=) w.database_oid
ORDER BY w.worker_bits, w.worker;

COMMENT ON VIEW @extschema@.snowflake_workers IS
    'Worker ids in use, per worker space: how many sessions use each, and who took it first';

-- A one-line description of every function, as \df+ shows it: the reference's table of functions
-- (docs/reference.md, "SQL reference"; pgrx-tests/tests/functions_describe_themselves.rs).
COMMENT ON FUNCTION @extschema@.snowflake_nextval(pg_catalog.text) IS
    'The next ID of a snowflake sequence: unique, strictly increasing within a session';
COMMENT ON FUNCTION @extschema@.snowflake_nextval(pg_catalog.text, pg_catalog.int8) IS
    'The next ID, carrying the low gene_bits bits of a key';
COMMENT ON FUNCTION @extschema@.snowflake_currval(pg_catalog.text) IS
    'The last ID this session made of the sequence';
COMMENT ON FUNCTION @extschema@.snowflake_lastval() IS
    'The last ID this session made of any sequence';
COMMENT ON FUNCTION @extschema@.snowflake_decode(pg_catalog.int8, pg_catalog.text) IS
    'The fields of an ID: tick start, node, worker, sequence, gene';
COMMENT ON FUNCTION @extschema@.snowflake_timestamp(pg_catalog.int8, pg_catalog.text) IS
    'The start of the tick an ID was made in';
COMMENT ON FUNCTION @extschema@.snowflake_min_id(pg_catalog.timestamptz, pg_catalog.text) IS
    'The smallest ID any node could make in the tick containing a time';
COMMENT ON FUNCTION @extschema@.snowflake_max_id(pg_catalog.timestamptz, pg_catalog.text) IS
    'The largest ID any node could make in the tick containing a time';
COMMENT ON FUNCTION @extschema@.snowflake_to_base32(pg_catalog.int8) IS
    'An ID as 13 characters of Crockford base32, in the same order as the IDs';
COMMENT ON FUNCTION @extschema@.snowflake_from_base32(pg_catalog.text) IS
    'The ID a Crockford base32 text stands for';
COMMENT ON FUNCTION @extschema@.snowflake_partition_width(pg_catalog.interval, pg_catalog.text) IS
    'How many IDs a time partition of the given span holds';
COMMENT ON FUNCTION @extschema@.snowflake_partition_bounds(pg_catalog.timestamptz, pg_catalog.interval, pg_catalog.text) IS
    'The ID range of the time partition containing a time';
COMMENT ON FUNCTION @extschema@.snowflake_partition_bounds(pg_catalog.int8, pg_catalog.interval, pg_catalog.text) IS
    'The ID range of the time partition containing an ID';
COMMENT ON FUNCTION @extschema@.snowflake_create_sequence(pg_catalog.text, pg_catalog.text, pg_catalog.timestamptz, pg_catalog.interval, pg_catalog.int4, pg_catalog.int4, pg_catalog.int4, pg_catalog.int4, pg_catalog.int4) IS
    'Creates a named snowflake sequence from a preset and field overrides';
COMMENT ON FUNCTION @extschema@.snowflake_drop_sequence(pg_catalog.text) IS
    'Drops a named snowflake sequence; its IDs can no longer be decoded by its name';
COMMENT ON FUNCTION @extschema@.snowflake_accept_floor() IS
    'Takes this database''s floor relation into the server''s durable floor, however far ahead (superusers)';
COMMENT ON FUNCTION @extschema@.snowflake_stats() IS
    'The server''s clock steps, floor raises and accepts, reservation writes, worker ids in use and IDs issued';
COMMENT ON FUNCTION @extschema@.snowflake_directory() IS
    'The server''s extension directory per database: its entry, the lookups it answered, why it is off';
COMMENT ON FUNCTION @extschema@.snowflake_worker_slots() IS
    'The worker ids in use and the sessions holding them (read through snowflake_workers)';
COMMENT ON FUNCTION @extschema@.snowflake_citus_receive_sequence(pg_catalog.text, pg_catalog.text, pg_catalog.int8, pg_catalog.int8, pg_catalog.int4, pg_catalog.int4, pg_catalog.int4, pg_catalog.int4, pg_catalog.int4) IS
    'A Citus coordinator''s new sequence, received on a worker (superusers)';
COMMENT ON FUNCTION @extschema@.snowflake_citus_forget_sequence(pg_catalog.text) IS
    'A Citus coordinator''s dropped sequence, dropped on a worker (superusers)';
COMMENT ON FUNCTION @extschema@.snowflake_citus_node_ids() IS
    'Each Citus node''s snowflake_id.node_id, checked to be set and distinct';

-- Every member's privileges, set to the documented ones (docs/reference.md "Privileges"),
-- whatever default privileges (of any role, the creating superuser's included, global or IN
-- SCHEMA) or bulk grants gave when the objects were made or since: everything every role
-- holds is revoked, then the owner gets all and PUBLIC and pg_database_owner what the reference
-- lists. Functions are EXECUTE for PUBLIC: the privileged ones check the caller when they run.
DO $documented_privileges$
DECLARE
    member record;
    grantee_name text;
BEGIN
    FOR member IN
        SELECT m.kind, m.target, m.acl, m.owner, m.grants
          FROM pg_catalog.pg_extension AS e
          JOIN pg_catalog.pg_depend AS d
            ON d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
           AND d.refobjid OPERATOR(pg_catalog.=) e.oid
           AND d.deptype OPERATOR(pg_catalog.=) 'e'
         CROSS JOIN LATERAL (
                SELECT 'FUNCTION' AS kind, p.oid::pg_catalog.regprocedure::text AS target,
                       p.proacl AS acl, p.proowner AS owner,
                       '{"EXECUTE TO PUBLIC"}'::text[] AS grants
                  FROM pg_catalog.pg_proc AS p
                 WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                   AND p.oid OPERATOR(pg_catalog.=) d.objid
                UNION ALL
                SELECT CASE WHEN r.relkind OPERATOR(pg_catalog.=) 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
                       r.oid::pg_catalog.regclass::text, r.relacl, r.relowner,
                       CASE WHEN r.relkind OPERATOR(pg_catalog.=) 'r'
                            THEN '{"SELECT TO PUBLIC","INSERT TO pg_database_owner"}'::text[]
                            WHEN r.relkind OPERATOR(pg_catalog.=) 'S'
                            THEN '{"SELECT TO PUBLIC","UPDATE TO pg_database_owner"}'::text[]
                            ELSE '{"SELECT TO PUBLIC"}'::text[] END
                  FROM pg_catalog.pg_class AS r
                 WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                   AND r.oid OPERATOR(pg_catalog.=) d.objid
                UNION ALL
                SELECT 'SCHEMA', pg_catalog.quote_ident(n.nspname), n.nspacl, n.nspowner,
                       '{"USAGE TO PUBLIC"}'::text[]
                  FROM pg_catalog.pg_namespace AS n
                 WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
                   AND n.oid OPERATOR(pg_catalog.=) d.objid
                UNION ALL
                SELECT 'TYPE', t.oid::pg_catalog.regtype::text, t.typacl, t.typowner,
                       '{"USAGE TO PUBLIC"}'::text[]
                  FROM pg_catalog.pg_type AS t
                 WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass
                   AND t.oid OPERATOR(pg_catalog.=) d.objid
                   -- An array type and a relation's row type (members too from PostgreSQL
                   -- 17) have their element's and their relation's.
                   AND t.typelem OPERATOR(pg_catalog.=) 0
                   AND t.typrelid OPERATOR(pg_catalog.=) 0
               ) AS m
         WHERE e.extname OPERATOR(pg_catalog.=) 'snowflake_id'
    LOOP
        -- Everybody's privileges go, the owner's and PUBLIC's included, so that the grants
        -- below leave the same list in the same order on every path (a fresh install, an
        -- update from any release).
        FOR grantee_name IN
            SELECT 'PUBLIC'
            UNION
            SELECT pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(member.owner))
            UNION
            SELECT pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee))
              FROM pg_catalog.aclexplode(member.acl) AS a
             WHERE a.grantee OPERATOR(pg_catalog.<>) 0
        LOOP
            EXECUTE pg_catalog.format('REVOKE ALL ON %s %s FROM %s CASCADE',
                                      member.kind, member.target, grantee_name);
        END LOOP;
        EXECUTE pg_catalog.format('GRANT ALL ON %s %s TO %s', member.kind, member.target,
                                  pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(member.owner)));
        FOR grantee_name IN SELECT pg_catalog.unnest(member.grants) LOOP
            EXECUTE pg_catalog.format('GRANT %s ON %s %s TO %s',
                                      pg_catalog.split_part(grantee_name, ' TO ', 1),
                                      member.kind, member.target,
                                      pg_catalog.split_part(grantee_name, ' TO ', 2));
        END LOOP;
    END LOOP;
END
$documented_privileges$;
