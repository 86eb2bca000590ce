"""latest.png: the four benchmarks in one figure, and latency.png (bench/latency.py).
matplotlib is imported in the write_*chart() functions only, so that nothing else of the runner
needs it."""

from .benchmarks import FUNCTIONS, ID_FUNCTIONS, INSERT_VARIANTS, LAST_HOUR_QUERIES, SHORT
from .latency import FEW_SAMPLES, LABELS, rate_label
from .report import TARGET_VS_NEXTVAL_CACHE1, TARGET_VS_RANDOM, sessions


def bars(ax, labels, stats, scale, title, xlabel, colors=None):
    """Horizontal bars of the medians with min–max error bars, each labelled with its median."""
    med = [s["median"] * scale for s in stats]
    low = [(s["median"] - s["min"]) * scale for s in stats]
    high = [(s["max"] - s["median"]) * scale for s in stats]
    positions = range(len(labels))
    ax.barh(positions, med, xerr=[low, high], capsize=3,
            color=colors or ["#4c72b0"] * len(labels))
    ax.set_yticks(list(positions), labels)
    ax.invert_yaxis()
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    for y, value, stat in zip(positions, med, stats):
        ax.text(stat["max"] * scale, y, f"  {value:,.0f}", va="center", fontsize=8)


def write_chart(results, path):
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(15, 10))
    count = results["count"]
    n = count["n"]

    keys = [key for key, _, _ in FUNCTIONS if key in count["seconds"]]
    colors = ["#999999" if key == "empty" else "#dd8452" if key.startswith("snowflake")
              else "#4c72b0" for key in keys]
    bars(axes[0][0], [SHORT[k] for k in keys], [count["seconds"][k] for k in keys], 1e9 / n,
         f"Cost per ID: count(f()) over {n:,} rows (median, min–max)", "ns per ID (log)",
         colors)
    ax = axes[0][0]
    ax.set_xscale("log")
    target_random = TARGET_VS_RANDOM * count["seconds"]["random"]["median"] * 1e9 / n
    target_nextval = TARGET_VS_NEXTVAL_CACHE1 * count["seconds"]["nextval_c1"]["median"] * 1e9 / n
    ax.axvline(target_random, color="#c44e52", linestyle="--", linewidth=1,
               label=f"target {TARGET_VS_RANDOM}× random(): {target_random:.0f} ns")
    ax.axvline(target_nextval, color="#8172b2", linestyle=":", linewidth=1.5,
               label=f"target {TARGET_VS_NEXTVAL_CACHE1}× nextval() CACHE 1: "
                     f"{target_nextval:.0f} ns")
    ax.legend(loc="upper right", fontsize=8)

    pgb = results["pgbench"]
    functions = [key for key in ID_FUNCTIONS if f"{key}/1" in pgb["ids_per_second"]]
    ax = axes[0][1]
    width = 0.8 / len(pgb["clients"])
    for i, clients in enumerate(pgb["clients"]):
        stats = [pgb["ids_per_second"][f"{key}/{clients}"] for key in functions]
        med = [s["median"] / 1e6 for s in stats]
        err = [[(s["median"] - s["min"]) / 1e6 for s in stats],
               [(s["max"] - s["median"]) / 1e6 for s in stats]]
        ax.bar([x + i * width for x in range(len(functions))], med, width, yerr=err,
               capsize=2, label=sessions(clients))
    ax.set_xticks([x + width for x in range(len(functions))],
                  [SHORT[k] for k in functions], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("million IDs per second (all sessions)")
    ax.set_title("Concurrent sessions (pgbench)")
    ax.legend()

    ins = results["insert"]
    ax = axes[1][0]
    variants = [key for key, _, _ in INSERT_VARIANTS if key in ins["variants"]]
    stats = [ins["variants"][key]["seconds"] for key in variants]
    ax.bar(variants, [s["median"] for s in stats],
           yerr=[[s["median"] - s["min"] for s in stats], [s["max"] - s["median"] for s in stats]],
           capsize=3, color=["#dd8452", "#4c72b0", "#55a868", "#8172b2"][:len(variants)])
    ax.set_ylabel("seconds (median, min–max)")
    ax.set_title(f"INSERT {ins['rows']:,} rows via column default; labels: table / index MB")
    for x, key in enumerate(variants):
        v = ins["variants"][key]
        ax.text(x, v["seconds"]["median"] / 2,
                f"{v['heap_bytes']['median'] / 2**20:.0f} / "
                f"{v['index_bytes']['median'] / 2**20:.0f} MB", ha="center", color="white",
                fontweight="bold")

    lh = results["last_hour"]
    keys = [key for key, _, _ in LAST_HOUR_QUERIES if key in lh["latency_seconds"]]
    labels = {
        "snowflake_pk": f"id >= snowflake_min_id(...)\nprimary key "
                        f"({lh['pkey_bytes'] / 2**20:.0f} MB)",
        "created_at": f"created_at >= ...\nextra index "
                      f"({lh['created_at_index_bytes'] / 2**20:.0f} MB)",
        "uuidv7_pk": f"uuid id >= uuidv7 bound\nuuid primary key "
                     f"({lh.get('uuidv7_pkey_bytes', 0) / 2**20:.0f} MB)",
    }
    bars(axes[1][1], [labels[k] for k in keys],
         [lh["latency_seconds"][k] for k in keys], 1e6,
         f"'Last hour' query over {lh['rows']:,} events", "µs per query (median, min–max)",
         ["#dd8452", "#4c72b0", "#8172b2"][:len(keys)])
    fig.suptitle(f"snowflake_id benchmarks — {results['started']} — "
                 f"{results['machine']['cpus']} CPUs, load at start "
                 f"{results['machine_before']['loadavg'][0]}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


LATENCY_COLORS = {"bigserial": "#4c72b0", "control": "#9fb7dc", "snowflake": "#dd8452",
                  "uuid": "#55a868", "uuidv7": "#8172b2"}


def write_latency_chart(results, path):
    """latency.png: p50 (solid) and p99 (dashed; hollow markers where it is the max of few
    samples) per rate, one panel per synchronous_commit setting and number of clients."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    settings = results["settings"]
    syncs, clients = settings["sync"], settings["clients"]
    fig, axes = plt.subplots(len(syncs), len(clients), squeeze=False, sharey=True,
                             figsize=(6.5 * len(clients), 4.5 * len(syncs)))
    for row, setting in enumerate(syncs):
        for column, count in enumerate(clients):
            ax = axes[row][column]
            runs = [run for run in results["runs"]
                    if run["synchronous_commit"] == setting and run["clients"] == count]
            for key in results["keys"]:
                color = LATENCY_COLORS[key]
                points = [(x, run["keys"][key]) for x, run in enumerate(runs)
                          if run["keys"][key]["samples"]]
                xs = [x for x, _ in points]
                ax.plot(xs, [f["p50"] for _, f in points], "o-", color=color,
                        label=f"{LABELS[key]} p50")
                ax.plot(xs, [f["p99"] for _, f in points], "--", color=color,
                        label=f"{LABELS[key]} p99")
                for x, f in points:
                    few = f["samples"] <= FEW_SAMPLES
                    ax.plot([x], [f["p99"]], "s", color=color, zorder=3,
                            markerfacecolor="white" if few else color)
            ax.set_xticks(range(len(runs)), [rate_label(run["rate"]) for run in runs])
            ax.set_yscale("log")
            ax.set_xlabel("transactions per second in all (max: unthrottled)")
            ax.set_ylabel("ms, net of the schedule lag")
            ax.set_title(f"synchronous_commit = {setting}, {count} "
                         f"{'client' if count == 1 else 'clients'}")
            ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7, ncol=2)
    fig.suptitle(f"Single-row INSERT latency per key, PostgreSQL {results['server_version']} "
                 f"(squares: p99; hollow: of {FEW_SAMPLES} samples or fewer, the max)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
