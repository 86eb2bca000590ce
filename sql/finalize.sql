-- Views over the Rust functions; created after them.

-- snowflake_workers: created by the 0.5.0 → 0.6.0 script, which runs in a fresh install too.

CREATE VIEW snowflake_sequences AS
SELECT name,
       preset,
       time_bits, node_bits, worker_bits, sequence_bits, gene_bits,
       make_interval(secs => time_unit_us / 1e6) AS time_unit,
       epoch,
       CASE WHEN 2 ^ time_bits * time_unit_us / 1e6 > 2.5e11 THEN 'infinity'::timestamptz
            ELSE epoch + make_interval(secs => 2 ^ time_bits * time_unit_us / 1e6)
       END AS runs_out_at,
       (2 ^ sequence_bits)::bigint AS ids_per_tick,
       (2 ^ sequence_bits * 1e6 / time_unit_us)::bigint AS ids_per_second_per_session,
       (2 ^ worker_bits)::bigint AS sessions_per_node,
       (2 ^ node_bits)::bigint AS nodes,
       -- Equal on two nodes exactly when their layouts are equal (sharding guide).
       md5(concat_ws('/', time_bits, node_bits, worker_bits, sequence_bits, gene_bits,
                     time_unit_us, (extract(epoch FROM epoch) * 1000000)::bigint)) AS fingerprint
FROM snowflake_id_internal.snowflake_sequence_catalog
ORDER BY name;
COMMENT ON VIEW snowflake_sequences IS 'Snowflake sequences with their layouts and capacities';
GRANT SELECT ON snowflake_sequences TO PUBLIC;

-- Creating and dropping sequences changes shared ID spaces: only superusers by default.
-- GRANT EXECUTE on these to the roles that manage schemas (README, "Privileges").
REVOKE EXECUTE ON FUNCTION
    snowflake_create_sequence(text, text, timestamptz, interval, integer, integer, integer, integer, integer),
    snowflake_drop_sequence(text)
FROM PUBLIC;
