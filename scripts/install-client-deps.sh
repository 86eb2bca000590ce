#!/usr/bin/env bash
# Installs the client libraries of the client guide's examples (clients/), which only the client
# tests (pgrx-tests/tests/clients.rs) run: Node.js with npm, then node-postgres and Drizzle ORM
# as clients/node/package-lock.json pins them; the Python packages (psycopg 3, Django,
# SQLAlchemy and what they need) as clients/python/requirements.txt pins them. Each step runs
# only when needed, so a second run changes nothing. Sourcing defines install_client_deps
# (test.sh calls it); run on its own (bash scripts/install-client-deps.sh, as root), it installs.

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
CLIENTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../clients" && pwd)

install_client_deps() {
    local lock_hash
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        step "apt-get install nodejs npm"
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
    fi
    if ! python3 -m pip --version >/dev/null 2>&1; then
        step "apt-get install python3-pip"
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
    fi
    if ! python_requirements_met "$CLIENTS_DIR/python/requirements.txt"; then
        step "pip install -r clients/python/requirements.txt"
        # Debian's own python3 is "externally managed" (PEP 668): these pinned packages go in anyway.
        PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet --root-user-action=ignore \
            -r "$CLIENTS_DIR/python/requirements.txt"
    fi
    lock_hash=$(sha256sum "$CLIENTS_DIR/node/package-lock.json" | cut -d' ' -f1)
    if [ "$(cat "$CLIENTS_DIR/node/node_modules/.package-lock.sha256" 2>/dev/null)" != "$lock_hash" ]; then
        step "npm ci --prefix clients/node"
        npm ci --prefix "$CLIENTS_DIR/node" --no-audit --no-fund --loglevel=error
        echo "$lock_hash" > "$CLIENTS_DIR/node/node_modules/.package-lock.sha256"
    fi
}

# Is every `name[extras]==version` line of requirements.txt installed, extras included?
python_requirements_met() {
    python3 - "$1" <<'PY'
import importlib.metadata as metadata, re, sys
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    match = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[([^\]]*)\])?==(\S+)", line)
    if not match:
        sys.exit(1)
    name, extras, version = match.groups()
    try:
        if metadata.version(name) != version:
            sys.exit(1)
        for extra in filter(None, (extras or "").split(",")):
            for requirement in metadata.requires(name) or []:
                if re.search(r"extra\s*==\s*['\"]%s['\"]" % re.escape(extra.strip()), requirement):
                    metadata.version(re.match(r"[A-Za-z0-9_.-]+", requirement).group(0))
    except metadata.PackageNotFoundError:
        sys.exit(1)
PY
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    require_root
    install_client_deps
fi
