#!/usr/bin/env bash
# Before/after figures for a change, in one run: cost per ID and single-row INSERT latency of two
# builds of snowflake_id, measured alternately (A B A B …) on the same machine. As root:
#
#     bash bench/compare_builds.sh OLD_REV [NEW_REV]      # NEW_REV defaults to the work tree
#
# Builds each revision in release mode (`cargo pgrx package`; OLD_REV in a git worktree under
# target/compare/), then for each round installs one build's files into the system PostgreSQL 15
# (each file replaced by rename, so running servers keep theirs), starts a fresh throwaway cluster
# in /var/tmp/snowflake-compare (Unix socket only), and measures with pgbench:
#   - cost per ID: `SELECT count(snowflake_nextval('wide')) FROM generate_series(1, 100000)`
#     (16 sequence bits, so the classic layout's per-tick cap does not hide the code's cost),
#     minus the same loop over `count(*)`;
#   - single-row INSERT latency: `INSERT INTO t DEFAULT VALUES` into `id bigint PRIMARY KEY
#     DEFAULT snowflake_nextval()`, one client.
# Prints medians per build and the ratio new/old. Leaves NEW_REV's build installed; the README's
# test command reinstalls the Debian package anyway. Knobs: COMPARE_ROUNDS (3),
# COMPARE_SECONDS (5 per pgbench run).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install-deps.sh
source scripts/throwaway-cluster.sh
source scripts/safe-install.sh
require_root
install_base_packages
install_postgres_major "$PG_MAJOR"
install_cargo_pgrx

OLD_REV=${1:?usage: bash bench/compare_builds.sh OLD_REV [NEW_REV]}
NEW_REV=${2:-}
ROUNDS=${COMPARE_ROUNDS:-3}
SECONDS_PER_RUN=${COMPARE_SECONDS:-5}
WORK=target/compare
DIR=/var/tmp/snowflake-compare
PORT=54349
BIN=$("$PG_CONFIG" --bindir)
stop_cluster() { stop_throwaway_cluster "$DIR" immediate; }
trap stop_cluster EXIT

# build NAME REV: the release package of REV (empty: the work tree) in $WORK/NAME.
build() {
    local name=$1 rev=$2 source=. target=$PWD/target
    if [ -n "$rev" ]; then
        # A worktree of the revision, with a target directory of its own that outlives it.
        source=$WORK/src-$name
        target=$PWD/$WORK/target-$name
        rm -rf "$source"
        git worktree prune
        git worktree add --force --detach "$source" "$rev" >/dev/null
    fi
    step "cargo pgrx package ($name: ${rev:-work tree})"
    rm -rf "$WORK/$name"
    (cd "$source" && CARGO_TARGET_DIR="$target" cargo pgrx package --pg-config "$PG_CONFIG" \
        --no-default-features --features "pg$PG_MAJOR" \
        --out-dir "$OLDPWD/$WORK/$name") >/dev/null
}

# install NAME: put the build's files in place, each by rename.
install_build() { install_tree_by_rename "$WORK/$1"; }

# measure NAME: prints "ns_per_id insert_latency_ms" for a fresh cluster running build NAME.
measure() {
    install_build "$1"
    start_throwaway_cluster "$DIR" "$PORT" "autovacuum = off" "jit = off"
    local psql=("$BIN/psql" --no-psqlrc --quiet --host "$DIR" --port "$PORT" --username postgres postgres)
    "${psql[@]}" -c "CREATE EXTENSION snowflake_id" \
        -c "SELECT snowflake_create_sequence('wide', preset => 'classic', worker_bits => 6, sequence_bits => 16)" \
        -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval())" >/dev/null
    echo "SELECT count(snowflake_nextval('wide')) FROM generate_series(1, 100000);" > "$DIR/ids.sql"
    echo "SELECT count(*) FROM generate_series(1, 100000);" > "$DIR/loop.sql"
    echo "INSERT INTO t DEFAULT VALUES;" > "$DIR/insert.sql"
    local pgbench=("$BIN/pgbench" --no-vacuum --host "$DIR" --port "$PORT" --username postgres
                   --client 1 --time "$SECONDS_PER_RUN")
    tps() { "${pgbench[@]}" --file "$DIR/$1" postgres 2>/dev/null | awk '/^tps = / {print $3}'; }
    latency() { "${pgbench[@]}" --file "$DIR/$1" postgres 2>/dev/null | awk '/^latency average/ {print $4}'; }
    local ids loop insert
    ids=$(tps ids.sql)
    loop=$(tps loop.sql)
    insert=$(latency insert.sql)
    stop_cluster
    awk -v ids="$ids" -v loop="$loop" -v insert="$insert" \
        'BEGIN { printf "%.1f %.4f\n", 1e9 / (ids * 100000) - 1e9 / (loop * 100000), insert }'
}

mkdir -p "$WORK"
build old "$OLD_REV"
build new "$NEW_REV"
step "measuring: $ROUNDS rounds, old and new alternating"
results=$WORK/results.txt
: > "$results"
for round in $(seq 1 "$ROUNDS"); do
    # Alternate which build goes first, so drift of the machine hits both alike.
    order="old new"
    [ $((round % 2)) -eq 0 ] && order="new old"
    for name in $order; do
        read -r ns latency < <(measure "$name")
        echo "$name $ns $latency" | tee -a "$results"
    done
done
install_build new

step "summary (medians; old = ${OLD_REV}, new = ${NEW_REV:-work tree})"
python3 - "$results" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
def median(name, column):
    return statistics.median(float(r[column]) for r in rows if r[0] == name)
for column, label, unit in [(1, "cost per ID above the loop", "ns"), (2, "single-row INSERT latency", "ms")]:
    old, new = median("old", column), median("new", column)
    print(f"{label}: old {old:.3f} {unit}, new {new:.3f} {unit}, new/old {new / old:.2f}")
PY
