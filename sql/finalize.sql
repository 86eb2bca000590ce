-- Views over the Rust functions; created after them.

CREATE VIEW snowflake_workers AS
SELECT w.slot, w.pid, d.datname AS database, w.claimed_at, w.ids_issued
FROM snowflake_worker_slots() AS w
LEFT JOIN pg_catalog.pg_database AS d ON d.oid = w.database_oid
ORDER BY w.slot;
COMMENT ON VIEW snowflake_workers IS 'Worker slots held by live backends';
GRANT SELECT ON snowflake_workers TO PUBLIC;
