#!/usr/bin/env bash
# PostgreSQL's own regression suites as the judge of "PostgreSQL behaves as without
# snowflake_id" (docs/contributing.md, "The regression gate"): each major's core suite (the
# parallel schedule) and the suites of pg_stat_statements and auto_explain (and pgaudit's on 15,
# where Debian has it), which put hooks of their own under the same statements, run on a
# temporary instance without the library and on one that preloads it (before and after the
# other extension in shared_preload_libraries);
# their results files must be equal. The suites come from Debian's source package of the major
# (for 15, bookworm's: its minor version may differ from the installed server's, which is why
# the run without the library is the reference, not the expected files). A reference run's
# results, once a gate found the runs with the library equal to them, are kept and reused while
# everything that run depends on is the same (reference_key); the runs with the library always
# run. Sourced by test.sh; needs common.sh and install-postgres.sh (private_apt, the source
# index, pg_config_of).

REGRESSION_SUITE_DIR=/var/lib/snowflake_id/regress
# What a complete suite directory holds, in its file "complete": raised when that changes (2:
# pgaudit's suite on 15), so that a directory laid out before is laid out again.
REGRESSION_SUITE_LAYOUT=2
# pgaudit, a third extension with hooks under every statement, where Debian has it (bookworm's
# postgresql-15-pgaudit): its source's upstream tarball (the pool serves it, not always the
# Debian part) and that tarball's SHA-256, as the package's .dsc records it.
PGAUDIT_15_SOURCE="pgaudit-1.7/pgaudit-1.7_1.7.0.orig.tar.gz 8f4a73e451c88c567e516e6cba7dc1e23bc91686bb6f1f77f8f3126d428a8bd8"

# install_regression_suite MAJOR: the regression suites of MAJOR's source package, and the
# libraries they load (regress.so, built against the installed server's headers; refint.so
# and autoinc.so, the server's own), in $REGRESSION_SUITE_DIR/MAJOR; kept for later runs.
install_regression_suite() {
    local major=$1 dir="$REGRESSION_SUITE_DIR/$1" pg_config work
    pg_config=$(pg_config_of "$major")
    [ "$(cat "$dir/complete" 2>/dev/null)" = "$REGRESSION_SUITE_LAYOUT" ] && return 0
    step "PostgreSQL $major's regression suites from Debian's source package -> $dir"
    apt_install_missing dpkg-dev gcc curl
    ensure_source_index
    rm -rf "$dir"
    work=$(mktemp -d)
    (
        cd "$work"
        # apt verifies the download against the suite's signed Release file; dpkg-source
        # checks the .dsc's checksums when it unpacks.
        if [ "$major" = 15 ]; then
            private_apt source --download-only -qq postgresql-15/bookworm
        else
            private_apt source --download-only -qq "postgresql-$major/$(debian_suite_of "$major")" \
                || fetch_known_source_package "$major"
        fi
        dpkg-source --skip-patches -x postgresql-"$major"_*.dsc source >/dev/null
    )
    mkdir -p "$dir/lib"
    cp -a "$work/source/src/test/regress" "$dir/regress"
    cp -a "$work/source/contrib/pg_stat_statements" "$work/source/contrib/auto_explain" "$dir/"
    gcc -O2 -fPIC -shared -I"$("$pg_config" --includedir-server)" \
        "$dir/regress/regress.c" -o "$dir/lib/regress.so"
    cp "$("$pg_config" --pkglibdir)/refint.so" "$("$pg_config" --pkglibdir)/autoinc.so" \
        "$dir/lib/"
    basename "$(ls "$work"/postgresql-"$major"_*.dsc)" > "$dir/source-package"
    if [ "$major" = 15 ]; then
        local tarball sha256
        apt_install_missing postgresql-15-pgaudit
        read -r tarball sha256 <<<"$PGAUDIT_15_SOURCE"
        curl --fail --silent --show-error --output "$work/pgaudit.tar.gz" \
            "$(debian_mirror)/pool/main/p/$tarball"
        echo "$sha256  $work/pgaudit.tar.gz" | sha256sum --check --quiet
        mkdir -p "$dir/pgaudit"
        tar xzf "$work/pgaudit.tar.gz" -C "$dir/pgaudit" --strip-components=1
    fi
    rm -rf "$work"
    echo "$REGRESSION_SUITE_LAYOUT" > "$dir/complete"
}

# regress_tests_of MAKEFILE: the REGRESS list of a contrib Makefile (continued lines joined).
regress_tests_of() {
    sed -e ':join' -e '/\\$/{N;s/\\\n//;b join}' "$1" | sed -n 's/^REGRESS *= *//p'
}

# run_suite OUT NAME PORT PRELOAD CONF INPUTDIR ARGS…: one pg_regress run on a temporary
# instance of its own (a Unix socket in a directory of its own; PORT names it), as the server
# user, with CONF's lines and shared_preload_libraries = PRELOAD (none when empty) added to
# its configuration; its results in OUT/NAME, its output in OUT/NAME.log.
run_suite() {
    local out=$1 name=$2 port=$3 preload=$4 conf=$5 input=$6
    shift 6
    mkdir -p "$out/$name"
    {
        [ -n "$conf" ] && cat "$conf"
        [ -n "$preload" ] && echo "shared_preload_libraries = '$preload'"
        true
    } > "$out/$name.conf"
    chown -R postgres "$out/$name" "$out/$name.conf"
    # A suite's own failures against its expected files are not the gate's business (the
    # source's minor version may not be the server's): only the two runs' results are.
    runuser -u postgres -- "$REGRESS_PG_REGRESS" --bindir="$REGRESS_BINDIR" \
        --dlpath="$REGRESS_LIBDIR" --inputdir="$input" --outputdir="$out/$name" \
        --temp-instance="$out/$name/instance" --temp-config="$out/$name.conf" \
        --port="$port" "$@" > "$out/$name.log" 2>&1 || true
    rm -rf "$out/$name/instance"
}

# reference_key MAJOR: the SHA-256 of everything a run without the library depends on: the
# server's programs and the shared libraries they and the suites load (PostgreSQL's own, those
# of $REGRESSION_SUITE_DIR/MAJOR/lib, and the system's that ldd finds for the server), the time
# zone and locale data (their Debian packages' versions) and the locale initdb takes from the
# environment, every file of the suites, and this file (how a suite is run). Prints nothing and
# fails when any of them cannot be read.
reference_key() {
    local dir="$REGRESSION_SUITE_DIR/$1" pkglibdir files key
    pkglibdir=$("$(pg_config_of "$1")" --pkglibdir) || return 1
    # The suites' directory (found below) holds their libraries too.
    files=("$REGRESS_BINDIR"/{postgres,initdb,pg_ctl,psql} "$REGRESS_PG_REGRESS"
           "$pkglibdir"/{pg_stat_statements,auto_explain}.so "${BASH_SOURCE[0]}")
    [ ! -d "$dir/pgaudit" ] || files+=("$pkglibdir/pgaudit.so")
    mapfile -t -O "${#files[@]}" files < <(ldd "$REGRESS_BINDIR/postgres" | awk '$3 ~ /^\// {print $3}')
    mapfile -t -O "${#files[@]}" files < <(find "$dir" -path "$dir/reference" -prune -o -type f -print | sort)
    key=$(
        set -o pipefail
        {
            sha256sum "${files[@]}" | cut -d' ' -f1
            dpkg-query -W -f '${Package} ${Version}\n' tzdata locales
            locale
        } | sha256sum | cut -d' ' -f1
    ) || return 1
    echo "$key"
}

# reference_suite OUT NAME PORT PRELOAD CONF INPUTDIR ARGS…: run_suite for a run without the
# library, or, where REFERENCE_CACHE holds that run's kept results, those.
reference_suite() {
    local out=$1 name=$2
    if [ -n "$REFERENCE_CACHE" ] && [ -d "$REFERENCE_CACHE/$name/results" ]; then
        mkdir -p "$out/$name"
        cp -a "$REFERENCE_CACHE/$name/results" "$out/$name/"
        echo "$name: the results kept in $REFERENCE_CACHE" > "$out/$name.log"
        return 0
    fi
    run_suite "$@"
}

# keep_references OUT NAME…: the results of the runs NAME… in REFERENCE_CACHE, the one reference
# kept for the major (an older key's go).
keep_references() {
    local out=$1 name kept
    shift
    kept=$(mktemp -d "$(dirname "$REFERENCE_CACHE")/.new.XXXXXX")
    for name in "$@"; do
        mkdir -p "$kept/$name"
        cp -a "$out/$name/results" "$kept/$name/"
    done
    find "$(dirname "$REFERENCE_CACHE")" -mindepth 1 -maxdepth 1 ! -path "$kept" -exec rm -rf {} +
    mv "$kept" "$REFERENCE_CACHE"
}

# same_results OUT REFERENCE OTHER: whether OTHER's results files are REFERENCE's; prints the
# count and the difference otherwise.
same_results() {
    local out=$1 reference=$2 other=$3 count
    if [ ! -d "$out/$reference/results" ] || [ ! -d "$out/$other/results" ]; then
        echo "$reference or $other left no results (see $out/$reference.log, $out/$other.log)"
        return 1
    fi
    if diff -r "$out/$reference/results" "$out/$other/results" > "$out/$other.diff"; then
        echo "$other: $(find "$out/$other/results" -name '*.out' | wc -l) results files, as $reference's"
        return 0
    fi
    count=$(diff -rq "$out/$reference/results" "$out/$other/results" | wc -l)
    echo "$other: $count results files differ from $reference's:"
    head -n 200 "$out/$other.diff"
    return 1
}

# contrib_gate OUT EXTENSION PORT CONF INPUTDIR TESTS…: EXTENSION's suite with EXTENSION alone,
# before snowflake_id and after it in shared_preload_libraries (ports PORT to PORT + 2), side by
# side; whether the other two's results are the first's.
contrib_gate() {
    local out=$1 extension=$2 port=$3 conf=$4 input=$5 order=0 preload run failed=0
    shift 5
    for preload in "$extension" "$extension,snowflake_id" "snowflake_id,$extension"; do
        if [ "$order" = 0 ]; then run=reference_suite; else run=run_suite; fi
        "$run" "$out" "$extension-$order" "$((port + order))" "$preload" "$conf" "$input" \
            --dbname=contrib_regression "$@" &
        order=$((order + 1))
    done
    wait
    same_results "$out" "$extension-0" "$extension-1" || failed=1
    same_results "$out" "$extension-0" "$extension-2" || failed=1
    return "$failed"
}

# gate_runs MAJOR OUT: every suite of MAJOR, without the library (or REFERENCE_CACHE's kept
# results) and with it, side by side; fails on any difference, printing it.
gate_runs() {
    local major=$1 out=$2 dir="$REGRESSION_SUITE_DIR/$1" base=$((56000 + $1 * 20)) failed=0
    rm -rf "$out"
    mkdir -p "$out"
    chown postgres "$out"
    reference_suite "$out" core-without "$base" "" "" "$dir/regress" \
        --schedule="$dir/regress/parallel_schedule" --max-connections=4 &
    run_suite "$out" core-with "$((base + 1))" snowflake_id "" "$dir/regress" \
        --schedule="$dir/regress/parallel_schedule" --max-connections=4 &
    wait
    same_results "$out" core-without core-with || failed=1
    # shellcheck disable=SC2046 # the test names are words
    contrib_gate "$out" pg_stat_statements "$((base + 2))" \
        "$dir/pg_stat_statements/pg_stat_statements.conf" "$dir/pg_stat_statements" \
        $(regress_tests_of "$dir/pg_stat_statements/Makefile") || failed=1
    # shellcheck disable=SC2046
    contrib_gate "$out" auto_explain "$((base + 5))" "" "$dir/auto_explain" \
        $(regress_tests_of "$dir/auto_explain/Makefile") || failed=1
    if [ -d "$dir/pgaudit" ]; then
        # shellcheck disable=SC2046
        contrib_gate "$out" pgaudit "$((base + 8))" "$dir/pgaudit/pgaudit.conf" "$dir/pgaudit" \
            $(regress_tests_of "$dir/pgaudit/Makefile") || failed=1
    fi
    return "$failed"
}

# regression_gate MAJOR OUT: the gate for MAJOR's installed server and library (see the top).
# Against kept references first, where there are; a difference from them is checked again with
# the references run anew (they go), so that only a difference from a run of this very machine
# fails the gate. A gate that passed keeps its references for the next.
regression_gate() {
    local major=$1 out=$2 dir="$REGRESSION_SUITE_DIR/$1" pg_config key
    pg_config=$(pg_config_of "$major")
    REGRESS_BINDIR=$("$pg_config" --bindir)
    REGRESS_LIBDIR="$dir/lib"
    REGRESS_PG_REGRESS="$("$pg_config" --pkglibdir)/pgxs/src/test/regress/pg_regress"
    echo "PostgreSQL $major, $("$REGRESS_BINDIR/postgres" --version), suites of $(cat "$dir/source-package")"
    REFERENCE_CACHE=
    if key=$(reference_key "$major") && [ -n "$key" ]; then
        REFERENCE_CACHE="$dir/reference/$key"
    fi
    if [ -n "$REFERENCE_CACHE" ] && [ -d "$REFERENCE_CACHE" ]; then
        echo "the runs without the library: their results kept in $REFERENCE_CACHE"
        if gate_runs "$major" "$out"; then
            return 0
        fi
        echo "differences from the kept results: the runs without the library again, anew"
        rm -rf "$REFERENCE_CACHE"
    fi
    gate_runs "$major" "$out" || return 1
    if [ -n "$REFERENCE_CACHE" ]; then
        mkdir -p "$dir/reference"
        keep_references "$out" core-without pg_stat_statements-0 auto_explain-0 \
            $([ -d "$dir/pgaudit" ] && echo pgaudit-0)
    fi
}
