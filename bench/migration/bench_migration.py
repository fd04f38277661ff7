#!/usr/bin/python3
"""bench_migration: downtime and throughput of `gandiva migrate` for synthetic
states of 64 MiB .. 2 GiB between two gandivad on loopback, against the copy
floor measured in the same run (transfer_floor: memcpy, a Unix socket hop, plain
TCP over 127.0.0.1 — the floor of the goal —, the sealed bulk channel, raw
ZeroMQ without and with CURVE).

For each size, --repeat times (3), so that the floor and the migrations see
the same moments of a shared machine:
  1. transfer_floor --mib N (before any job holds memory);
  2. the job under `gandiva run` on node a, migrated to b after a few hundred
     iterations; it finishes on b, and its checksum must equal that of
  3. synthetic_state_job --mib N run once unmanaged, for as many iterations:
     every iteration ran exactly once, the state arrived intact;
  4. at --frozen-sizes (1 GiB), 2 and 3 again for a job whose state is half
     frozen (--frozen): b's warm copy holds that half already, and only the
     trained half crosses.
A row gives the best and the median of the repetitions, for the downtime and
for each floor path alike, and the ratio of each to plain TCP; the JSON keeps
every repetition. The goal is met when both ratios are within it: noise here
only ever slows a transfer down, and one figure against the other's best (as
this bench compared until 2026-11-27) weighed it against the migration.
The job appends save/load/resume times (CLOCK_MONOTONIC, gandivad's clock) to a
timing file, which splits each downtime into its phases:

  park->save      source parked -> its save function called (the controller
                  listens, asks for the state, tells b to begin; the source
                  job takes the bulk connection and reads the list of chunks
                  b's warm copy holds already)
  stream          save called -> the stream is in and loading: the source job
                  writes its state into sealed frames (AES-256-GCM) on the
                  bulk connection, naming the chunks b holds instead of sending
                  them; b's job checks each frame and chunk as it arrives.
                  A load function that reads before it asks its section's
                  size runs during the stream, and each whole chunk it reads
                  is received straight into its memory; one that asks the
                  size first (--layout functions-sized) starts after the
                  section is in, with the chunks in the copy's own memory.
                  Ends at the later of the source's last write and b's
                  load function called.
  load            the rest of b's load past the stream (gd_read: copies out
                  of the received chunks, if any)
  switch          load done -> downtime end: commit reply, the source killed,
                  b released and running

Nodes a and b each get a private ipc endpoint, a CURVE-authenticated TCP port
and keys from `gandiva keygen`, all under one temporary directory.

  /usr/bin/python3 bench/migration/bench_migration.py --build-dir build --out /tmp/mig
"""

import argparse
import itertools
import json
import os
import statistics
import shutil
import socket
import subprocess
import sys
import tempfile
import time

SIZES_MIB = [64, 256, 1024, 2048]
GOAL_SIZE_MIB, GOAL_DOWNTIME_MS, GOAL_RATIO = 1024, 1000.0, 1.5
RUNS = itertools.count(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    """One gandivad: node name, ipc endpoint, CURVE TCP endpoint, key pair."""

    def __init__(self, build, root, name):
        self.build, self.name = build, name
        self.gandiva = os.path.join(build, "cli", "gandiva")
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir)
        self.endpoint = f"ipc://{self.dir}/gd.sock"
        self.tcp = f"tcp://127.0.0.1:{free_port()}"
        keys = os.path.join(root, "keys")
        subprocess.run([self.gandiva, "keygen", "--out", keys, "--name", name], check=True,
                       capture_output=True)
        self.key = os.path.join(keys, f"{name}.key")
        with open(os.path.join(keys, f"{name}.pub")) as f:
            self.public = f.read().strip()
        self.env = dict(os.environ, GANDIVA_ENDPOINT=self.endpoint, OMP_NUM_THREADS="1")
        self.proc = None

    def start(self, others):
        authorized = os.path.join(self.dir, "authorized")
        peers = os.path.join(self.dir, "peers")
        with open(authorized, "w") as f:
            f.write("".join(f"{o.public}\n" for o in [self, *others]))
        with open(peers, "w") as f:
            f.write("".join(f"{o.name} {o.tcp} {o.public}\n" for o in others))
        self.log_path = os.path.join(self.dir, "gandivad.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [os.path.join(self.build, "node", "gandivad"), "--node", self.name, "--devices", "cpu:1",
             "--endpoint", self.endpoint, "--tcp", self.tcp, "--key", self.key,
             "--authorized-keys", authorized, "--peers", peers, "--peer-timeout-ms", "10000"],
            stdout=self.log, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + 10
        while not os.path.exists(os.path.join(self.dir, "gd.sock")):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"gandivad {self.name} did not come up:\n{open(self.log_path).read()}")
            time.sleep(0.02)

    def cli(self, *args, timeout=300):
        r = subprocess.run([self.gandiva, *args], env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"gandiva {' '.join(args)} on {self.name}: {r.stderr.strip()}")
        return r.stdout

    def job(self, job_id):
        jobs = json.loads(self.cli("ps", "--all", "--json"))
        return next((j for j in jobs if j["id"] == job_id), None)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log.close()


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = predicate()
        if v:
            return v
        time.sleep(0.05)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


def job_cmd(job, mib, iterations, result, timing=None, frozen=0.0):
    """`job`: synthetic_state_job and the arguments every run of it shares."""
    cmd = [*job, "--mib", str(mib), "--seed", "7", "--iterations", str(iterations),
           "--result", result, "--frozen-fraction", str(frozen)]
    return cmd + (["--timing", timing] if timing else [])


def read_timing(path):
    """{event: [(pid, ns), ...]} from the job's timing file."""
    events = {}
    with open(path) as f:
        for line in f:
            what, pid, ns = line.split()
            events.setdefault(what, []).append((int(pid), int(ns)))
    return events


def phases(events, downtime_ms):
    """Splits one migration's downtime (ms) by the job's own timestamps."""
    one = lambda k: events[k][-1][1] if k in events else None  # noqa: E731
    parked, save_begin, save_end = one("boundary"), one("save_begin"), one("save_end")
    load_begin, load_end, resume = one("load_begin"), one("load_end"), one("resume")
    if None in (parked, save_begin, save_end, load_begin, load_end, resume):
        return {}
    ms = lambda a, b: round((b - a) / 1e6, 1)  # noqa: E731
    end = parked + downtime_ms * 1e6
    stream_end = max(load_begin, save_end)
    return {"park_to_save_ms": ms(parked, save_begin), "save_ms": ms(save_begin, save_end),
            "save_end_to_load_ms": ms(save_end, load_begin), "stream_ms": ms(save_begin, stream_end),
            "load_ms": ms(stream_end, load_end), "load_to_resume_ms": ms(load_end, resume),
            "switch_ms": ms(load_end, end), "resume_before_downtime_end_ms": ms(resume, end)}


def run_floor(build, mib, repeat):
    exe = os.path.join(build, "bench", "migration", "transfer_floor")
    out = subprocess.run([exe, "--mib", str(mib), "--repeat", str(repeat), "--json"], check=True,
                         capture_output=True, text=True, timeout=600).stdout
    return json.loads(out)


class EndedBeforeMigration(Exception):
    """The job ran all its iterations on a before the migration took it: the
    machine got slower than the calibration run said (other work started)."""


def iterations_for(job, mib, work, warm_iterations, margin):
    """How many iterations the job runs, sized from a short calibration run on
    this machine, now: the job must still be running on a after it reached
    `warm_iterations` and b started and warmed its copy (which initialises N
    MiB, measures its state and reserves N MiB of receive memory: about two of
    the calibration's start-ups), with `margin` such start-ups for a loaded
    machine. Returns (iterations, the calibration's figures)."""
    result = os.path.join(work, f"calibrate-{mib}.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GANDIVA_")}
    t0 = time.monotonic()
    subprocess.run(job_cmd(job, mib, 200, result), check=True, env=env,
                   capture_output=True, timeout=600)
    wall = time.monotonic() - t0
    with open(result) as f:
        loop_s = json.load(f)["elapsed_s"]
    startup_s, iteration_s = max(wall - loop_s, 0.1), max(loop_s / 200, 1e-4)
    iterations = warm_iterations + int(margin * startup_s / iteration_s) + 1000
    return iterations, {"startup_s": round(startup_s, 3), "iteration_ms": round(iteration_s * 1e3, 3),
                        "margin_startups": margin, "iterations": iterations}


def reference_run(job, mib, iterations, work, frozen):
    """The job run once, unmanaged and never moved: the checksum to match."""
    result = os.path.join(work, f"reference-{mib}.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GANDIVA_")}
    subprocess.run(job_cmd(job, mib, iterations, result, frozen=frozen), check=True, env=env,
                   capture_output=True, timeout=600)
    with open(result) as f:
        return json.load(f)


def migrate_once(a, b, job, mib, iterations, work, warm_iterations, frozen):
    result = os.path.join(work, f"migrated-{mib}.json")
    timing = os.path.join(work, f"timing-{mib}.txt")
    for p in (result, timing):
        if os.path.exists(p):
            os.unlink(p)
    # A name per run: `ps --all` still lists an earlier try's job.
    name = f"synthetic-{mib}-{next(RUNS)}"
    run = subprocess.Popen([a.gandiva, "run", "--name", name, "--",
                            *job_cmd(job, mib, iterations, result, timing, frozen)],
                           env=a.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Deadlines for a busy machine: starting a job initialises N MiB.
        job = wait_for(lambda: next((j for j in json.loads(a.cli("ps", "--all", "--json"))
                                     if j["name"] == name), None), 300, "the job on a")
        wait_for(lambda: a.job(job["id"])["iterations"] >= warm_iterations
                 or a.job(job["id"])["state"] in ("exited", "failed"), 300, "iterations on a")
        t0 = time.monotonic()
        try:
            op = json.loads(a.cli("migrate", str(job["id"]), "--to", b.name, "--json"))
        except RuntimeError as e:
            op = {"state": "failed", "error": str(e)}
        wall = time.monotonic() - t0
        if op["state"] != "done":
            # Whether the job had simply finished on a first (the run was too
            # short for this machine now), or the migration itself failed.
            # A job that ended is seen ended at once; 10 s covers a slow monitor.
            deadline = time.monotonic() + 10
            while (a.job(job["id"])["state"] not in ("exited", "failed", "migrated")
                   and time.monotonic() < deadline):
                time.sleep(0.05)
            if a.job(job["id"])["state"] == "exited":
                raise EndedBeforeMigration(f"{iterations} iterations: {op}")
            raise RuntimeError(f"migration of {mib} MiB failed: {op}")
        run.wait(timeout=300)
        wait_for(lambda: b.job(op["to_job"])["state"] in ("exited", "failed"), 300, "the job to end on b")
        if b.job(op["to_job"])["state"] != "exited":
            raise RuntimeError(f"the {mib} MiB job failed on b")
        with open(result) as f:
            res = json.load(f)
        return op, wall, res, read_timing(timing)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


def measure(a, b, build, job, root, mib, frozen, floor, args):
    """One state size and frozen fraction: a reference run, one migration; its row."""
    load_before = os.getloadavg()[0]
    warm_iterations = 300
    # Sized from the iteration rate measured now; should other work slow the
    # machine down after that, the job may still end before it moves: then
    # again, longer (the reference run comes after, for the count that moved).
    margin, tries = args.margin_startups, []
    while True:
        iterations, calibration = iterations_for(job, mib, root, warm_iterations, margin)
        tries.append(calibration)
        try:
            op, wall, res, events = migrate_once(a, b, job, mib, iterations, root,
                                                 warm_iterations, frozen)
            break
        except EndedBeforeMigration as e:
            if len(tries) == 4:
                raise RuntimeError(f"{mib} MiB: the job ended before the migration {len(tries)} times: {e}")
            margin = max(margin * 4, 6)
            print(f"  {mib} MiB: the job ended on a before it moved ({e}); again with "
                  f"{margin} start-ups of margin", flush=True)
    ref = reference_run(job, mib, iterations, root, frozen)
    if res["checksum"] != ref["checksum"] or res["iterations"] != iterations:
        raise RuntimeError(f"{mib} MiB: migrated checksum {res['checksum']} != reference "
                           f"{ref['checksum']} (iterations {res['iterations']})")
    if not 0 < res["restored_at_iteration"] < iterations:
        raise RuntimeError(f"{mib} MiB: job on b restored at iteration {res['restored_at_iteration']}")
    down = op["downtime_ms"]
    best = lambda path: floor[path]["best_ms"] if floor else float("nan")  # noqa: E731
    row = {
        "mib": mib, "frozen_fraction": frozen, "bytes_sent": op["bytes"],
        "downtime_ms": round(down, 1),
        "throughput_gbps": round(mib * 2**20 / (down / 1e3) / 1e9, 3),
        "memcpy_warm_ms": best("memcpy_warm"), "memcpy_fresh_ms": best("memcpy_fresh"),
        "unix_socket_ms": best("unix_socket"),
        "tcp_plain_ms": best("tcp_plain"), "tcp_sealed_ms": best("tcp_sealed"),
        "zmq_plain_ms": best("zmq_tcp"), "zmq_curve_ms": best("zmq_tcp_curve"),
        "ratio_downtime_to_tcp_plain": round(down / best("tcp_plain"), 2),
        "loadavg_1m_before": load_before,
        "migrate_command_s": round(wall, 3), "operation_s": op.get("duration_s"),
        "restored_at_iteration": res["restored_at_iteration"], "iterations": iterations,
        "sizing": tries,
        "checksum": res["checksum"], "checksum_matches_reference": True,
        "phases_ms": phases(events, down), "floor": floor}
    print(f"  {mib} MiB ({frozen:g} frozen): downtime {down:.1f} ms, {op['bytes'] / 2**20:.1f} MiB "
          f"sent, checksum ok, phases {row['phases_ms']}", flush=True)
    return row


FLOOR_COLUMNS = ("memcpy_warm_ms", "memcpy_fresh_ms", "unix_socket_ms", "tcp_plain_ms",
                 "tcp_sealed_ms", "zmq_plain_ms", "zmq_curve_ms")


def summarize(reps):
    """One size and frozen fraction over its repetitions: the best and the
    median downtime and floor, the ratio of each; the best migration's details."""
    downs = [r["downtime_ms"] for r in reps]
    row = dict(min(reps, key=lambda r: r["downtime_ms"]))  # its downtime_ms is the best
    for col in FLOOR_COLUMNS:
        values = [r[col] for r in reps]
        row[col] = min(values)
        row[col.replace("_ms", "_median_ms")] = round(statistics.median(values), 1)
    row["downtime_median_ms"] = round(statistics.median(downs), 1)
    row["downtimes_ms"] = downs
    row["throughput_gbps"] = round(row["mib"] * 2**20 / (row["downtime_ms"] / 1e3) / 1e9, 3)
    row["ratio_downtime_to_tcp_plain"] = round(row["downtime_ms"] / row["tcp_plain_ms"], 2)
    row["ratio_median_downtime_to_tcp_plain"] = round(
        row["downtime_median_ms"] / row["tcp_plain_median_ms"], 2)
    row["repetitions"] = reps
    return row


def print_tables(rows):
    print()
    print("best and median of the repetitions (downtime and floor alike), ms")
    print(f"{'size':>8} {'frozen':>6} {'sent MiB':>9} {'downtime':>9} {'median':>7} {'GB/s':>6} "
          f"{'memcpy':>7} {'unix':>6} {'tcp':>6} {'median':>7} {'sealed':>7} {'curve':>7} "
          f"{'down/tcp':>9} {'median':>7}")
    for r in rows:
        print(f"{r['mib']:>5} MiB {r['frozen_fraction']:>6g} {r['bytes_sent'] / 2**20:>9.1f} "
              f"{r['downtime_ms']:>9.1f} {r['downtime_median_ms']:>7.1f} {r['throughput_gbps']:>6.2f} "
              f"{r['memcpy_warm_ms']:>7.1f} {r['unix_socket_ms']:>6.1f} {r['tcp_plain_ms']:>6.1f} "
              f"{r['tcp_plain_median_ms']:>7.1f} {r['tcp_sealed_ms']:>7.1f} {r['zmq_curve_ms']:>7.1f} "
              f"{r['ratio_downtime_to_tcp_plain']:>9.2f} {r['ratio_median_downtime_to_tcp_plain']:>7.2f}")
    print()
    print("each repetition: downtime / plain TCP of the floor run just before it, ms")
    for r in rows:
        pairs = ", ".join(f"{x['downtime_ms']:.0f}/{x['tcp_plain_ms']:.0f}" for x in r["repetitions"])
        print(f"{r['mib']:>5} MiB {r['frozen_fraction']:>6g}  {pairs}")
    print()
    print(f"{'size':>8} {'frozen':>6} {'park->save':>11} {'stream':>8} {'(save)':>8} {'load':>7} "
          f"{'switch':>7}   ms")
    for r in rows:
        p = r["phases_ms"]
        if p:
            print(f"{r['mib']:>5} MiB {r['frozen_fraction']:>6g} {p['park_to_save_ms']:>11.1f} {p['stream_ms']:>8.1f} "
                  f"{p['save_ms']:>8.1f} {p['load_ms']:>7.1f} {p['switch_ms']:>7.1f}")


def goal_verdict(rows):
    """Whether the 1 GiB migration met the goal (None if 1 GiB was not measured)."""
    goal = next((r for r in rows if r["mib"] == GOAL_SIZE_MIB and r["frozen_fraction"] == 0), None)
    if not goal:
        return None
    ratio, ratio_median = goal["ratio_downtime_to_tcp_plain"], goal["ratio_median_downtime_to_tcp_plain"]
    verdict = {"size_mib": GOAL_SIZE_MIB, "repetitions": len(goal["repetitions"]),
               "downtime_ms": goal["downtime_ms"], "tcp_plain_ms": goal["tcp_plain_ms"],
               "ratio_to_tcp_plain": ratio,
               "downtime_median_ms": goal["downtime_median_ms"],
               "tcp_plain_median_ms": goal["tcp_plain_median_ms"],
               "ratio_median_to_tcp_plain": ratio_median,
               "met": (goal["downtime_median_ms"] <= GOAL_DOWNTIME_MS and ratio <= GOAL_RATIO
                       and ratio_median <= GOAL_RATIO)}
    print(f"\ngoal (1 GiB: downtime <= {GOAL_DOWNTIME_MS:.0f} ms and <= {GOAL_RATIO}x the plain TCP "
          f"transfer, best and median of {verdict['repetitions']} alike): "
          f"{'met' if verdict['met'] else 'MISSED'} (best {goal['downtime_ms']:.0f} ms, plain TCP "
          f"{goal['tcp_plain_ms']:.0f} ms, {ratio:.2f}x; median {goal['downtime_median_ms']:.0f} ms, "
          f"plain TCP {goal['tcp_plain_median_ms']:.0f} ms, {ratio_median:.2f}x)")
    return verdict


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--out", default=".", help="directory for bench_migration.json")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES_MIB)), help="state sizes in MiB")
    ap.add_argument("--frozen", default="0.5",
                    help="also migrate, at --frozen-sizes, jobs with these fractions of their state "
                         "as it started (held by the warm copy, not sent); empty for none")
    ap.add_argument("--frozen-sizes", default=str(GOAL_SIZE_MIB), help="sizes (MiB) for --frozen")
    ap.add_argument("--repeat", type=int, default=3,
                    help="floor runs and migrations per size, alternating (best and median reported)")
    ap.add_argument("--floor-repeat", type=int, default=1,
                    help="transfer_floor runs per path in each repetition (best taken)")
    ap.add_argument("--margin-startups", type=float, default=6,
                    help="the job runs on for this many calibration start-ups after the warm "
                         "iterations (x4, at least 6, on each retry, if it still ended before it moved)")
    ap.add_argument("--skip-floor", action="store_true", help="migrations only (e.g. under perf record)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (logs)")
    ap.add_argument("--layout", choices=("functions", "functions-sized", "buffer"),
                    default="functions",
                    help="the job's bytes behind save and load functions (default: its load "
                         "reads, then checks the size), the same with a load that asks the "
                         "section's size first (the arriving section is then read whole "
                         "before it loads), or a gd_register_buffer section, received in place")
    args = ap.parse_args()
    build = os.path.abspath(args.build_dir)
    sizes = [int(s) for s in args.sizes.split(",")]
    job_exe = os.path.join(build, "bench", "migration", "synthetic_state_job")
    for exe in (job_exe, os.path.join(build, "bench", "migration", "transfer_floor"),
                os.path.join(build, "node", "gandivad"), os.path.join(build, "cli", "gandiva")):
        if not os.path.exists(exe):
            sys.exit(f"bench_migration: {exe} not built (cmake --build {args.build_dir} --target "
                     "gandivad gandiva_cli synthetic_state_job transfer_floor)")
    job = [job_exe, "--layout", args.layout]
    os.makedirs(args.out, exist_ok=True)
    root = tempfile.mkdtemp(prefix="gd-migbench-")
    os.makedirs(os.path.join(root, "keys"))
    a, b = Node(build, root, "a"), Node(build, root, "b")
    rows = []
    started = time.monotonic()
    try:
        a.start([b])
        b.start([a])
        frozen = [float(f) for f in args.frozen.split(",") if f]
        frozen_sizes = {int(s) for s in args.frozen_sizes.split(",") if s}
        for mib in sizes:
            fractions = [0.0] + (frozen if mib in frozen_sizes else [])
            reps = {fraction: [] for fraction in fractions}
            for _ in range(args.repeat):
                floor = None if args.skip_floor else run_floor(build, mib, args.floor_repeat)
                for fraction in fractions:
                    reps[fraction].append(measure(a, b, build, job, root, mib, fraction, floor, args))
            rows.extend(summarize(reps[fraction]) for fraction in fractions)
    finally:
        a.stop()
        b.stop()
        if args.keep:
            print(f"logs kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)

    print_tables(rows)
    verdict = goal_verdict(rows)
    out = os.path.join(args.out, "bench_migration.json")
    with open(out, "w") as f:
        json.dump({"bench": "migration", "layout": args.layout, "host": os.uname().nodename, "cpus": os.cpu_count(),
                   "wall_s": round(time.monotonic() - started, 1), "goal": verdict,
                   "sizes": json.loads(json.dumps(rows).replace("NaN", "null"))}, f, indent=2)
    print(f"wrote {out} ({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
