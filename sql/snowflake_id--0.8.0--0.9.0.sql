-- snowflake_id 0.8.0 → 0.9.0: the floor relations can be read by every role, so that any role
-- that can dump the database (its owner, a member of pg_read_all_data) dumps their values too.
-- pg_dump reads every configuration sequence of an extension; without SELECT on them a
-- non-superuser's dump failed with "permission denied for sequence snowflake_floor". What they
-- hold is not secret: a time already shown by snowflake_stats() and a system identifier that
-- pg_control_system() shows everybody. Writing them stays the owner's (a superuser's).
-- In a fresh install this runs too (extension_sql_file! in src/lib.rs).

GRANT SELECT ON SEQUENCE snowflake_floor, snowflake_floor_writer TO PUBLIC;
