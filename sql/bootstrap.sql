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
-- only ever inserted or deleted, never updated.
CREATE TABLE snowflake_sequence_catalog (
    name          text PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 63),
    preset        text,
    epoch         timestamptz NOT NULL,
    time_unit_us  bigint NOT NULL CHECK (time_unit_us IN (1000, 10000, 100000, 1000000)),
    time_bits     integer NOT NULL CHECK (time_bits BETWEEN 1 AND 63),
    node_bits     integer NOT NULL CHECK (node_bits BETWEEN 0 AND 31),
    worker_bits   integer NOT NULL CHECK (worker_bits BETWEEN 0 AND 31),
    sequence_bits integer NOT NULL CHECK (sequence_bits BETWEEN 1 AND 31),
    gene_bits     integer NOT NULL CHECK (gene_bits BETWEEN 0 AND 31),
    created_at    timestamptz NOT NULL DEFAULT now(),
    CHECK (time_bits + node_bits + worker_bits + sequence_bits + gene_bits <= 63)
);
COMMENT ON TABLE snowflake_sequence_catalog IS 'Layouts of the snowflake sequences (do not edit by hand)';

-- The built-in sequence: the classic 41/10/12 layout at 1 ms from 2025-01-01 UTC.
INSERT INTO snowflake_sequence_catalog
    (name, preset, epoch, time_unit_us, time_bits, node_bits, worker_bits, sequence_bits, gene_bits)
VALUES ('default', 'classic', '2025-01-01 00:00:00+00', 1000, 41, 0, 10, 12, 0);

-- User sequences are data: pg_dump keeps them; the built-in row comes with CREATE EXTENSION.
SELECT pg_catalog.pg_extension_config_dump('snowflake_sequence_catalog', 'WHERE name <> ''default''');

-- Editing a layout in place could make IDs collide: only the extension's functions write here.
REVOKE ALL ON snowflake_sequence_catalog FROM PUBLIC;
GRANT SELECT ON snowflake_sequence_catalog TO PUBLIC;
