"""The throwaway cluster the benchmarks run in: Unix socket only, always stopped at the end."""

import hashlib
import shutil
import subprocess
from pathlib import Path

from . import ROOT, log

PORT = 54339

CLUSTER_CONF = """
# snowflake_id benchmark cluster (bench/run.py): Unix socket only.
listen_addresses = ''
port = {port}
unix_socket_directories = '{dir}'
shared_preload_libraries = 'snowflake_id'
# pgEdge's snowflake extension (bench_sequences and its columns): its node number.
snowflake.node = 1
max_connections = 20
shared_buffers = 512MB
work_mem = 256MB
maintenance_work_mem = 256MB
max_wal_size = 8GB
checkpoint_timeout = 30min
autovacuum = off
jit = off
"""


def as_postgres(command):
    return ["runuser", "-u", "postgres", "--"] + [str(part) for part in command]


def run(command, **kwargs):
    return subprocess.run([str(part) for part in command], check=True, **kwargs)


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Cluster:
    def __init__(self, bindir, directory):
        self.bindir = Path(bindir)
        self.dir = Path(directory)
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"

    def running(self):
        return (self.data / "postmaster.pid").exists()

    def stop(self, mode="fast"):
        if self.running():
            subprocess.run(as_postgres([self.bindir / "pg_ctl", "--pgdata", self.data,
                                        "--mode", mode, "--wait", "stop"]),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)

    def create(self):
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
        run(["install", "-d", "-o", "postgres", "-g", "postgres", self.dir])
        run(as_postgres([self.bindir / "initdb", "--pgdata", self.data, "--auth=trust",
                         "--username=postgres", "--encoding=UTF8", "--locale=C"]),
            stdout=subprocess.DEVNULL)
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(CLUSTER_CONF.format(port=PORT, dir=self.dir))

    def start(self, environment=None):
        """Starts the server, with `environment` ({name: value}) added to its processes'."""
        settings = [f"{name}={value}" for name, value in (environment or {}).items()]
        run(as_postgres(["env", *settings, self.bindir / "pg_ctl", "--pgdata", self.data,
                         "--log", self.log, "--wait", "start"]), stdout=subprocess.DEVNULL)

    def slow_fsync_environment(self, delay_us):
        """The environment that slows every fsync() and fdatasync() of the server by `delay_us`
        (pgrx-tests/fixtures/slow_fsync.c, built here with cc and preloaded)."""
        library = self.dir / "slow_fsync.so"
        run(["cc", "-shared", "-fPIC", "-O2", "-o", library,
             ROOT / "pgrx-tests" / "fixtures" / "slow_fsync.c", "-ldl"])
        library.chmod(0o755)
        return {"LD_PRELOAD": library, "SLOW_FSYNC_US": delay_us}

    def postmaster_pid(self):
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def connect(self, database="postgres"):
        import psycopg  # only the measuring needs it, not the report or the parsers

        return psycopg.connect(host=str(self.dir), port=PORT, user="postgres", dbname=database,
                               autocommit=True)

    def pgbench_command(self, clients, seconds, script, database="postgres", reconnect=False):
        """pgbench running `script` in `clients` sessions (one thread each) for `seconds`; with
        `reconnect`, each transaction on a new connection (--connect)."""
        return [str(part) for part in
                [self.bindir / "pgbench", "--no-vacuum", "--host", self.dir, "--port", PORT,
                 "--username", "postgres", "--client", clients, "--jobs", clients,
                 "--time", seconds, "--file", script, *(["--connect"] if reconnect else []),
                 database]]

    def mapped_library_sha256(self):
        """sha256 of the snowflake_id.so that the running postmaster has mapped."""
        pid = self.postmaster_pid()
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                if "snowflake_id.so" in line:
                    address = line.split()[0]
                    return sha256(f"/proc/{pid}/map_files/{address}")
        return None


def ensure_release_library(cluster, library, pg_config):
    """Starts the cluster on exactly target/release's library (another `cargo pgrx install`
    may have replaced the installed one); reinstalls it up to twice."""
    wanted = sha256(library)
    for _ in range(3):
        cluster.start()
        mapped = cluster.mapped_library_sha256()
        if mapped == wanted:
            return wanted
        log(f"the postmaster mapped another snowflake_id.so ({str(mapped)[:12]}), "
            "reinstalling the release build")
        cluster.stop()
        major = run([pg_config, "--version"], capture_output=True, text=True).stdout.split()[1]
        run(["cargo", "pgrx", "install", "--release", "--pg-config", pg_config,
             "--no-default-features", "--features", f"pg{major.split('.')[0]}"], cwd=ROOT,
            stdout=subprocess.DEVNULL)
        wanted = sha256(library)
    raise RuntimeError("could not start the cluster on the release build of snowflake_id")


def fdatasync_ms(cluster):
    """How long one 8 kB write + fdatasync takes on the data directory's disk (pg_test_fsync)."""
    output = run([cluster.bindir / "pg_test_fsync", "--secs-per-test=1",
                  "--filename", cluster.dir / "pg_test_fsync.out"],
                 capture_output=True, text=True).stdout
    for line in output.splitlines():
        fields = line.split()
        if fields and fields[0] == "fdatasync" and "usecs/op" in fields:
            return float(fields[fields.index("usecs/op") - 1]) / 1e3
    return None
