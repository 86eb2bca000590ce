-- snowflake_id 0.1.0 → 0.2.0: adds snowflake_convert_column().
-- The same text is part of a fresh 0.2.0 install (extension_sql_file! in src/lib.rs), so an
-- updated database and a new one have identical objects.

CREATE FUNCTION snowflake_convert_column(tbl regclass, col name, seq text DEFAULT 'default')
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $convert$
DECLARE
    target_attnum smallint;
    target_type regtype;
    identity_kind "char";
    kind "char";
    owned_sequence text;
    first_id bigint;
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

COMMENT ON FUNCTION snowflake_convert_column(regclass, name, text) IS
    'Switches a serial, bigserial or identity column (and the columns referencing it) to snowflake IDs';
