-- snowflake_id 0.13.0 → 0.14.0: a description on every function (COMMENT ON, below), nothing
-- else in the database.
--
-- The rest is the library's (CHANGELOG.md): creating and dropping sequences serve every
-- role with CREATE on the database, locks on the extension's state are judged by what
-- PostgreSQL locks, a refused or rolled-back write leaves the extension directory trusted, the
-- stored-IDs check reads every partition's index, and a raised floor is no backward step of
-- the wall clock. Every sequence, ID and floor is kept.

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
    'The server''s clock steps, reservation writes, worker ids in use and IDs issued';
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
COMMENT ON FUNCTION @extschema@.snowflake_raise_floor(pg_catalog.timestamptz) IS
    'No ID issued from now on is in a tick ending at or before this time: the cut-over step of a move from another cluster';
