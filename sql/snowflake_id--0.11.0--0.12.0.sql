-- snowflake_id 0.11.0 → 0.12.0: DDL at PostgreSQL's own cost.
--
-- The stored-IDs check of the event trigger snowflake_id_warn_of_stored_ids_ahead becomes one C
-- function (src/stored_ids.rs). Its PL/pgSQL function ran a catalog query at the end of every
-- CREATE INDEX and ALTER TABLE; now a command that can neither build an index nor set a column's
-- default (ADD COLUMN without constraints, DROP COLUMN, …) is told apart by its parse tree and
-- costs one call that returns, and the others read the objects they touched with one query
-- planned once per backend. What it warns of, and for which indexes, is unchanged. The event
-- trigger itself and the function's privileges stay as they are.

CREATE OR REPLACE FUNCTION snowflake_id_internal.stored_ids_ahead_of_new_indexes()
RETURNS event_trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_stored_ids_ahead_of_new_indexes';

-- Called only by the PL/pgSQL function replaced above.
DROP FUNCTION snowflake_id_internal.warn_of_stored_ids_ahead(oid, text);
