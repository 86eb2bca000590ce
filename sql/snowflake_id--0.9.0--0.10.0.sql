-- snowflake_id 0.9.0 → 0.10.0: the extension's state out of every ordinary role's reach
-- (docs/design.md §6, "The extension's own schema"; docs/reference.md "Privileges").
--
-- Up to 0.9.0 the catalog table and the floor relations lived in the schema the extension was
-- created in, usually public, which PostgreSQL 15 and later give to the database's owner, and
-- which bulk grants (GRANT … ON ALL TABLES IN SCHEMA public, ALTER DEFAULT PRIVILEGES IN SCHEMA
-- public) reach. They move to the schema snowflake_id_internal, which this script creates (so it
-- belongs to the extension and to the superuser running it, and no other role can create,
-- rename or drop anything in it); their privileges are set anew; the functions that privileged
-- code calls get copies there; snowflake_convert_column calls those instead of names resolved
-- in the extension's schema when it was created. The user-facing functions stay where they
-- are: DEFAULT snowflake_nextval() works as before.
-- Up to 0.11.0 a fresh install ran this too (extension_sql_file! in src/lib.rs).

-- A schema of that name made by somebody else would put the state back in a role's hands.
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

ALTER TABLE @extschema@.snowflake_sequence_catalog SET SCHEMA snowflake_id_internal;
ALTER SEQUENCE @extschema@.snowflake_floor SET SCHEMA snowflake_id_internal;
ALTER SEQUENCE @extschema@.snowflake_floor_writer SET SCHEMA snowflake_id_internal;
-- Since 0.10.0 the writer names the cluster and its WAL timeline (the system identifier itself on
-- timeline 1), so that a floor written on a timeline a promotion or a point-in-time recovery
-- left raises this server's floor.
COMMENT ON SEQUENCE snowflake_id_internal.snowflake_floor_writer IS
    'snowflake_id: the cluster (system identifier) and WAL timeline that last wrote snowflake_floor';

-- Privileges set anew: whatever default privileges or bulk grants gave any role when the
-- objects were created (ALTER DEFAULT PRIVILEGES, GRANT … ON ALL TABLES IN SCHEMA) is revoked.
DO $privileges$
DECLARE
    target pg_catalog.regclass;
    grantee_name text;
BEGIN
    FOREACH target IN ARRAY ARRAY['snowflake_id_internal.snowflake_sequence_catalog',
                                  'snowflake_id_internal.snowflake_floor',
                                  'snowflake_id_internal.snowflake_floor_writer']::pg_catalog.regclass[]
    LOOP
        FOR grantee_name IN
            SELECT DISTINCT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                 ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END
              FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
             WHERE c.oid OPERATOR(pg_catalog.=) target
               AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
        LOOP
            EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s', target, grantee_name);
        END LOOP;
    END LOOP;
END
$privileges$;
GRANT USAGE ON SCHEMA snowflake_id_internal TO PUBLIC;
-- Read by everybody (pg_dump by whoever may dump the database reads them); not secret.
GRANT SELECT ON snowflake_id_internal.snowflake_sequence_catalog TO PUBLIC;
GRANT SELECT ON SEQUENCE snowflake_id_internal.snowflake_floor,
                         snowflake_id_internal.snowflake_floor_writer TO PUBLIC;
-- The database's owner restores its own dumps: pg_restore adds its sequences (rows; a layout is
-- validated when read, and a row changed in place is refused) and sets the floor, which the
-- extension trusts only up to a bound ahead of the wall clock (docs/design.md §5.3).
GRANT INSERT ON snowflake_id_internal.snowflake_sequence_catalog TO pg_database_owner;
GRANT UPDATE ON SEQUENCE snowflake_id_internal.snowflake_floor,
                         snowflake_id_internal.snowflake_floor_writer TO pg_database_owner;

-- Rows are only inserted, and deleted by snowflake_drop_sequence: a guard refuses every other
-- UPDATE or DELETE, also by roles PostgreSQL lets write every table (pg_write_all_data).
CREATE FUNCTION snowflake_id_internal.catalog_guard() RETURNS trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_catalog_guard';
REVOKE EXECUTE ON FUNCTION snowflake_id_internal.catalog_guard() FROM PUBLIC;
CREATE TRIGGER changed_only_by_snowflake_id
    BEFORE UPDATE OR DELETE ON snowflake_id_internal.snowflake_sequence_catalog
    FOR EACH ROW EXECUTE FUNCTION snowflake_id_internal.catalog_guard();

-- What privileged SQL calls, in the extension's own schema: the same C functions as the
-- user-facing ones.
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
REVOKE EXECUTE ON FUNCTION
    snowflake_id_internal.citus_receive_sequence(text, text, bigint, bigint, integer, integer, integer, integer, integer),
    snowflake_id_internal.citus_forget_sequence(text)
FROM PUBLIC;
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

-- Privileged functions resolve no name in a schema a role may own: their bodies name the
-- extension's objects by OID or in snowflake_id_internal.
ALTER FUNCTION @extschema@.snowflake_create_sequence(text, text, timestamptz, interval, integer, integer, integer, integer, integer)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.snowflake_drop_sequence(text)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.snowflake_citus_receive_sequence(text, text, bigint, bigint, integer, integer, integer, integer, integer)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.snowflake_citus_forget_sequence(text)
    SET search_path = pg_catalog, pg_temp;

-- A floor value the extension did not write counts only up to a bound ahead of the wall clock;
-- beyond it a superuser accepts it (docs/reference.md "Moving to a new cluster"). OR REPLACE:
-- a fresh install declared it already from the Rust code, an update declares it here.
CREATE OR REPLACE FUNCTION @extschema@.snowflake_accept_floor() RETURNS timestamptz
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_accept_floor_wrapper';
REVOKE EXECUTE ON FUNCTION @extschema@.snowflake_accept_floor() FROM PUBLIC;

CREATE OR REPLACE FUNCTION snowflake_convert_column(tbl regclass, col name, seq text DEFAULT 'default')
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

-- Rows that come without their database's floor (a dump made with pg_dump -n or -t but without
-- --extension=snowflake_id, rows copied from another server) can hold IDs that new ones would
-- repeat. pg_restore builds a table's keys after its rows: when a command leaves a valid, whole
-- btree index whose first column is a bigint defaulting to snowflake_nextval(['<sequence>']),
-- that column's largest ID is compared with where this database's new IDs begin, and a WARNING
-- names a superuser's step when it lies beyond (src/stored_ids.rs; docs/reference.md "Moving to
-- a new cluster"). No value in a table moves the floor. The check never fails the command;
-- Citus tables are left out (their rows are on the workers).
CREATE FUNCTION snowflake_id_internal.warn_of_stored_ids_ahead(tbl oid, col text, seq text) RETURNS void
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'warn_of_stored_ids_ahead_wrapper';

CREATE FUNCTION snowflake_id_internal.stored_ids_ahead_of_new_indexes() RETURNS event_trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $cover$
DECLARE
    candidate record;
    distributed boolean;
BEGIN
    FOR candidate IN
        SELECT DISTINCT a.attrelid AS tbl, a.attname::text AS col,
               regexp_match(pg_get_expr(ad.adbin, ad.adrelid),
                            '^(?:[^(]*\.)?snowflake_nextval\((?:''((?:[^'']|'''')*)''::text)?\)$') AS call
          FROM pg_event_trigger_ddl_commands() AS c
          JOIN pg_index AS i ON c.objid IN (i.indexrelid, i.indrelid)
          JOIN pg_class AS ic ON ic.oid = i.indexrelid
          JOIN pg_am AS am ON am.oid = ic.relam AND am.amname = 'btree'
          JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
          JOIN pg_attrdef AS ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
          JOIN pg_depend AS d ON d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid
                             AND d.refclassid = 'pg_proc'::regclass
                             AND d.refobjid = snowflake_id_internal.user_function('snowflake_nextval', 1)
         WHERE c.classid = 'pg_class'::regclass
           AND c.object_type IN ('table', 'index')
           AND i.indisvalid AND i.indpred IS NULL
           AND a.atttypid = 'bigint'::regtype
    LOOP
        CONTINUE WHEN candidate.call IS NULL;
        BEGIN
            IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
                EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1)'
                   INTO distributed USING candidate.tbl;
                CONTINUE WHEN distributed;
            END IF;
            PERFORM snowflake_id_internal.warn_of_stored_ids_ahead(
                        candidate.tbl, candidate.col,
                        coalesce(replace(candidate.call[1], '''''', ''''), 'default'));
        EXCEPTION WHEN OTHERS THEN
            -- A check that cannot run (a corrupted catalog row, say) leaves the command alone;
            -- only a candidate pays for the subtransaction.
            RAISE WARNING 'snowflake_id could not compare the IDs the command indexed with this database''s floor: %', SQLERRM;
        END;
    END LOOP;
END
$cover$;
-- The trigger calls them as whichever role ran the command (default privileges that revoke
-- EXECUTE from PUBLIC must not turn every such command into a WARNING).
GRANT EXECUTE ON FUNCTION snowflake_id_internal.warn_of_stored_ids_ahead(oid, text, text),
                          snowflake_id_internal.user_function(name, integer) TO PUBLIC;

CREATE EVENT TRIGGER snowflake_id_warn_of_stored_ids_ahead ON ddl_command_end
    WHEN TAG IN ('CREATE INDEX', 'ALTER TABLE')
    EXECUTE FUNCTION snowflake_id_internal.stored_ids_ahead_of_new_indexes();
