-- snowflake_id 0.10.0 → 0.11.0: sealed by construction (docs/design.md §6, "Privileges" and its
-- threat model; docs/reference.md "Privileges"). Up to 0.11.0 a fresh install ran this too, last
-- (extension_sql_file! in src/lib.rs, finalize).
--
-- - Nothing here depends on search_path when it is created or when it runs: every operator is
--   OPERATOR(pg_catalog.…), every function and type is pg_catalog's or the extension's, named
--   by schema, and every function whose body is text pins search_path = pg_catalog, pg_temp
--   (pgrx-tests/tests/sealed_by_construction.rs checks this from the catalog for every member).
-- - The privileged functions decide by who calls when they run (src/privileges.rs), not by an
--   ACL that a routine grant widens; at the end every member's ACL is set to the documented one.
-- - The view is read-only, and the catalog table accepts only rows the extension can serve.

-- The layouts and what follows from them. Read-only: rows come from a subquery, so the view is
-- not automatically updatable (no grant on it reaches the catalog table through it). A row
-- that names no valid layout (only a superuser with triggers off can insert one) shows its own
-- columns and NULL for what derives from them, so it breaks nobody's read.
CREATE OR REPLACE VIEW @extschema@.snowflake_sequences AS
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

CREATE OR REPLACE VIEW @extschema@.snowflake_workers AS
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

-- The catalog table's guard checks inserted rows too (src/catalog.rs, catalog_guard): a
-- restore or a pg_write_all_data member adds only rows the extension can serve (23514).
DROP TRIGGER changed_only_by_snowflake_id ON snowflake_id_internal.snowflake_sequence_catalog;
CREATE TRIGGER changed_only_by_snowflake_id
    BEFORE INSERT OR UPDATE OR DELETE ON snowflake_id_internal.snowflake_sequence_catalog
    FOR EACH ROW EXECUTE FUNCTION snowflake_id_internal.catalog_guard();

-- Creating and dropping sequences: the caller is checked when the function runs (the database's
-- owner or a superuser), and the catalog is written as its owner; not SECURITY DEFINER any more.
ALTER FUNCTION @extschema@.snowflake_create_sequence(text, text, timestamptz, interval, integer, integer, integer, integer, integer)
    SECURITY INVOKER;
ALTER FUNCTION @extschema@.snowflake_drop_sequence(text)
    SECURITY INVOKER;

-- The check of IDs stored ahead of the floor reads an index's last entry instead of the table
-- as its owner (src/stored_ids.rs): no role's code runs, no role is switched.
DROP FUNCTION IF EXISTS snowflake_id_internal.warn_of_stored_ids_ahead(oid, text, text);
CREATE FUNCTION snowflake_id_internal.warn_of_stored_ids_ahead(index oid, seq text) RETURNS void
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'warn_of_stored_ids_ahead_wrapper';

CREATE OR REPLACE FUNCTION snowflake_id_internal.stored_ids_ahead_of_new_indexes() RETURNS event_trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $cover$
DECLARE
    candidate record;
    distributed boolean;
BEGIN
    FOR candidate IN
        SELECT DISTINCT i.indexrelid AS index, i.indrelid AS tbl,
               pg_catalog.regexp_match(pg_catalog.pg_get_expr(ad.adbin, ad.adrelid),
                            '^(?:[^(]*\.)?snowflake_nextval\((?:''((?:[^'']|'''')*)''::text)?\)$') AS call
          FROM pg_catalog.pg_event_trigger_ddl_commands() AS c
          JOIN pg_catalog.pg_index AS i ON c.objid OPERATOR(pg_catalog.=) i.indexrelid
                                        OR c.objid OPERATOR(pg_catalog.=) i.indrelid
          JOIN pg_catalog.pg_class AS ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid
          JOIN pg_catalog.pg_am AS am ON am.oid OPERATOR(pg_catalog.=) ic.relam
                                     AND am.amname OPERATOR(pg_catalog.=) 'btree'
          JOIN pg_catalog.pg_attribute AS a ON a.attrelid OPERATOR(pg_catalog.=) i.indrelid
                                           AND a.attnum OPERATOR(pg_catalog.=) i.indkey[0]
          JOIN pg_catalog.pg_attrdef AS ad ON ad.adrelid OPERATOR(pg_catalog.=) a.attrelid
                                          AND ad.adnum OPERATOR(pg_catalog.=) a.attnum
          JOIN pg_catalog.pg_depend AS d
            ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass
           AND d.objid OPERATOR(pg_catalog.=) ad.oid
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
           AND d.refobjid OPERATOR(pg_catalog.=) snowflake_id_internal.user_function('snowflake_nextval', 1)
         WHERE c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND c.object_type OPERATOR(pg_catalog.=) ANY ('{table,index}'::text[])
           AND i.indisvalid AND i.indpred IS NULL
           AND a.atttypid OPERATOR(pg_catalog.=) 'pg_catalog.int8'::pg_catalog.regtype
    LOOP
        CONTINUE WHEN candidate.call IS NULL;
        BEGIN
            IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
                EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition
                                         WHERE logicalrelid OPERATOR(pg_catalog.=) $1)'
                   INTO distributed USING candidate.tbl;
                CONTINUE WHEN distributed;
            END IF;
            PERFORM snowflake_id_internal.warn_of_stored_ids_ahead(
                        candidate.index,
                        COALESCE(pg_catalog.replace(candidate.call[1], '''''', ''''), 'default'));
        EXCEPTION WHEN OTHERS THEN
            -- A check that cannot run (a corrupted catalog row, say) leaves the command alone;
            -- only a candidate pays for the subtransaction.
            RAISE WARNING 'snowflake_id could not compare the IDs the command indexed with this database''s floor: %', SQLERRM;
        END;
    END LOOP;
END
$cover$;

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
