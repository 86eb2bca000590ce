"""The state of the machine around the run: /proc readers, the wait for a quiet machine, the
CPU that other processes used while a benchmark phase ran, and what the machine is."""

import datetime
import os
import platform
import subprocess
import time
from collections import defaultdict
from pathlib import Path

from . import ROOT, log


def read_proc_stat(pid):
    """(comm, fields after the comm) of /proc/<pid>/stat, or None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            text = stat.read()
    except OSError:
        return None
    return text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()


def all_proc_stats():
    """(pid, comm, fields after the comm) of every process."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = read_proc_stat(entry)
            if stat is not None:
                yield (int(entry), *stat)


def cpu_ticks():
    """{pid: (comm, utime+stime)} of every process."""
    return {pid: (comm, int(fields[11]) + int(fields[12]))
            for pid, comm, fields in all_proc_stats()}


def busy_processes(seconds=2.0):
    """Processes that used more than 5% of a CPU during `seconds` (this runner excluded)."""
    hz = os.sysconf("SC_CLK_TCK")
    before = cpu_ticks()
    time.sleep(seconds)
    after = cpu_ticks()
    busy = []
    for pid, (comm, ticks) in after.items():
        if pid == os.getpid() or pid not in before:
            continue
        share = (ticks - before[pid][1]) / hz / seconds
        if share > 0.05:
            busy.append({"pid": pid, "comm": comm, "cpu": round(share, 2)})
    return sorted(busy, key=lambda item: -item["cpu"])


def other_postmasters(own_data_dir):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline and cmdline[0].endswith(b"/postgres") and b"-D" in cmdline:
            data = cmdline[cmdline.index(b"-D") + 1].decode(errors="replace")
            if Path(data).resolve() != Path(own_data_dir).resolve():
                found.append(data)
    return found


def process_cpu():
    """{pid: (comm, parent pid, CPU ticks of the process and of the children it reaped)}."""
    return {pid: (comm, int(fields[1]), sum(int(value) for value in fields[11:15]))
            for pid, comm, fields in all_proc_stats()}


class ForeignCpu:
    """CPU time that anything but this run used while a benchmark phase ran: the growth of
    utime+stime+cutime+cstime of every process alive before and after the phase, except this
    run's own (the runner, its ancestors and descendants, the cluster), plus the whole CPU time
    of processes started during the phase. Processes that started and ended within it (a
    compiler, a test) show up in the parent that reaps them. (Machine busy time
    from /proc/stat is no use here: a session that sleeps in 1 ms steps, as a throttled
    snowflake_nextval() does, makes the tick-sampled counters report the CPU as busy.)"""

    def __init__(self, cluster):
        self.cluster = cluster
        self.phases = {}

    def own_pids(self, processes):
        children = defaultdict(list)
        for pid, (_, parent, _) in processes.items():
            children[parent].append(pid)
        own, todo = set(), [os.getpid(), self.cluster.postmaster_pid()]
        while todo:
            pid = todo.pop()
            if pid not in own:
                own.add(pid)
                todo.extend(children.get(pid, []))
        pid = os.getpid()
        while pid in processes and pid > 1:  # ancestors: run.sh, the shell that started it
            own.add(pid)
            pid = processes[pid][1]
        return own

    def measure(self, name, run_phase):
        before, start = process_cpu(), time.monotonic()
        value = run_phase()
        elapsed = time.monotonic() - start
        after = process_cpu()
        own = self.own_pids(before) | self.own_pids(after)
        hz = os.sysconf("SC_CLK_TCK")
        # Processes started during the phase count whole.
        others = sorted(
            ((after[pid][2] - (before[pid][2] if pid in before else 0)) / hz, after[pid][0])
            for pid in after if pid not in own)
        self.phases[name] = {
            "seconds": round(sum(secs for secs, _ in others), 1),
            "elapsed": round(elapsed, 1),
            "top": [{"comm": comm, "seconds": round(secs, 1)}
                    for secs, comm in reversed(others[-3:]) if secs >= 0.3],
        }
        return value


def machine_state(own_data_dir):
    return {
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "loadavg": [round(value, 2) for value in os.getloadavg()],
        "busy_processes": busy_processes(),
        "other_postmasters": other_postmasters(own_data_dir),
    }


def wait_for_quiet(max_seconds, own_data_dir):
    deadline = time.monotonic() + max_seconds
    while True:
        state = machine_state(own_data_dir)
        quiet = state["loadavg"][0] < 0.5 and not state["busy_processes"]
        if quiet or time.monotonic() >= deadline:
            state["quiet"] = quiet
            return state
        log(f"machine busy (load {state['loadavg'][0]}, "
            f"{', '.join(p['comm'] for p in state['busy_processes']) or 'no busy process'}); "
            "waiting")
        time.sleep(10)


def machine_info():
    cpu = "unknown"
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    try:
        clocksource = Path(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource").read_text().strip()
    except OSError:
        clocksource = "unknown"
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "src", "sql",
                            "Cargo.toml", "Cargo.lock"],
                           capture_output=True, text=True).stdout.strip()
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "kernel": platform.release(),
        "clocksource": clocksource,
        "commit": commit + (" (with uncommitted changes in src/ or sql/)" if dirty else ""),
    }
