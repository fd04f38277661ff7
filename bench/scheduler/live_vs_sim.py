#!/usr/bin/env python3
"""Live against simulated (issue 12, item 4): a dozen real training jobs on
real gandivad nodes under `gandiva scheduler`, for each policy, against the
same workload replayed by `gandiva sim`.

1. Starts --nodes gandivad nodes on this machine, --devices-per-node CPU
   devices each, with tests/integration/sched_cluster.py: each in its own
   network namespace on a bridged LAN, the scheduler talking to them over
   CURVE TCP (--netns; needs root and ip netns), or each on its own Unix
   socket and TCP port of this machine's loopback.
2. Measures each job's solo duration: the job alone through the scheduler
   (fifo) on the idle cluster, submit to end; its result is the reference.
3. Per policy, a fresh cluster and scheduler: submits the jobs at their
   seeded arrival times, waits for all, checks every job finished with the
   same result as its solo run; average JCT, makespan, utilisation and the
   scheduler's actions (its "actions:" log line at exit).
4. Writes the workload as a generic trace (arrivals, solo durations, one
   device each) and runs `gandiva sim --compare` on the same devices, with
   time constants matched to the live setup.

Prints a table and writes live_vs_sim.json (and the trace) to --out.
usage: live_vs_sim.py [--build-dir build] [--out DIR] [--scale 1] [--policies fifo,las,gandiva]
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import live_workload

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--build-dir", default=os.path.join(live_workload.ROOT, "build"))
ap.add_argument("--out", default=".")
ap.add_argument("--nodes", type=int, default=3)
ap.add_argument("--devices-per-node", type=int, default=1)
ap.add_argument("--policies", default="fifo,las,gandiva")
ap.add_argument("--scale", type=float, default=1.0, help="job lengths x this (0.3: a quick try)")
ap.add_argument("--jobs", type=int, default=12, help="only the first N arrivals")
ap.add_argument("--spread", type=float, default=40.0, help="arrivals within this many seconds")
ap.add_argument("--seed", type=int, default=7)
ap.add_argument("--interval", type=float, default=5.0, help="gandiva introspection interval, s")
ap.add_argument("--las-thresholds", default="10,40", help="las queue thresholds, GPU-s")
ap.add_argument("--pack-rate", default="measured",
                help="the sim's speed of a packed job against alone (live_workload.write_colocation): "
                     "a number, or 'measured': the mean of the rates the live gandiva run measured "
                     "in its pack trials (1.0 if it measured none)")
ap.add_argument("--sim-only", metavar="JSON",
                help="no live runs: the workload and live results of an earlier live_vs_sim.json")
ap.add_argument("--keep", action="store_true", help="keep the run directory (logs)")
ap.add_argument("--netns", action="store_true",
                help="each node in its own network namespace (needs root and ip netns)")
ARGS = ap.parse_args()

BUILD = os.path.abspath(ARGS.build_dir)
os.environ["GANDIVA_BUILD_DIR"] = BUILD  # read by the integration helpers at import
os.environ["PYTHONPATH"] = os.path.join(BUILD, "python")  # the jobs' `import gandiva`
os.environ["OMP_NUM_THREADS"] = "1"
sys.path.insert(0, os.path.join(live_workload.ROOT, "tests", "integration"))
import nodes  # noqa: E402
from sched_cluster import SchedCluster  # noqa: E402  (needs GANDIVA_BUILD_DIR)

GANDIVA = os.path.join(BUILD, "cli", "gandiva")
SLICE_MS = 100  # gandivad's default time slice
# The simulator's costs, matched to what these jobs pay on these nodes: a
# parked job resumes in about a hand-over (the policies park every job here:
# CPU devices list no memory, so every pair fits), a stopped one restarts from
# its checkpoint in about a job's start-up, and a migration of a few kB of
# state costs about a second of checkpoint, copy and restore.
SIM_COSTS = ["--slice", str(SLICE_MS / 1000), "--switch-cost", "0.002", "--park-cost", "0.1",
             "--preempt-cost", "2", "--migrate-fixed", "1", "--state-gb", "0.0001", "--no-grow"]
ACTIONS = ("launches", "resumes", "suspends", "migrations", "assigns", "packs", "unpacks",
           "checkpoints", "requeues", "failed", "resizes")
ENDED = ("finished", "failed", "cancelled")


def node_names():
    return [chr(ord("a") + i) for i in range(ARGS.nodes)]


class NetnsCluster(SchedCluster):
    """A SchedCluster whose nodes live in namespaces of a LAN it owns."""

    def __init__(self, root, names, devices):
        self.own_lan = nodes.NetnsLan(names)
        try:
            super().__init__(root, names=names, devices=devices, lan=self.own_lan)
        except BaseException:
            self.own_lan.delete()
            raise

    def stop(self):
        try:
            super().stop()
        finally:
            self.own_lan.delete()


def start_cluster(root, policy):
    kind = NetnsCluster if ARGS.netns else SchedCluster
    c = kind(root, names=node_names(), devices=f"cpu:{ARGS.devices_per_node}")
    try:
        c.start("--interval", str(ARGS.interval), "--las-thresholds", ARGS.las_thresholds,
                policy=policy)
    except BaseException:
        c.stop()
        raise
    return c


def wait_all(cluster, ids, timeout):
    """Polls the queue once a second (a CLI process per poll: the cores are scarce)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = {j["id"]: j for j in cluster.queue()["jobs"]}
        if all(jobs[i]["state"] in ENDED for i in ids):
            return jobs
        time.sleep(1.0)
    raise RuntimeError(f"jobs not ended after {timeout} s:\n{cluster.read_log()[-3000:]}")


def actions_taken(cluster):
    """The counters the scheduler logs when it stops (LogCounters)."""
    lines = re.findall(r"actions: (.*)", cluster.read_log())
    if not lines:
        return {}
    words = lines[-1].split()
    return {words[i]: int(words[i + 1]) for i in range(0, len(words) - 1, 2)}


def pack_trials_measured(cluster):
    """The rates of each pack trial the policy decided (the scheduler's
    "pack trial:" lines): [(guest rate, resident rate, kept)]."""
    found = re.findall(r"pack trial: .* ([0-9.]+) beside .* ([0-9.]+) on \d+ device\(s\): (kept|undone)",
                       cluster.read_log())
    return [(float(g), float(r), k == "kept") for g, r, k in found]


def sim_pack_rate(live):
    """--pack-rate as a number: given, or measured by the live gandiva run."""
    if ARGS.pack_rate != "measured":
        return float(ARGS.pack_rate)
    rates = [x for r in live.values() for g, h, _ in r.get("pack_trials", []) for x in (g, h)]
    return sum(rates) / len(rates) if rates else 1.0


def check(job, rec, result, reference):
    """'' when the job finished with the expected result, else why not."""
    if rec["state"] != "finished" or rec["exit_code"] != 0:
        return f"{rec['state']} (exit {rec['exit_code']}): {rec['detail']}"
    try:
        got = job.read_result(result)
    except (OSError, ValueError, KeyError) as e:
        return f"no result: {e}"
    if reference is not None and got != reference:
        return "result differs from its solo run"
    return ""


def measure_solo(jobs, root):
    """Each job alone through the scheduler on the idle cluster: submit to end."""
    cluster = start_cluster(root, "fifo")
    try:
        for job in jobs:
            result = str(root / f"{job.name}.solo.json")
            jid = cluster.submit(*job.command(result), flags=("--ranks", str(job.ranks),
                                                               "--name", job.name))
            rec = wait_all(cluster, [jid], 600)[jid]
            why = check(job, rec, result, None)
            if why:
                raise RuntimeError(f"{job.name} alone: {why}\n{cluster.read_log()[-3000:]}")
            job.solo_s = rec["end_time"] - rec["submit_time"]
            job.solo_result = job.read_result(result)
            print(f"  solo {job.name:12s} {job.solo_s:6.1f} s", flush=True)
    finally:
        cluster.stop()


def run_live(jobs, root, policy):
    cluster = start_cluster(root, policy)
    try:
        t0 = time.monotonic()
        ids = {}
        for job in sorted(jobs, key=lambda j: j.arrival_s):
            time.sleep(max(0.0, t0 + job.arrival_s - time.monotonic()))
            result = str(root / f"{job.name}.json")
            ids[job.name] = cluster.submit(*job.command(result),
                                           flags=("--ranks", str(job.ranks), "--name", job.name))
        recs = wait_all(cluster, list(ids.values()), 900)
    finally:
        cluster.stop()
    per_job, failures = [], []
    for job in jobs:
        rec = recs[ids[job.name]]
        why = check(job, rec, str(root / f"{job.name}.json"), job.solo_result)
        if why:
            failures.append(f"{job.name}: {why}")
        per_job.append({"name": job.name, "id": rec["id"], "state": rec["state"],
                        "submit": rec["submit_time"], "start": rec["start_time"],
                        "end": rec["end_time"], "jct_s": rec["end_time"] - rec["submit_time"],
                        "solo_s": job.solo_s, "attained_s": rec["attained_s"],
                        "run_time_s": rec["run_time_s"], "node": rec["node"],
                        "attempt": rec["attempt"]})
    first = min(j["submit"] for j in per_job)
    makespan = max(j["end"] for j in per_job) - first
    devices = ARGS.nodes * ARGS.devices_per_node
    return {"policy": policy, "avg_jct_s": sum(j["jct_s"] for j in per_job) / len(per_job),
            "makespan_s": makespan,
            # busy: device time the nodes measured the jobs executing (not their
            # start-up); held: time jobs were placed (packed ones count twice);
            # work: the solo durations done, against capacity, as the sim's
            # effective utilisation counts it.
            "util_busy": sum(j["attained_s"] for j in per_job) / (devices * makespan),
            "util_work": sum(j["solo_s"] for j in per_job) / (devices * makespan),
            "util_held": sum(j["run_time_s"] for j in per_job) / (devices * makespan),
            "actions": actions_taken(cluster), "pack_trials": pack_trials_measured(cluster),
            "failures": failures, "jobs": per_job}


def run_sim(jobs, out, colocation, tag):
    """`gandiva sim --compare` of the workload; its runs by policy."""
    trace = out / "live_vs_sim_trace.csv"
    live_workload.write_trace(jobs, trace)
    report = out / f"live_vs_sim_sim_{tag}.json"
    cmd = [GANDIVA, "sim", "--trace", str(trace),
           "--cluster", f"uniform:{ARGS.nodes}x{ARGS.devices_per_node}",
           "--compare", ARGS.policies, "--interval", str(ARGS.interval),
           "--las-thresholds", ARGS.las_thresholds, "--colocation", colocation,
           "--json", str(report), *SIM_COSTS]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    runs = {r["policy"]: r for r in json.loads(report.read_text())["runs"]}
    return cmd, runs


TIE = 0.03  # average JCTs this close (relative) rank as a tie


def ranking(values):
    """'a < b = c': by value, '=' where within TIE of the previous."""
    order = sorted(values, key=values.get)
    text = order[0]
    for prev, p in zip(order, order[1:]):
        text += (" = " if values[p] <= values[prev] * (1 + TIE) else " < ") + p
    return text


def same_ranking(a, b):
    """'same', 'same up to ties' (a tie on one side, an order on the other),
    or 'DIFFERENT' (some pair ordered the other way round)."""
    def order(v, p, q):
        return 0 if max(v[p], v[q]) <= min(v[p], v[q]) * (1 + TIE) else (1 if v[p] > v[q] else -1)
    pairs = [(p, q) for p in a for q in a if p < q]
    signs = [(order(a, p, q), order(b, p, q)) for p, q in pairs]
    if any(x * y < 0 for x, y in signs):
        return "DIFFERENT"
    return "same" if all(x == y for x, y in signs) else "same up to ties"


def print_table(live, sim, neutral, pack_rate):
    devices = ARGS.nodes * ARGS.devices_per_node
    print(f"\n{ARGS.nodes} nodes x {ARGS.devices_per_node} CPU device(s) = {devices} devices on "
          f"{os.cpu_count()} cores: devices contend for cores when more than {os.cpu_count()} "
          f"jobs compute at once, which the simulator does not model")
    head = (f"{'policy':8s} {'live JCT':>9s} {'sim JCT':>8s} {'sim/live':>8s} {'neutral':>8s} "
            f"{'live mk':>8s} {'sim mk':>7s} {'busy':>5s} {'work':>5s} {'sim':>5s}  "
            f"live pk/unpk/mig/susp/rsz  sim pk/unpk/mig/preempt/rsz")
    print(head)
    print("-" * len(head))
    for p, r in live.items():
        s, a = sim[p], r["actions"]
        acts = (f"{a.get('packs', 0)}/{a.get('unpacks', 0)}/{a.get('migrations', 0)}/"
                f"{a.get('suspends', 0)}/{a.get('resizes', 0)}")
        sacts = (f"{s['packs']}/{s['unpacks']}/{s['migrations']}/{s['preemptions']}/"
                 f"{s.get('resizes', 0)}")
        print(f"{p:8s} {r['avg_jct_s']:8.1f}s {s['avg_jct_s']:7.1f}s "
              f"{s['avg_jct_s'] / r['avg_jct_s']:8.2f} {neutral[p]['avg_jct_s']:7.1f}s "
              f"{r['makespan_s']:7.1f}s {s['makespan_s']:6.1f}s {r['util_busy']:5.0%} "
              f"{r['util_work']:5.0%} {s['util_effective']:5.0%}  {acts:25s}  {sacts}")
    live_jct = {p: r["avg_jct_s"] for p, r in live.items()}
    sim_jct = {p: sim[p]["avg_jct_s"] for p in live}
    live_rank, sim_rank = ranking(live_jct), ranking(sim_jct)
    print("utilisation: busy = device time the nodes measured jobs executing / capacity; work = "
          "solo durations done / capacity, as sim's effective utilisation counts it")
    print(f"sim: packed pair at {pack_rate:.3f} of alone speed each ({ARGS.pack_rate}); neutral: the simulator's "
          f"neutral model (0.5, no better than taking turns)")
    verdict = same_ranking(live_jct, sim_jct)
    print(f"ranking by average JCT ('=': within {TIE:.0%}): live {live_rank}; sim {sim_rank} "
          f"({verdict})")
    return live_rank, sim_rank, verdict


def markdown(live, sim, neutral):
    """The table for docs/scheduler.md."""
    rows = ["| policy | live avg JCT | sim avg JCT | sim / live | sim, neutral packing | "
            "live makespan | sim makespan | live util busy / work | sim util | "
            "live packs / unpacks / migrations / suspends / resizes | sim packs / unpacks / "
            "migrations / preemptions / resizes |", "| --- |" + " ---: |" * 10]
    for p, r in live.items():
        s, a = sim[p], r["actions"]
        rows.append(
            f"| {p} | {r['avg_jct_s']:.1f} s | {s['avg_jct_s']:.1f} s | "
            f"{s['avg_jct_s'] / r['avg_jct_s']:.2f} | {neutral[p]['avg_jct_s']:.1f} s | "
            f"{r['makespan_s']:.1f} s | {s['makespan_s']:.1f} s | "
            f"{r['util_busy']:.0%} / {r['util_work']:.0%} | {s['util_effective']:.0%} | "
            f"{a.get('packs', 0)} / {a.get('unpacks', 0)} / {a.get('migrations', 0)} / "
            f"{a.get('suspends', 0)} / {a.get('resizes', 0)} | {s['packs']} / {s['unpacks']} / "
            f"{s['migrations']} / {s['preemptions']} / {s.get('resizes', 0)} |")
    return "\n".join(rows) + "\n"


def run_live_phase(jobs):
    """Solo durations, then every policy live; the live results by policy."""
    work = Path(tempfile.mkdtemp(prefix="live_vs_sim."))
    try:
        print(f"solo durations ({len(jobs)} jobs, each alone through the scheduler):", flush=True)
        (work / "solo").mkdir()
        measure_solo(jobs, work / "solo")
        live = {}
        for policy in ARGS.policies.split(","):
            (work / policy).mkdir()
            live[policy] = r = run_live(jobs, work / policy, policy)
            print(f"  live {policy:8s} avg JCT {r['avg_jct_s']:6.1f} s, makespan "
                  f"{r['makespan_s']:6.1f} s, {len(r['failures'])} failures {r['failures']}",
                  flush=True)
        return live
    finally:
        if ARGS.keep:
            print(f"run directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def main():
    out = Path(ARGS.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    load_before = os.getloadavg()
    if ARGS.sim_only:
        before = json.loads(Path(ARGS.sim_only).read_text())
        jobs = [live_workload.Job(**{k: w[k] for k in ("name", "kind", "size", "ranks",
                                                        "arrival_s", "solo_s")})
                for w in before["workload"]]
        live = {p: before["live"][p] for p in ARGS.policies.split(",")}
    else:
        jobs = live_workload.make_workload(ARGS.seed, ARGS.spread, ARGS.scale)[:ARGS.jobs]
        live = run_live_phase(jobs)
    table = out / "live_vs_sim_colocation.json"
    pack_rate = sim_pack_rate(live)
    live_workload.write_colocation(table, pack_rate)
    sim_cmd, sim = run_sim(jobs, out, str(table), "model")
    _, neutral = run_sim(jobs, out, "none", "neutral")
    live_rank, sim_rank, verdict = print_table(live, sim, neutral, pack_rate)
    pick = ("avg_jct_s", "makespan_s", "util_allocated", "util_effective", "packs", "unpacks",
            "migrations", "preemptions", "time_slices", "resizes")
    doc = {"bench": "live_vs_sim", "command": sys.argv, "nodes": ARGS.nodes, "netns": ARGS.netns,
           "devices_per_node": ARGS.devices_per_node, "cores": os.cpu_count(),
           "interval_s": ARGS.interval, "las_thresholds": ARGS.las_thresholds,
           "pack_rate": pack_rate, "pack_rate_from": ARGS.pack_rate,
           "solo_measured": "each job alone through the scheduler (fifo), idle cluster",
           "workload": [{"name": j.name, "kind": j.kind, "size": j.size, "ranks": j.ranks,
                         "arrival_s": j.arrival_s, "solo_s": j.solo_s} for j in jobs],
           "live": live, "sim_command": sim_cmd,
           "sim": {p: {k: sim[p][k] for k in pick} for p in live},
           "sim_neutral": {p: {k: neutral[p][k] for k in pick} for p in live},
           "sim_over_live": {p: sim[p]["avg_jct_s"] / live[p]["avg_jct_s"] for p in live},
           "ranking": {"live": live_rank, "sim": sim_rank, "verdict": verdict},
           "loadavg_before": load_before, "loadavg_after": os.getloadavg(), "wall_s": time.monotonic() - started}
    (out / "live_vs_sim.json").write_text(json.dumps(doc, indent=1))
    (out / "live_vs_sim.md").write_text(markdown(live, sim, neutral))
    print(f"load average (1, 5, 15 min) before {load_before[0]:.1f} {load_before[1]:.1f} "
          f"{load_before[2]:.1f}, after {doc['loadavg_after'][0]:.1f} {doc['loadavg_after'][1]:.1f} "
          f"{doc['loadavg_after'][2]:.1f}: other work on the cores skews the live side only")
    print(f"wrote {out / 'live_vs_sim.json'} ({doc['wall_s']:.0f} s)")
    return 1 if any(r["failures"] for r in live.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
