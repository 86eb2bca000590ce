-- snowflake_id 0.7.0 → 0.8.0: time partitions keyed by the ID itself (docs/partitioning.md).
-- The functions are declared in src/sql_api.rs; a fresh install gets them from there, with
-- these same signatures.

CREATE FUNCTION "snowflake_partition_width"(
	"span" interval, /* Interval */
	"seq" TEXT DEFAULT 'default' /* & str */
) RETURNS bigint /* i64 */
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_partition_width_wrapper';

CREATE FUNCTION "snowflake_partition_bounds"(
	"ts" timestamp with time zone, /* TimestampWithTimeZone */
	"span" interval, /* Interval */
	"seq" TEXT DEFAULT 'default' /* & str */
) RETURNS TABLE (
	"lower" bigint,  /* i64 */
	"upper" bigint  /* Option < i64 > */
)
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_partition_bounds_at_wrapper';

CREATE FUNCTION "snowflake_partition_bounds"(
	"id" bigint, /* i64 */
	"span" interval, /* Interval */
	"seq" TEXT DEFAULT 'default' /* & str */
) RETURNS TABLE (
	"lower" bigint,  /* i64 */
	"upper" bigint  /* Option < i64 > */
)
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_partition_bounds_of_wrapper';
