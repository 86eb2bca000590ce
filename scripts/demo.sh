#!/usr/bin/env bash
# Command 1 of the README: install what the demo needs, build and install snowflake_id, start a
# throwaway cluster that preloads it, run a short demo, and leave the cluster running. The demo
# runs on PostgreSQL 15 (Debian's); SNOWFLAKE_PG_MAJOR=17 or 18 runs it on a source-built major
# (built first if it is not there yet). It installs only that major, and no cargo-pgrx: a plain
# release build of the library, and the committed install script sql/snowflake_id--<version>.sql
# (test.sh checks that it is what `cargo pgrx package` generates).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install-deps.sh
source scripts/safe-install.sh
source scripts/throwaway-cluster.sh
require_root
require_cargo
install_base_packages
install_postgres_major "$PG_MAJOR"

DEMO_DIR=/var/tmp/snowflake-demo
PORT=54329
BIN=$("$PG_CONFIG" --bindir)

# PGRX_PG_CONFIG_PATH: pgrx's way to name the PostgreSQL to build against without cargo-pgrx.
step "cargo build --release --lib (PostgreSQL $PG_MAJOR)"
PGRX_PG_CONFIG_PATH=$PG_CONFIG cargo build --release --lib --quiet \
    --no-default-features --features "pg$PG_MAJOR"
step "install into $("$PG_CONFIG" --pkglibdir) and $("$PG_CONFIG" --sharedir)/extension"
install_extension_files "$PG_CONFIG" "${CARGO_TARGET_DIR:-target}/release/libsnowflake_id.so"

step "throwaway cluster in $DEMO_DIR"
start_throwaway_cluster "$DEMO_DIR" "$PORT"

PSQL=("$BIN/psql" --no-psqlrc --host "$DEMO_DIR" --port "$PORT" --username postgres --dbname postgres)
step "demo"
# In a database of its own: the database postgres stays empty for the README's examples.
"${PSQL[@]}" --echo-queries <<'SQL'
CREATE DATABASE demo;
\connect demo
CREATE EXTENSION snowflake_id;
CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);
INSERT INTO orders(item) VALUES ('book'), ('pen'), ('lamp') RETURNING id, (snowflake_decode(id)).*;
SELECT id, id >> 22 AS ms_since_epoch, snowflake_decode(id) FROM orders ORDER BY id;
SELECT * FROM snowflake_workers;
SQL

cat <<MSG

The demo cluster is running (PostgreSQL $("$PG_CONFIG" --version | awk '{print $2}'), snowflake_id preloaded).
  connect: $BIN/psql --host $DEMO_DIR --port $PORT --username postgres postgres
           (an empty database for the README's examples; the demo's table is in the database demo)
  restart: runuser -u postgres -- $BIN/pg_ctl restart --pgdata $DEMO_DIR/data --log $DEMO_DIR/server.log
  stop:    runuser -u postgres -- $BIN/pg_ctl --pgdata $DEMO_DIR/data stop
  log:     $DEMO_DIR/server.log
Running this command again replaces the cluster with a fresh one.
MSG
