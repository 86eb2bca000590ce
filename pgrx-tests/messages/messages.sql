-- The messages the extension raises, as a client sees them (SQLSTATE, message, DETAIL, HINT),
-- one statement per case of the reference's error table that a session can reach; the test
-- messages_match_their_golden_file.rs runs it with psql and compares the output with
-- messages.out beside it, so a change of any message shows in review as a diff of that file.
CREATE EXTENSION snowflake_id;
CREATE ROLE plain_role;
GRANT USAGE ON SCHEMA public TO plain_role;
SELECT snowflake_create_sequence('sales', node_bits => 0, worker_bits => 10);
SELECT snowflake_create_sequence('ends_soon', epoch => '1970-01-01', time_unit => '1 s',
                                 time_bits => 20, node_bits => 0, worker_bits => 10,
                                 sequence_bits => 12);
SELECT snowflake_create_sequence('secs', time_unit => '1 s', time_bits => 33);
SELECT snowflake_create_sequence('js', preset => 'js53');
CREATE TABLE plain_ints (id int PRIMARY KEY);
CREATE TABLE text_keys (id text PRIMARY KEY);
CREATE TABLE unkeyed (id int);
CREATE VIEW a_view AS SELECT id FROM plain_ints;

-- 22023: the arguments of snowflake_create_sequence
SELECT snowflake_create_sequence('bad', preset => 'no_such_preset');
SELECT snowflake_create_sequence('bad', preset => NULL);
SELECT snowflake_create_sequence('bad', time_bits => 60, sequence_bits => 12);
SELECT snowflake_create_sequence('bad', worker_bits => 64);
SELECT snowflake_create_sequence('bad', time_unit => '2 ms');
SELECT snowflake_create_sequence('bad', epoch => now() + interval '1 day');
SELECT snowflake_create_sequence(repeat('n', 64));
SELECT snowflake_create_sequence('');
-- 22004
SELECT snowflake_create_sequence(NULL);
-- 22023: a gene, a floor, a partition span
SELECT snowflake_nextval('sales', 1);
SELECT snowflake_raise_floor('infinity');
SELECT snowflake_raise_floor(clock_timestamp() + interval '1 day');
SELECT snowflake_partition_width('1 month');
SELECT snowflake_partition_width('-1 day');
SELECT snowflake_partition_width('1500 ms', 'secs');
-- 42704
SELECT snowflake_nextval('no_such_sequence');
SELECT snowflake_nextval('Sales');
SELECT snowflake_drop_sequence('no_such_sequence');
-- 42710
SELECT snowflake_create_sequence('sales');
-- 2BP01
SELECT snowflake_drop_sequence('default');
-- 2200H
SELECT snowflake_nextval('ends_soon');
-- 22003
SELECT snowflake_to_base32(-1);
SELECT snowflake_from_base32('zzzzzzzzzzzzz');
SELECT snowflake_decode(-1);
SELECT snowflake_decode(9223372036854775807, 'js');
-- 22P02
SELECT snowflake_from_base32('short');
SELECT snowflake_from_base32('000000000000u');
-- 22008
SELECT * FROM snowflake_partition_bounds(timestamptz '1999-01-01', '1 day');
-- 01000: a WARNING, the call goes on
SELECT snowflake_timestamp(snowflake_min_id(now() + interval '30 days')) > now();
-- 55000
SELECT snowflake_currval('sales');
SELECT snowflake_lastval();
UPDATE snowflake_id_internal.snowflake_sequence_catalog SET name = 'renamed' WHERE name = 'sales';
SELECT snowflake_create_sequence('with_nodes', preset => 'sharded');
SELECT snowflake_nextval('with_nodes');
SELECT snowflake_convert_column('unkeyed', 'id');
SELECT * FROM snowflake_citus_node_ids();
-- 23514: a row inserted into the catalog table by hand with a layout that is not valid
INSERT INTO snowflake_id_internal.snowflake_sequence_catalog
    (name, preset, epoch, time_unit_us, time_bits, node_bits, worker_bits, sequence_bits,
     gene_bits, created_at)
VALUES ('by_hand', NULL, '2025-01-01', 1000, 60, 10, 10, 12, 0, now());
-- XX001: a row edited in place behind the catalog's guard
ALTER TABLE snowflake_id_internal.snowflake_sequence_catalog DISABLE TRIGGER USER;
UPDATE snowflake_id_internal.snowflake_sequence_catalog SET time_bits = 60 WHERE name = 'secs';
ALTER TABLE snowflake_id_internal.snowflake_sequence_catalog ENABLE TRIGGER USER;
SELECT snowflake_nextval('secs');
-- 25006
BEGIN READ ONLY;
SELECT snowflake_create_sequence('in_read_only');
ROLLBACK;
BEGIN READ ONLY;
SELECT snowflake_drop_sequence('sales');
ROLLBACK;
-- 0A000
SELECT snowflake_id_internal.stored_ids_ahead_of_new_indexes();
SET client_min_messages = error;  -- PostgreSQL's own wal_level WARNING differs by major
CREATE PUBLICATION everything FOR ALL TABLES;
RESET client_min_messages;
-- 42804, 42809, 42703: snowflake_convert_column
SELECT snowflake_convert_column('text_keys', 'id');
SELECT snowflake_convert_column('a_view', 'id');
SELECT snowflake_convert_column('plain_ints', 'no_such_column');
-- 42501: a role without the rights
SET ROLE plain_role;
SELECT snowflake_create_sequence('not_mine');
SELECT snowflake_drop_sequence('sales');
SELECT snowflake_raise_floor(clock_timestamp());
SELECT snowflake_accept_floor();
SELECT snowflake_convert_column('plain_ints', 'id');
BEGIN;
LOCK TABLE snowflake_sequences IN ACCESS EXCLUSIVE MODE;
ROLLBACK;
RESET ROLE;
-- 42P06: CREATE EXTENSION where its state's schema exists (in a database of its own)
CREATE DATABASE schema_taken;
\connect schema_taken
CREATE SCHEMA snowflake_id_internal;
CREATE EXTENSION snowflake_id;
