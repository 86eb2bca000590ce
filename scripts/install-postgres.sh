#!/usr/bin/env bash
# The PostgreSQL majors this project builds and tests for, and where each comes from:
#   15  Debian 12's own binary packages (postgresql-15, postgresql-server-dev-15);
#   16  PyPI's pgserver wheel, which ships a relocatable PostgreSQL 16 (no Debian suite reachable
#       here holds postgresql-16: Debian 12 has 15, trixie 17, sid 18); see install_postgres_from_wheel;
#   17  built here from Debian's source package postgresql-17 (suite trixie);
#   18  built here from Debian's source package postgresql-18 (suite sid).
# Sourced by common.sh: it only defines (install-deps.sh's steps call the installing functions,
# which use common.sh's step and apt_install_missing). The source packages are fetched through a private apt
# configuration (its own sources file, lists and cache under $SOURCE_APT_DIR), so the machine's
# own apt sources stay as they are. Every major lives in Debian's (and PGDG's) layout:
# /usr/lib/postgresql/<major>/{bin,lib}, /usr/share/postgresql/<major>,
# /usr/include/postgresql/<major>/server. A source-built major is installed as a local Debian
# package named as Debian's (postgresql-<major>, version <Debian's>+snowflake2), so the
# extension's package, which depends on postgresql-<major>, installs on it as it would on
# PGDG's; it is skipped when that package is already installed, unless it is an older local
# build (another +snowflake<N>), which is rebuilt and replaced.

SUPPORTED_PG_MAJORS=(15 16 17 18)
SOURCE_APT_DIR=/var/lib/snowflake_id/apt
SOURCE_BUILD_DIR=/var/tmp/snowflake_id-build
# Options a distribution builds with (Debian's own build adds LLVM, PAM, LDAP, GSSAPI, NLS and
# the procedural languages, which nothing here uses). OpenSSL matters for measurements:
# without it, gen_random_uuid() and uuidv7() read /dev/urandom on every call.
SOURCE_PG_CONFIGURE_OPTIONS=(--with-openssl --with-icu --with-lz4 --with-zstd --with-uuid=e2fs
                             --with-libxml --with-readline)
SOURCE_PG_BUILD_PACKAGES=(bison flex libssl-dev libicu-dev liblz4-dev libzstd-dev uuid-dev
                          libxml2-dev libreadline-dev zlib1g-dev dpkg-dev curl)
# What the local package of a source-built major needs at run time (the libraries of the
# options above, and postgresql-common, which makes the socket directory and has
# pg_createcluster); Debian 12 has them all.
SOURCE_PG_RUNTIME_DEPENDS="postgresql-common, libc6, libssl3, libicu72, liblz4-1, libzstd1, libuuid1, libxml2, libreadline8, zlib1g"
# The suffix of the local packages' versions: never taken for Debian's or PGDG's own build.
# Raised whenever the build changes (2: Debian's socket directory), so that machines holding an
# older local build rebuild it.
SOURCE_PG_VERSION_SUFFIX=+snowflake2
# Where Debian's servers and clients (and postgresql-common's pg_createcluster) put the Unix
# socket; the upstream default is /tmp.
DEBIAN_SOCKET_DIR=/var/run/postgresql

# has_contrib_modules MAJOR: whether MAJOR's installation holds PostgreSQL's contrib modules
# (every major here but 16, whose wheel ships none).
has_contrib_modules() {
    [ -f "$("$(pg_config_of "$1")" --pkglibdir)/postgres_fdw.so" ]
}

# has_libxml MAJOR: whether MAJOR's server is built with libxml, which query_to_xml and XMLTABLE,
# and so the exporters' queries of monitoring/, need (every major here but 16).
has_libxml() {
    "$(pg_config_of "$1")" --configure | grep -q -- "--with-libxml"
}

# has_openssl MAJOR: whether MAJOR's server is built with OpenSSL (every major here but 16), as
# the benchmarks need: without it gen_random_uuid() reads /dev/urandom for every value.
has_openssl() {
    "$(pg_config_of "$1")" --configure | grep -qE -- "--with-(openssl|ssl=openssl)"
}

# has_regression_sources MAJOR: whether PostgreSQL's own regression suites of MAJOR can be had
# here, from Debian's source package of the major (none of 16 is reachable).
has_regression_sources() {
    [ "$1" = 15 ] || debian_suite_of "$1" >/dev/null 2>&1
}

# pg_config_of MAJOR: the pg_config of that major's installation (Debian's layout).
pg_config_of() {
    echo "/usr/lib/postgresql/$1/bin/pg_config"
}

# debian_suite_of MAJOR: the Debian suite whose source package is built for that major.
debian_suite_of() {
    case $1 in
        17) echo trixie ;;
        18) echo sid ;;
        *) echo "no Debian source package is configured for PostgreSQL $1" >&2; return 1 ;;
    esac
}

# Source packages known to be served by Debian's pool, for when the suite's index already names
# a newer version than the pool holds (seen for trixie: index 17.12-0+deb13u1, pool 17.11 only).
# Each is the .dsc's name and SHA-256; the .dsc holds the SHA-256 of the tarballs, which
# dpkg-source checks when it unpacks.
declare -A KNOWN_SOURCE_PACKAGES=(
    [17]="postgresql-17_17.11-0+deb13u1.dsc bf148ae423a982707c3f60672c3a072ef62b701bd9f5df847d9f4b8c9b3e3b18"
)

# debian_mirror: the URI of Debian's archive as this machine's own apt sources name it (the
# first source whose release file says origin Debian, label Debian: not the security archive),
# so that a machine behind a local mirror fetches from that mirror. No host is named here.
debian_mirror() {
    local mirror attempt
    for attempt in 1 2; do
        mirror=$(apt-cache policy | awk '
            $1 ~ /^[0-9]+$/ && $2 ~ /:\/\// {uri = $2; next}
            /release / && /o=Debian,/ && /l=Debian,/ && uri != "" {print uri; exit}')
        [ -n "$mirror" ] && break
        [ "$attempt" = 1 ] && apt-get update -qq
    done
    if [ -z "$mirror" ]; then
        echo "this machine's apt sources name no source of Debian's archive (origin Debian); add one" >&2
        return 1
    fi
    echo "${mirror%/}"
}

# fetch_known_source_package MAJOR: downloads the known source package of MAJOR from Debian's
# pool into the current directory and checks the .dsc against its recorded SHA-256.
fetch_known_source_package() {
    local major=$1 dsc sha256 file pool
    pool="$(debian_mirror)/pool/main/p/postgresql-$1"
    read -r dsc sha256 <<<"${KNOWN_SOURCE_PACKAGES[$major]:?no known source package for PostgreSQL $major}"
    echo "the suite's index names a version the pool does not serve; fetching $dsc instead" >&2
    curl --fail --silent --show-error --output "$dsc" "$pool/${dsc//+/%2b}"
    echo "$sha256  $dsc" | sha256sum --check --quiet
    for file in $(awk '/^Checksums-Sha256:/ {in_list=1; next} /^[^ ]/ {in_list=0} in_list {print $3}' "$dsc"); do
        curl --fail --silent --show-error --output "$file" "$pool/${file//+/%2b}"
    done
}

# private_apt ARGS…: apt-get with only this project's deb-src entries (and its own lists/cache).
private_apt() {
    # (root fetches into a root-owned directory: no sandbox user)
    apt-get -o APT::Sandbox::User=root \
            -o Dir::Etc::SourceList="$SOURCE_APT_DIR/sources.list" \
            -o Dir::Etc::SourceParts=/dev/null \
            -o Dir::State::Lists="$SOURCE_APT_DIR/lists" \
            -o Dir::Cache="$SOURCE_APT_DIR/cache" "$@"
}

# update_source_index: fetches the signed source indexes of bookworm (PostgreSQL 15's
# regression suites), trixie and sid, and trixie's binary index for amd64 (for pgBackRest), into
# the private apt configuration (apt checks their signatures against Debian's archive keyring).
update_source_index() {
    local mirror
    mirror=$(debian_mirror)
    mkdir -p "$SOURCE_APT_DIR/lists/partial" "$SOURCE_APT_DIR/cache/archives/partial"
    cat > "$SOURCE_APT_DIR/sources.list" <<SOURCES
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bookworm main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror sid main
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main
SOURCES
    private_apt update -qq
}

# ensure_source_index: update_source_index unless the indexes are already here.
ensure_source_index() {
    { compgen -G "$SOURCE_APT_DIR/lists/*_dists_trixie_main_source_Sources*" \
        && compgen -G "$SOURCE_APT_DIR/lists/*_dists_bookworm_main_source_Sources*" \
        && compgen -G "$SOURCE_APT_DIR/lists/*_dists_trixie_main_binary-amd64_Packages*"; } \
        >/dev/null || update_source_index
}

# postgres_package_is_current MAJOR PATTERN: whether postgresql-MAJOR is installed, with its
# pg_config, and is Debian's or PGDG's own or a local build of this project whose version
# matches PATTERN (a case pattern); an older local build (another +snowflake<N>) is not.
postgres_package_is_current() {
    local installed
    installed=$(dpkg-query -W -f='${Status}|${Version}' "postgresql-$1" 2>/dev/null || true)
    [ "${installed%%|*}" = "install ok installed" ] && [ -x "$(pg_config_of "$1")" ] || return 1
    # shellcheck disable=SC2254 # (PATTERN is a pattern)
    case ${installed#*|} in
        $2) return 0 ;;
        *+snowflake[0-9]*) echo "postgresql-$1 ${installed#*|} is an older local build: replacing it" >&2
                           return 1 ;;
        *) return 0 ;;
    esac
}

# install_local_postgres_package MAJOR VERSION STAGING DEPENDS SUMMARY DETAILS: packs STAGING (the
# installation's files under /, its BUILD-INFO among them) as the local package postgresql-MAJOR
# at VERSION beside it, installs that, and shows the BUILD-INFO. DETAILS are the description's
# further lines, each starting with a space.
install_local_postgres_package() {
    local major=$1 version=$2 staging=$3 deb
    deb="$(dirname "$staging")/postgresql-${major}_${version}.deb"
    mkdir -p "$staging/DEBIAN"
    cat > "$staging/DEBIAN/control" <<CONTROL
Package: postgresql-$major
Version: $version
Architecture: $(dpkg --print-architecture)
Maintainer: snowflake_id test setup <root@localhost>
Installed-Size: $(du -sk "$staging" | cut -f1)
Depends: $4
Section: database
Priority: optional
Description: $5
$6
CONTROL
    dpkg-deb --root-owner-group --build "$staging" "$deb" >/dev/null
    dpkg -i "$deb"
    cat "/usr/share/doc/postgresql-$major/BUILD-INFO"
}

# install_postgres_from_source MAJOR: fetches and builds PostgreSQL MAJOR from Debian's source
# package in Debian's layout, and installs it as the local package postgresql-MAJOR (see the top
# of this file), unless a package of that name is already installed (this build, or Debian's or
# PGDG's own).
install_postgres_from_source() {
    local major=$1 suite source_dir build="$SOURCE_BUILD_DIR/$1" staging dsc version
    postgres_package_is_current "$major" "*$SOURCE_PG_VERSION_SUFFIX" && return 0
    suite=$(debian_suite_of "$major")
    apt_install_missing "${SOURCE_PG_BUILD_PACKAGES[@]}" postgresql-common
    step "PostgreSQL $major from Debian's source package postgresql-$major ($suite) -> local package postgresql-$major"
    update_source_index
    rm -rf "$build"
    mkdir -p "$build"
    (
        cd "$build"
        # apt verifies the download against the suite's signed Release file; dpkg-source
        # checks the .dsc's checksums when it unpacks. Debian's own patches are left out (they
        # serve Debian's packaging: pg_wrapper, several majors' libpq); configure places the
        # files where Debian's packages have them.
        private_apt source --download-only -qq "postgresql-$major/$suite" \
            || fetch_known_source_package "$major"
        dpkg-source --skip-patches -x postgresql-"$major"_*.dsc source >/dev/null
        # The one Debian patch this build takes, as a check that fails when upstream changes:
        # the socket directory of servers and clients (libpq) is Debian's.
        sed -i "s|^#define DEFAULT_PGSOCKET_DIR  \"/tmp\"\$|#define DEFAULT_PGSOCKET_DIR  \"$DEBIAN_SOCKET_DIR\"|" \
            source/src/include/pg_config_manual.h
        grep -q "^#define DEFAULT_PGSOCKET_DIR  \"$DEBIAN_SOCKET_DIR\"\$" source/src/include/pg_config_manual.h \
            || { echo "pg_config_manual.h: DEFAULT_PGSOCKET_DIR not found as expected" >&2; exit 1; }
    )
    source_dir="$build/source"
    staging="$build/package"
    (
        cd "$source_dir"
        # libpq and the other libraries stay in the major's own lib directory (the binaries
        # find them by rpath), so nothing of Debian 12's libpq5 is replaced.
        ./configure --prefix=/usr \
            --bindir="/usr/lib/postgresql/$major/bin" \
            --libdir="/usr/lib/postgresql/$major/lib" \
            --datadir="/usr/share/postgresql/$major" \
            --includedir="/usr/include/postgresql/$major" \
            --mandir="/usr/share/postgresql/$major/man" \
            --docdir="/usr/share/doc/postgresql-$major" \
            --localedir="/usr/share/postgresql/$major/locale" \
            --sysconfdir=/etc/postgresql-common \
            "${SOURCE_PG_CONFIGURE_OPTIONS[@]}" >configure.log
        make -j"$(nproc)" -s world-bin >make.log 2>&1 || { tail -n 40 make.log >&2; exit 1; }
        make -s install-world-bin DESTDIR="$staging" >install.log 2>&1 \
            || { tail -n 40 install.log >&2; exit 1; }
    )
    dsc=$(basename "$(ls "$build"/postgresql-"$major"_*.dsc)" .dsc)
    version=${dsc#postgresql-"$major"_}$SOURCE_PG_VERSION_SUFFIX
    mkdir -p "$staging/usr/share/doc/postgresql-$major"
    {
        echo "source package: $dsc.dsc (Debian's patches left out; socket directory $DEBIAN_SOCKET_DIR)"
        echo "configure: Debian's layout, ${SOURCE_PG_CONFIGURE_OPTIONS[*]}"
        "$staging/usr/lib/postgresql/$major/bin/postgres" --version
    } > "$staging/usr/share/doc/postgresql-$major/BUILD-INFO"
    install_local_postgres_package "$major" "$version" "$staging" "$SOURCE_PG_RUNTIME_DEPENDS" \
        "PostgreSQL $major built by snowflake_id's test setup" \
        " PostgreSQL $major from Debian's source package ($dsc, without Debian's
 patches), configured into Debian's layout, for snowflake_id's build and tests.
 It holds the server, the client programs, contrib and the server headers."
    rm -rf "$build"
}

# PostgreSQL 16 from PyPI: the pgserver wheel (checked by its SHA-256) holds PostgreSQL 16.2 built
# relocatable (paths found from the programs' own place), with every server and client program,
# the server headers and PGXS, but no contrib modules and no regression suites, and built without
# ICU, OpenSSL, lz4, zstd, libxml and readline. What needs those cannot run on 16 here; test.sh
# names each such part where it leaves it out.
PG16_WHEEL=pgserver-0.1.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
PG16_WHEEL_SHA256=d595789b47624a3d963aa9aa6359da9be31beb7e61f1a45541953242068b8813
PG16_WHEEL_VERSION=16.2-pgserver0.1.4${SOURCE_PG_VERSION_SUFFIX}

# install_postgres_from_wheel: PostgreSQL 16 from the pgserver wheel, laid out as Debian's (the
# server finds its files relative to its programs, so the wheel's own places are kept under
# /usr/lib/postgresql/16 and point by symbolic links at Debian's: lib/postgresql at lib,
# share/postgresql at /usr/share/postgresql/16), and installed as the local package
# postgresql-16 (version $PG16_WHEEL_VERSION), so the extension's package installs on it as on
# the others. The wheel's copies of libpq and ecpg's libraries (renamed by auditwheel) are
# replaced by the same libraries under their own names, in the major's lib directory. Skipped
# when postgresql-16 is installed (this build, or Debian's or PGDG's own).
install_postgres_from_wheel() {
    local build="$SOURCE_BUILD_DIR/16" staging pginstall root file needed library plain
    postgres_package_is_current 16 "$PG16_WHEEL_VERSION" && return 0
    apt_install_missing patchelf unzip postgresql-common
    step "PostgreSQL 16 from PyPI's $PG16_WHEEL -> local package postgresql-16"
    rm -rf "$build"
    mkdir -p "$build"
    python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$build" \
        --platform manylinux_2_17_x86_64 --python-version 3.11 --implementation cp --abi cp311 \
        pgserver==0.1.4
    echo "$PG16_WHEEL_SHA256  $build/$PG16_WHEEL" | sha256sum --check --quiet
    unzip -q "$build/$PG16_WHEEL" -d "$build/wheel" # (keeps the programs' modes)
    pginstall="$build/wheel/pgserver/pginstall"
    staging="$build/package"
    root="$staging/usr/lib/postgresql/16"
    mkdir -p "$root" "$staging/usr/share/postgresql"
    cp -a "$pginstall/bin" "$pginstall/include" "$root/"
    cp -a "$pginstall/lib" "$root/lib"
    mv "$root"/lib/postgresql/* "$root/lib/"
    rmdir "$root/lib/postgresql"
    ln -s . "$root/lib/postgresql"
    cp -a "$pginstall/share/postgresql" "$staging/usr/share/postgresql/16"
    mkdir -p "$root/share"
    ln -s ../../../../share/postgresql/16 "$root/share/postgresql"
    # pgvector, which the wheel adds, is not part of PostgreSQL.
    rm -f "$root/lib/vector.so" "$staging"/usr/share/postgresql/16/extension/vector[-.]*
    rm -rf "$root/include/postgresql/server/extension/vector"
    for file in "$root"/bin/* "$root"/lib/*.so*; do
        [ -L "$file" ] && continue
        needed=$(patchelf --print-needed "$file" 2>/dev/null) || continue
        for library in $needed; do
            case $library in
                lib*-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f].so.*)
                    # libpq-084d956f.so.5.16 -> libpq.so.5
                    plain=${library%%-*}.so.${library#*.so.}
                    patchelf --replace-needed "$library" "${plain%.*}" "$file" ;;
            esac
        done
        case $file in
            "$root"/bin/*) patchelf --set-rpath '$ORIGIN/../lib' "$file" ;;
            *) patchelf --set-rpath '$ORIGIN' "$file" ;;
        esac
    done
    if ldd "$root"/bin/* "$root"/lib/*.so* 2>/dev/null | grep -q "not found"; then
        ldd "$root"/bin/* "$root"/lib/*.so* | grep -B5 "not found" >&2
        echo "PostgreSQL 16 from the wheel: a library is not found" >&2
        return 1
    fi
    mkdir -p "$staging/usr/share/doc/postgresql-16"
    {
        echo "PyPI: $PG16_WHEEL (SHA-256 $PG16_WHEEL_SHA256), pgserver/pginstall, laid out as Debian's"
        "$root/bin/pg_config" --configure
        "$root/bin/postgres" --version
    } > "$staging/usr/share/doc/postgresql-16/BUILD-INFO"
    install_local_postgres_package 16 "$PG16_WHEEL_VERSION" "$staging" \
        "postgresql-common, libc6, zlib1g" \
        "PostgreSQL 16 from PyPI's pgserver wheel for snowflake_id's tests" \
        " PostgreSQL 16.2 as PyPI's pgserver 0.1.4 wheel ships it (the server, the
 client programs, the server headers and PGXS; no contrib), laid out as
 Debian's, for snowflake_id's build and tests."
    rm -rf "$build"
}

# fetch_orig_tarball PACKAGE SUITE: downloads the upstream tarball of Debian source package
# PACKAGE in SUITE into the current directory, checked against the SHA-256 in the suite's
# signed source index (apt verified the index's signature when it fetched it). Prints its name.
fetch_orig_tarball() {
    local index file sha256
    index=$(ls "$SOURCE_APT_DIR"/lists/*_dists_"$2"_main_source_Sources*)
    read -r sha256 file < <(/usr/lib/apt/apt-helper cat-file "$index" \
        | awk -v package="$1" 'BEGIN {RS=""} $0 ~ "^Package: " package "\n"' \
        | awk '/^Checksums-Sha256:/ {in_list=1; next} /^[^ ]/ {in_list=0}
               in_list && $3 ~ /\.orig\.tar\./ {print $1, $3}')
    if [ -z "$file" ]; then
        echo "no $1 in the $2 source index" >&2
        return 1
    fi
    curl --fail --silent --show-error --output "$file" \
        "$(debian_mirror)/pool/main/${1:0:1}/$1/$file"
    echo "$sha256  $file" | sha256sum --check --quiet >&2
    echo "$file"
}

# The major whose pg_auto_failover runs the failover tests of MAJOR. pg_auto_failover 2.2, the
# newest release, supports PostgreSQL up to 17; Debian adds 18 with a patch, but its pool serves
# neither that patch (the debian.tar.xz of 2.2-4 is missing) nor binaries for Debian 12's glibc.
# pg_autoctl drives the data nodes through their own pg_ctl (--pgctl), and only the monitor runs
# the pgautofailover extension, so for 18 the monitor and pg_autoctl come from 17.
auto_failover_major_of() {
    case $1 in
        18) echo 17 ;;
        *) echo "$1" ;;
    esac
}

# The major whose clusters the pg_upgrade test of MAJOR upgrades from: the previous supported
# major, except that nothing upgrades from Debian's 15.20 to the source-built majors (its
# per-column `pg_attver` option breaks their pg_dump --binary-upgrade for every table).
upgrade_source_major_of() {
    case $1 in
        18) echo 17 ;;
        *) echo "$1" ;;
    esac
}

# install_pg_auto_failover_from_source MAJOR: pg_auto_failover 2.2 (pg_autoctl and the
# pgautofailover extension) from the upstream tarball of Debian's source package
# pg-auto-failover (trixie) into MAJOR's installation. The failover tests run it; Debian 12
# packages it for 15 only. Skipped when the installation already holds it.
install_pg_auto_failover_from_source() {
    local pg_config build="$SOURCE_BUILD_DIR/pg-auto-failover-$1" tarball
    pg_config=$(pg_config_of "$1")
    if [ -x "$("$pg_config" --bindir)/pg_autoctl" ] \
            && [ -f "$("$pg_config" --sharedir)/extension/pgautofailover.control" ]; then
        return 0
    fi
    apt_install_missing libkrb5-dev libselinux1-dev libpam0g-dev libncurses-dev libedit-dev \
        libxslt1-dev libnuma-dev
    step "pg_auto_failover from Debian's source package pg-auto-failover (trixie) -> $("$pg_config" --bindir)"
    ensure_source_index
    rm -rf "$build"
    mkdir -p "$build"
    (
        cd "$build"
        tarball=$(fetch_orig_tarball pg-auto-failover trixie)
        tar --extract --gzip --file "$tarball" --strip-components=1
        make -j"$(nproc)" PG_CONFIG="$pg_config" >make.log 2>&1 \
            || { tail -n 40 make.log >&2; exit 1; }
        make install PG_CONFIG="$pg_config" >install.log 2>&1 \
            || { tail -n 40 install.log >&2; exit 1; }
    )
    rm -rf "$build"
}

# pgBackRest for the backup test (pgrx-tests/tests/pgbackrest.rs). Debian 12's 2.45 refuses
# PostgreSQL 17 and 18 ("unexpected control version"). trixie's binary package runs on Debian 12
# (it needs glibc 2.34 and the same library sonames; sid's needs libxml2.so.16, and the mirror
# here serves neither source tarball), so its program is taken from the package, which apt
# checks against trixie's signed index, into a directory of its own: it never replaces a system
# pgbackrest, and none of trixie's libraries come with it.
PGBACKREST_PREFIX=/opt/snowflake_id/pgbackrest
PGBACKREST_RUNTIME_PACKAGES=(libbz2-1.0 liblz4-1 libpq5 libssh2-1 libssl3 libxml2 libzstd1 zlib1g)

# install_pgbackrest_from_trixie: trixie's pgbackrest program as $PGBACKREST_PREFIX/bin/pgbackrest,
# unless one is there.
install_pgbackrest_from_trixie() {
    local build="$SOURCE_BUILD_DIR/pgbackrest"
    if [ -x "$PGBACKREST_PREFIX/bin/pgbackrest" ]; then
        return 0
    fi
    apt_install_missing "${PGBACKREST_RUNTIME_PACKAGES[@]}"
    step "pgBackRest from Debian's binary package pgbackrest (trixie) -> $PGBACKREST_PREFIX"
    ensure_source_index
    rm -rf "$build"
    mkdir -p "$build"
    (
        cd "$build"
        private_apt download -qq pgbackrest/trixie
        dpkg-deb --extract pgbackrest_*.deb unpacked
        install -D --mode=755 unpacked/usr/bin/pgbackrest "$PGBACKREST_PREFIX/bin/pgbackrest.new"
        # Under its final name in one step: a half-copied program is never there.
        mv "$PGBACKREST_PREFIX/bin/pgbackrest.new" "$PGBACKREST_PREFIX/bin/pgbackrest"
    )
    rm -rf "$build"
    "$PGBACKREST_PREFIX/bin/pgbackrest" version
}

QUERY_EXPORTER_PREFIX=/opt/snowflake_id/query-exporter
QUERY_EXPORTER_REQUIREMENTS=$(cd "$(dirname "${BASH_SOURCE[0]}")/../monitoring" && pwd)/query-exporter-requirements.txt

# install_query_exporter: query-exporter (PyPI) and every package it runs on, at the versions
# monitoring/query-exporter-requirements.txt pins, in a virtual environment of its own under
# $QUERY_EXPORTER_PREFIX (apart from the client tests' packages), for the monitoring tests.
# Skipped when the environment was made from the same file.
install_query_exporter() {
    local stamp
    stamp=$(sha256sum "$QUERY_EXPORTER_REQUIREMENTS" | cut -d' ' -f1)
    if [ "$(cat "$QUERY_EXPORTER_PREFIX/requirements.sha256" 2>/dev/null)" = "$stamp" ]; then
        return 0
    fi
    apt_install_missing python3-venv
    step "query-exporter (PyPI) as monitoring/query-exporter-requirements.txt pins it -> $QUERY_EXPORTER_PREFIX"
    # A virtual environment records its own path: made where it stays. The stamp is written
    # last, so an interrupted install is made again on the next run.
    rm -rf "$QUERY_EXPORTER_PREFIX"
    python3 -m venv "$QUERY_EXPORTER_PREFIX"
    "$QUERY_EXPORTER_PREFIX/bin/pip" install --quiet --disable-pip-version-check --no-deps \
        --requirement "$QUERY_EXPORTER_REQUIREMENTS"
    "$QUERY_EXPORTER_PREFIX/bin/pip" check --disable-pip-version-check
    "$QUERY_EXPORTER_PREFIX/bin/query-exporter" --version
    echo "$stamp" > "$QUERY_EXPORTER_PREFIX/requirements.sha256"
}

# install_pg_partman_from_source MAJOR: pg_partman 5.x (the extension, without its background
# worker, which run_maintenance() called by hand or from cron does without) from the upstream
# tarball of Debian's source package pg-partman (trixie) into PostgreSQL MAJOR's installation.
# The partitioning tests run it; Debian 12 packages only 4.7, whose API differs. Skipped when
# MAJOR already has a 5.x.
install_pg_partman_from_source() {
    local pg_config build="$SOURCE_BUILD_DIR/pg-partman-$1" tarball control
    pg_config=$(pg_config_of "$1")
    control="$("$pg_config" --sharedir)/extension/pg_partman.control"
    if grep -qs "^default_version = '5\." "$control"; then
        return 0
    fi
    step "pg_partman from Debian's source package pg-partman (trixie) -> PostgreSQL $1"
    ensure_source_index
    rm -rf "$build"
    mkdir -p "$build"
    (
        cd "$build"
        tarball=$(fetch_orig_tarball pg-partman trixie)
        tar --extract --gzip --file "$tarball" --strip-components=1
        make NO_BGW=1 PG_CONFIG="$pg_config" >make.log 2>&1 \
            || { tail -n 40 make.log >&2; exit 1; }
        make NO_BGW=1 install PG_CONFIG="$pg_config" >install.log 2>&1 \
            || { tail -n 40 install.log >&2; exit 1; }
    )
    rm -rf "$build"
}
