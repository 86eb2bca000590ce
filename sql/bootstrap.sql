-- Objects the Rust functions refer to; created before them.

-- The hot path, a bare C function (src/sql_api.rs explains why); the same declaration pgrx
-- generated for it up to 0.3.0, so an update changes nothing here.
CREATE FUNCTION "snowflake_nextval"(
	"seq" TEXT DEFAULT 'default'
) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_nextval_wrapper';

CREATE TYPE snowflake_parts AS (
    ts       timestamptz,  -- start of the ID's tick
    node     integer,
    worker   integer,
    sequence integer,
    gene     integer
);
COMMENT ON TYPE snowflake_parts IS 'The fields of a snowflake ID, as returned by snowflake_decode()';

-- One row per named sequence. A layout never changes once created (docs/design.md §2), so rows are
-- only ever inserted or deleted, never updated. No CHECK constraint and no column default: the
-- extension's functions validate a layout before they insert it, every read validates it again
-- (catalog::load_layout), and a table without them opens without reading pg_constraint and
-- pg_attrdef, which was a third of a new connection's first ID (docs/benchmarks.md).
CREATE TABLE snowflake_sequence_catalog (
    name          text PRIMARY KEY,
    preset        text,
    epoch         timestamptz NOT NULL,
    time_unit_us  bigint NOT NULL,
    time_bits     integer NOT NULL,
    node_bits     integer NOT NULL,
    worker_bits   integer NOT NULL,
    sequence_bits integer NOT NULL,
    gene_bits     integer NOT NULL,
    created_at    timestamptz NOT NULL
);
COMMENT ON TABLE snowflake_sequence_catalog IS 'Layouts of the snowflake sequences (do not edit by hand)';

-- The built-in sequence: the classic 41/10/12 layout at 1 ms from 2025-01-01 UTC.
INSERT INTO snowflake_sequence_catalog
    (name, preset, epoch, time_unit_us, time_bits, node_bits, worker_bits, sequence_bits, gene_bits,
     created_at)
VALUES ('default', 'classic', '2025-01-01 00:00:00+00', 1000, 41, 0, 10, 12, 0, pg_catalog.now());

-- User sequences are data: pg_dump keeps them; the built-in row comes with CREATE EXTENSION.
SELECT pg_catalog.pg_extension_config_dump('snowflake_sequence_catalog', 'WHERE name <> ''default''');

-- Editing a layout in place could make IDs collide: only the extension's functions write here.
REVOKE ALL ON snowflake_sequence_catalog FROM PUBLIC;
GRANT SELECT ON snowflake_sequence_catalog TO PUBLIC;
