-- snowflake_id 0.4.0 → 0.5.0: the floor in each database (docs/design.md §5.3).
-- - snowflake_floor: a sequence relation whose value is a time (µs since 1970) that no tick of
--   an ID issued in this database ends after. The extension writes it (as its owner) before IDs
--   above it leave; PostgreSQL carries it: WAL (standbys, crash recovery, PITR), pg_upgrade
--   (the relation's file), pg_dump (a configuration sequence, dumped as setval). It replaces
--   reading the IDs stored in user tables, which ran as a superuser over data and code any role
--   could write. No privileges for PUBLIC: only its owner (and superusers) can change it.
-- - snowflake_raise_floor(until): the documented step that carries another cluster's IDs over
--   where neither its WAL nor this relation came along (a logical-replication move, rows copied
--   from elsewhere). Revoked from PUBLIC.
-- Up to 0.11.0 a fresh install ran this too (extension_sql_file! in src/lib.rs); an updated database and
-- a new one have identical objects. An updated database's relation is empty until its first ID
-- (or the next one a running session issues), which writes this server's reservation into it.

-- The names must be free in the extension's schema: an object a role made there (in a database
-- whose extension predated 0.5.0) is never taken for the floor (src/database_floor.rs reads only
-- the extension's members), and the update says whose it is instead of failing with a bare
-- "already exists".
DO $$
DECLARE
    taken text;
BEGIN
    SELECT pg_catalog.format('%s %I.%I (owned by %I)',
                             CASE c.relkind WHEN 'S' THEN 'sequence' WHEN 'r' THEN 'table'
                                            WHEN 'v' THEN 'view' ELSE 'relation' END,
                             n.nspname, c.relname, pg_catalog.pg_get_userbyid(c.relowner))
      INTO taken
      FROM pg_catalog.pg_class c
      JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
     WHERE c.relnamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
       AND c.relname OPERATOR(pg_catalog.=) ANY
           (ARRAY['snowflake_floor', 'snowflake_floor_writer']::pg_catalog.name[])
     ORDER BY c.relname
     LIMIT 1;
    IF taken IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'duplicate_table',
            MESSAGE = pg_catalog.format(
                'snowflake_id cannot create its floor relation: %s has its name', taken),
            DETAIL = 'snowflake_id 0.5.0 and later keep the floor of each database in the sequences '
                     'snowflake_floor and snowflake_floor_writer of the extension''s schema; an '
                     'object that is not the extension''s is never read as them.',
            HINT = 'Rename or drop that object (ALTER ... RENAME TO ...), then run the command again.';
    END IF;
END
$$;

CREATE SEQUENCE snowflake_floor AS bigint MINVALUE 0 START WITH 0 NO CYCLE;
COMMENT ON SEQUENCE snowflake_floor IS
    'snowflake_id: no ID issued in this database has a tick ending after this time (µs since 1970)';
REVOKE ALL ON SEQUENCE snowflake_floor FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('snowflake_floor', '');
-- Which cluster wrote snowflake_floor: its system identifier (pg_control_system()), 0 for none.
-- A value another cluster wrote (pg_upgrade, a restored dump) raises this server's floor; one
-- this cluster wrote is already below its reservation file and WAL records, so a clean restart
-- does not jump ahead to it.
CREATE SEQUENCE snowflake_floor_writer AS bigint MINVALUE -9223372036854775808 START WITH 0
    NO CYCLE;
COMMENT ON SEQUENCE snowflake_floor_writer IS
    'snowflake_id: system identifier of the cluster that last wrote snowflake_floor';
REVOKE ALL ON SEQUENCE snowflake_floor_writer FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('snowflake_floor_writer', '');

CREATE OR REPLACE FUNCTION snowflake_raise_floor(until timestamptz) RETURNS timestamptz
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_raise_floor_wrapper';
COMMENT ON FUNCTION snowflake_raise_floor(timestamptz) IS
    'No ID issued from now on is at or below this time: the cut-over step of a move from another cluster';

REVOKE EXECUTE ON FUNCTION snowflake_raise_floor(timestamptz) FROM PUBLIC;
