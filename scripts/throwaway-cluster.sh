#!/usr/bin/env bash
# Throwaway PostgreSQL clusters for the scripts (demo.sh, bench/compare_builds.sh): a fresh data
# directory under DIR, owned by the postgres OS user, on a Unix socket in DIR only, with
# snowflake_id preloaded. Sourced after install-deps.sh (which sets PG_CONFIG).

as_postgres() { runuser -u postgres -- "$@"; }

# stop_throwaway_cluster DIR [MODE]: stops the cluster in DIR if it runs (MODE: fast).
stop_throwaway_cluster() {
    local bin
    bin=$("$PG_CONFIG" --bindir)
    if [ -f "$1/data/postmaster.pid" ]; then
        as_postgres "$bin/pg_ctl" --pgdata "$1/data" --mode "${2:-fast}" --wait stop >/dev/null 2>&1 || true
    fi
}

# start_throwaway_cluster DIR PORT [SETTING…]: replaces any cluster in DIR with a new one and
# starts it; each SETTING is a postgresql.conf line.
start_throwaway_cluster() {
    local dir=$1 port=$2 bin
    shift 2
    bin=$("$PG_CONFIG" --bindir)
    stop_throwaway_cluster "$dir"
    rm -rf "$dir"
    install -d -o postgres -g postgres "$dir"
    as_postgres "$bin/initdb" --pgdata "$dir/data" --auth=trust --username=postgres >/dev/null
    {
        echo "listen_addresses = ''"
        echo "port = $port"
        echo "unix_socket_directories = '$dir'"
        echo "shared_preload_libraries = 'snowflake_id'"
        printf '%s\n' "$@"
    } >> "$dir/data/postgresql.conf"
    as_postgres "$bin/pg_ctl" --pgdata "$dir/data" --log "$dir/server.log" --wait start >/dev/null
}
