-- snowflake_id 0.2.0 → 0.3.0: the durable floor, currval/lastval, the text form, hardening.
-- - snowflake_currval(seq) and snowflake_lastval(): the last ID this session made, like
--   currval() and lastval(); snowflake_to_base32(id) / snowflake_from_base32(text): the compact
--   text form (docs/design.md §6). CREATE OR REPLACE, so the same text works in a fresh install.
-- - snowflake_stats() reports the forward jumps of the wall clock it followed and ignored, and
--   the durable floor (docs/design.md §3, §5).
-- - snowflake_convert_column is STRICT, and refuses a column whose CHECK constraints reject the
--   sequence's IDs, before it changes anything.
-- - The SECURITY DEFINER functions search pg_catalog first, so no object in the extension's
--   schema can stand in for a built-in operator or function while they run.
-- The same text is part of a fresh 0.3.0 install (extension_sql_file! in src/lib.rs), so an
-- updated database and a new one have identical objects.

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
    durable_floor timestamp with time zone
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_stats_wrapper';

CREATE OR REPLACE FUNCTION snowflake_currval(seq text DEFAULT 'default') RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_currval_wrapper';

CREATE OR REPLACE FUNCTION snowflake_lastval() RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_lastval_wrapper';

CREATE OR REPLACE FUNCTION snowflake_to_base32(id bigint) RETURNS text
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_to_base32_wrapper';

CREATE OR REPLACE FUNCTION snowflake_from_base32(text text) RETURNS bigint
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_from_base32_wrapper';

-- pg_catalog, pg_temp: the functions name the extension's objects by OID (0.10.0; up to 0.9.0
-- this set pg_catalog, @extschema@, pg_temp). The script runs with the current library only.
ALTER FUNCTION snowflake_create_sequence(text, text, timestamptz, interval, integer, integer, integer, integer, integer)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION snowflake_drop_sequence(text)
    SET search_path = pg_catalog, pg_temp;

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
    widen record;
    problem text;
    changes text[] := '{}';
    -- @extschema@ is replaced by the (already quoted) schema name when the script runs.
    nextval_call text := format('@extschema@.snowflake_nextval(%L)', seq);
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
    first_id := @extschema@.snowflake_min_id(clock_timestamp(), seq);
    PERFORM @extschema@.snowflake_nextval(seq);
    EXECUTE format('SELECT max(%I)::bigint FROM %s', col, tbl) INTO current_max;
    IF current_max >= first_id THEN
        RAISE EXCEPTION 'column "%" of table "%" holds values up to %, not below the next IDs of snowflake sequence "%" (from %)',
                        col, tbl, current_max, seq, first_id
            USING ERRCODE = 'numeric_value_out_of_range',
                  HINT = 'New IDs could collide with existing rows; use a sequence whose IDs are larger (an earlier epoch or more time bits).';
    END IF;

    -- Every CHECK constraint on the column must accept the IDs the sequence makes, from now to
    -- the end of its time field, or later INSERTs would fail. Each is evaluated on a row of the
    -- table's columns where the column is the bigint it becomes and every other column is NULL
    -- (which a CHECK lets pass).
    last_id := @extschema@.snowflake_max_id('infinity', seq);
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
    changes := changes || format('default %s', nextval_call);
    RETURN format('%s.%I: %s', tbl, col, array_to_string(changes, '; '));
END
$convert$;

