"""The cost per ID when sessions share a worker id: pgbench sessions issuing IDs of a sequence
with 10 worker bits (each session alone on its id) against the same layout with 0 worker bits
(one id: all sessions share it), at 2, 4 and 8 sessions, alternating inside each repetition. The
two sequences differ only in the worker field and have 14 sequence bits (16,384 IDs per 1 ms
tick, more than the sessions can ask for), so the ratio of their rates at the same number of
sessions is the price of sharing. A third sequence shares one id with the classic 12 sequence
bits: there the id's capacity (4,096 IDs per ms, each tick belonging to one session) is what the
sessions divide. `snowflake_stats()` before and after each run gives the ticks found taken
(`tick_conflicts`, the compare-and-swaps that lost) and the sleeps (`throttle_sleeps`)."""

import re
from collections import defaultdict

from . import log
from .benchmarks import rotated, spread_note, summary
from .cluster import run

SESSIONS = [2, 4, 8]
# (worker bits, sequence bits) of each mode's sequence; 1 ms ticks, time bits to fill 63 bits at
# most (14 sequence bits: 39 time bits, until 2042).
MODES = {"alone": (10, 14), "shared": (0, 14), "shared_classic": (0, 12)}
IDS_PER_TRANSACTION = 10_000
# At 2 sessions per worker id, an ID may cost at most this many times what it costs alone.
TARGET_RATIO_AT_2 = 2.0


def sequence(mode):
    return f"bench_{mode}"


def setup(cluster):
    with cluster.connect() as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS snowflake_id")
        for mode, (worker_bits, sequence_bits) in MODES.items():
            conn.execute(f"SELECT snowflake_drop_sequence('{sequence(mode)}') "
                         f"FROM snowflake_sequences WHERE name = '{sequence(mode)}'")
            conn.execute(f"SELECT snowflake_create_sequence('{sequence(mode)}', "
                         f"time_bits => {53 - sequence_bits}, worker_bits => {worker_bits}, "
                         f"sequence_bits => {sequence_bits})")


def counters(cluster):
    with cluster.connect() as conn:
        return conn.execute("SELECT tick_conflicts, throttle_sleeps, borrowed_ticks "
                            "FROM snowflake_stats()").fetchone()


def bench_sharing(cluster, seconds, reps):
    """IDs per second of each mode at each number of sessions, and the counters' growth."""
    directory = cluster.dir / "sharing"
    directory.mkdir(exist_ok=True)
    for mode in MODES:
        (directory / f"{mode}.sql").write_text(
            f"SELECT count(snowflake_nextval('{sequence(mode)}')) "
            f"FROM generate_series(1, {IDS_PER_TRANSACTION});\n")
    runs = [(sessions, mode) for sessions in SESSIONS for mode in MODES]
    per_second = defaultdict(list)
    grown = defaultdict(lambda: [0, 0, 0, 0])  # conflicts, sleeps, borrows, IDs
    for rep in range(reps):
        for sessions, mode in rotated(runs, rep):
            before = counters(cluster)
            output = run(cluster.pgbench_command(sessions, seconds, directory / f"{mode}.sql"),
                         capture_output=True, text=True).stdout
            after = counters(cluster)
            transactions = int(re.search(r"number of transactions actually processed: (\d+)",
                                         output).group(1))
            key = f"{mode}/{sessions}"
            per_second[key].append(float(re.search(r"tps = ([0-9.]+)", output).group(1))
                                   * IDS_PER_TRANSACTION)
            for index in range(3):
                grown[key][index] += after[index] - before[index]
            grown[key][3] += transactions * IDS_PER_TRANSACTION
        log(f"sharing repetition {rep + 1}/{reps}: " + ", ".join(
            f"{mode}/{sessions} {per_second[f'{mode}/{sessions}'][-1] / 1e6:.2f} M/s"
            for sessions, mode in runs))
    return {"seconds": seconds, "reps": reps, "sessions": SESSIONS,
            "ids_per_transaction": IDS_PER_TRANSACTION,
            "per_second": {key: summary(values) for key, values in per_second.items()},
            "counters": {key: {"tick_conflicts": c, "throttle_sleeps": s, "borrowed_ticks": b,
                               "ids": n} for key, (c, s, b, n) in grown.items()}}


def rows(results):
    """Per number of sessions: IDs/s alone and shared (medians), the cost ratio, ns per ID per
    session, and the shared runs' conflicts and sleeps per million IDs."""
    table = []
    for sessions in results["sessions"]:
        alone = results["per_second"][f"alone/{sessions}"]["median"]
        shared = results["per_second"][f"shared/{sessions}"]["median"]
        counted = results["counters"][f"shared/{sessions}"]
        per_million = 1e6 / max(counted["ids"], 1)
        ratio = alone / shared
        table.append({"sessions": sessions, "alone_per_second": alone,
                      "shared_per_second": shared,
                      "classic_per_second":
                          results["per_second"][f"shared_classic/{sessions}"]["median"],
                      "alone_ns": 1e9 * sessions / alone, "shared_ns": 1e9 * sessions / shared,
                      "ratio": ratio,
                      "conflicts_per_million": counted["tick_conflicts"] * per_million,
                      "sleeps_per_million": counted["throttle_sleeps"] * per_million,
                      "met": ratio <= TARGET_RATIO_AT_2 if sessions == 2 else None})
    return table


def render(results, server_version):
    lines = [
        f"# Shared worker ids (PostgreSQL {server_version})",
        "",
        f"pgbench, {results['seconds']} s per run, {results['reps']} alternating repetitions "
        f"(medians); each transaction is `SELECT count(snowflake_nextval(seq)) FROM "
        f"generate_series(1, {results['ids_per_transaction']})`. *Alone*: a sequence with 10 "
        "worker bits and 14 sequence bits (16,384 IDs per 1 ms tick: more than the sessions ask "
        "for), every session on a worker id of its own. *Shared*: the same layout with 0 "
        "worker bits, so all sessions share one worker id and take turns by tick. *Shared, "
        "classic*: one shared id with the classic 12 sequence bits, whose 4,096 IDs per ms (a "
        "tick belongs to one session) the sessions divide. ns per ID per "
        "session = sessions / (IDs per second); with more sessions than the machine's cores it "
        "includes waiting for a core. Ticks found taken and sleeps are counted over the shared "
        f"runs. Target: at most {TARGET_RATIO_AT_2:g}× the cost alone at 2 sessions per worker "
        "id. Command: `bash bench/run.sh sharing`.",
        "",
        "| sessions per worker id | alone, M IDs/s | shared, M IDs/s | alone, ns per ID per "
        "session | shared, ns per ID per session | cost shared / alone | ticks found taken per "
        "million IDs | sleeps per million IDs | target met | shared, classic, M IDs/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows(results):
        met = "—" if row["met"] is None else ("yes" if row["met"] else "no")
        lines.append(
            f"| {row['sessions']} | {row['alone_per_second'] / 1e6:.2f} | "
            f"{row['shared_per_second'] / 1e6:.2f} | {row['alone_ns']:.0f} | "
            f"{row['shared_ns']:.0f} | {row['ratio']:.2f}× | "
            f"{row['conflicts_per_million']:.0f} | {row['sleeps_per_million']:.0f} | {met} | "
            f"{row['classic_per_second'] / 1e6:.2f} |")
    lines += ["", spread_note(results["per_second"]), ""]
    return "\n".join(lines)
