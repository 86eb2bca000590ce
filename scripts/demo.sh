#!/usr/bin/env bash
# Command 1 of the README: install everything, build and install snowflake_id, start a
# throwaway cluster that preloads it, run a short demo, and leave the cluster running. The demo
# runs on PostgreSQL 15 (Debian's); SNOWFLAKE_PG_MAJOR=17 or 18 runs it on a source-built major.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install-deps.sh

source scripts/throwaway-cluster.sh

DEMO_DIR=/var/tmp/snowflake-demo
PORT=54329
BIN=$("$PG_CONFIG" --bindir)

# (cargo pgrx install replaces the library by unlinking it first: running servers keep theirs.)
step "cargo pgrx install --release (PostgreSQL $PG_MAJOR)"
cargo pgrx install --release --pg-config "$PG_CONFIG" --no-default-features --features "pg$PG_MAJOR" \
    >/dev/null

step "throwaway cluster in $DEMO_DIR"
start_throwaway_cluster "$DEMO_DIR" "$PORT"

PSQL=("$BIN/psql" --no-psqlrc --host "$DEMO_DIR" --port "$PORT" --username postgres --dbname postgres)
step "demo"
"${PSQL[@]}" --echo-queries <<'SQL'
CREATE EXTENSION snowflake_id;
CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);
INSERT INTO orders(item) VALUES ('book'), ('pen'), ('lamp') RETURNING id, (snowflake_decode(id)).*;
SELECT id, id >> 22 AS ms_since_epoch, snowflake_decode(id) FROM orders ORDER BY id;
SELECT * FROM snowflake_workers;
SQL

cat <<MSG

The demo cluster is running (PostgreSQL $("$PG_CONFIG" --version | awk '{print $2}'), snowflake_id preloaded).
  connect: $BIN/psql --host $DEMO_DIR --port $PORT --username postgres postgres
  stop:    runuser -u postgres -- $BIN/pg_ctl --pgdata $DEMO_DIR/data stop
  log:     $DEMO_DIR/server.log
Running this command again replaces the cluster with a fresh one.
MSG
