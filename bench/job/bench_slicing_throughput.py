#!/usr/bin/python3
"""bench_slicing_throughput: throughput lost when two real training jobs share one
device in time slices, against each job running alone, measured in the same run.

Starts its own gandivad (one cpu device, private ipc endpoint), starts the PyTorch
CNN (examples/pytorch/train_cnn.py) and the libtorch MLP (train_mlp) under
`gandiva run`, with their default thread settings, and keeps both processes for the whole
run, so every configuration sees the same warm processes:

  alone A, alone B   the other job held (parked at a boundary, sleeping)
  sliced at 50, 100, 250 ms

in several rounds of short windows, so that each sliced window is compared
with alone rates measured seconds before it (the load of a shared machine
drifts); the figure reported is the median over rounds.

Each configuration is a window of wall time in which both jobs' iteration
counters (read from gandivad, i.e. from the jobs' own profile rings) are sampled
at the start and end. Then

  lost = 1 - (n_A / rate_A_alone + n_B / rate_B_alone) / wall_sliced

Prints a table and writes bench_slicing_throughput.json. Run with an interpreter
that has torch and the built gandiva package (Debian's /usr/bin/python3):

  /usr/bin/python3 bench/job/bench_slicing_throughput.py --build-dir build --out /tmp
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_node import job_env, start_gandivad  # noqa: E402


def cmake_cache(build_dir):
    values = {}
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            for line in f:
                if "=" in line and ":" in line.split("=", 1)[0]:
                    key, value = line.rstrip("\n").split("=", 1)
                    values[key.split(":", 1)[0]] = value
    except OSError:
        pass
    return values


def percentile(values, q):
    if not values:
        return 0.0
    v = sorted(values)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]


class Bench:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build_dir)
        cache = cmake_cache(self.build)
        self.source = args.source_dir or cache.get("CMAKE_HOME_DIRECTORY") or os.path.abspath(
            os.path.join(os.path.dirname(__file__), "..", ".."))
        self.python = args.python or cache.get("Python3_EXECUTABLE") or sys.executable
        self.cli = os.path.join(self.build, "cli", "gandiva")
        self.mlp = os.path.join(self.build, "examples", "train_mlp")
        self.cnn = os.path.join(self.source, "examples", "pytorch", "train_cnn.py")
        for path in (self.cli, self.mlp, self.cnn):
            if not os.path.exists(path):
                sys.exit(f"bench_slicing_throughput: missing {path} (build first)")
        sys.path.insert(0, os.path.join(self.build, "python"))
        import gandiva  # noqa: E402  (the freshly built package)
        self.gandiva = gandiva
        self.tmp = tempfile.mkdtemp(prefix="gd-bench-")
        self.endpoint = f"ipc://{self.tmp}/gd.sock"
        self.procs = []
        self.daemon = None
        self.client = None

    # ---------------------------------------------------------------- processes

    def env(self):
        return job_env(self.build, self.endpoint)

    def start_daemon(self):
        self.client = self.gandiva.Client(self.endpoint, timeout_ms=2000)
        self.daemon = start_gandivad(
            [self.cli, "daemon", "--devices", "cpu:1", "--slice-ms", "100", "--endpoint", self.endpoint],
            os.path.join(self.tmp, "gandivad.log"), self.env(), self.client.hello)

    def start_job(self, name, cmd):
        log = open(os.path.join(self.tmp, f"{name}.log"), "w")
        proc = subprocess.Popen(
            [self.cli, "run", "--endpoint", self.endpoint, "--name", name, "--device", "cpu0", "--"] + cmd,
            stdout=log, stderr=subprocess.STDOUT, env=self.env())
        self.procs.append(proc)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for job in self.client.jobs():
                if job["name"] == name:
                    return job["id"]
            time.sleep(0.1)
        raise RuntimeError(f"job {name} never registered; see {log.name}")

    def stop_all(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)  # `gandiva run` forwards it to the job
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        if self.daemon and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.daemon.kill()

    # ---------------------------------------------------------------- measuring

    def iterations(self):
        return {job["id"]: job["iterations"] for job in self.client.jobs()}

    def wait_iterations(self, ids, at_least, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            its = self.iterations()
            if all(its.get(i, 0) >= at_least for i in ids):
                return
            time.sleep(0.1)
        raise RuntimeError("jobs made no progress")

    def window(self, seconds):
        """Iterations per job and wall time over `seconds`."""
        before, t0 = self.iterations(), time.monotonic()
        time.sleep(seconds)
        after, t1 = self.iterations(), time.monotonic()
        return {i: after[i] - before[i] for i in after}, t1 - t0, t0, t1

    def alone(self, run, held, seconds):
        self.client.suspend(held)
        time.sleep(self.args.settle)  # let the held job park and the other one run on
        n, wall, _, _ = self.window(seconds)
        self.client.resume(held)
        return n[run], wall

    def sliced(self, ms, seconds):
        self.client.set_slice("cpu0", ms)
        time.sleep(self.args.settle)
        n, wall, t0, t1 = self.window(seconds)
        return n, wall, self.switches_between(t0, t1)

    def switches_between(self, t0_s, t1_s):
        # gandivad timestamps switches with CLOCK_MONOTONIC, as time.monotonic() is.
        return [s["handover_ms"] for s in self.client.switches(limit=100000) if t0_s <= s["at_s"] <= t1_s]

    def run(self):
        self.start_daemon()
        a = self.start_job("cnn", [self.python, self.cnn, "--iterations", "100000000"])
        b = self.start_job("mlp", [self.mlp, "--iterations", "100000000"])
        names = {a: "train_cnn.py", b: "train_mlp"}
        self.wait_iterations([a, b], 5)
        time.sleep(self.args.settle)
        self.report(self.measure_rounds(a, b, names), a, b, names)

    def measure_rounds(self, a, b, names):
        """Rounds of short windows, alone and sliced side by side: on a machine
        others load too, the rate alone drifts by tens of percent within a
        minute, so each round compares configurations seconds apart and the
        result is the median over rounds (pooled figures are in the JSON too)."""
        rounds = []
        for r in range(self.args.rounds):
            rnd = {"alone": {}, "sliced": {}}
            for run, held in ((a, b), (b, a)):
                n, wall = self.alone(run, held, self.args.window)
                rnd["alone"][run] = (n, wall)
            for ms in self.args.slices:
                rnd["sliced"][ms] = self.sliced(ms, self.args.window)
            rounds.append(rnd)
            rates = ", ".join(f"{names[j]} {n / wall:.1f} it/s" for j, (n, wall) in rnd["alone"].items())
            print(f"  round {r + 1}/{self.args.rounds}: alone {rates}", flush=True)
        return rounds

    def report(self, rounds, a, b, names):
        """Prints the table and writes bench_slicing_throughput.json."""
        w = self.args.window
        pooled_rate = {j: sum(rd["alone"][j][0] for rd in rounds) / sum(rd["alone"][j][1] for rd in rounds)
                       for j in (a, b)}
        jobs_info = {job["id"]: job for job in self.client.jobs()}
        result = {
            "bench": "slicing_throughput",
            "driver": "gandivad (--devices cpu:1) on a private ipc endpoint; jobs under `gandiva run`",
            "machine_cpus": os.cpu_count(),
            "rounds": self.args.rounds,
            "window_s": w,
            "jobs": {names[j]: {"rate_alone_it_per_s": pooled_rate[j],
                                "rate_alone_per_round": [rd["alone"][j][0] / rd["alone"][j][1] for rd in rounds],
                                "mean_ms": jobs_info[j]["mean_ms"]} for j in (a, b)},
            "configs": [],
        }
        print(f"bench_slicing_throughput: {names[a]} (A) and {names[b]} (B), default threads, one cpu device, "
              f"{self.args.rounds} rounds of {w:g} s windows")
        for j in (a, b):
            print(f"  {names[j]:<13} alone: {pooled_rate[j]:8.1f} it/s pooled")
        print(f"{'slice ms':>8} {'it A':>6} {'it B':>6} {'share A':>8} {'switches':>8} "
              f"{'handover med/p99 ms':>20} {'idle %':>7} {'lost % median':>14} {'min..max':>16} {'pooled':>7}")
        for ms in self.args.slices:
            c = slice_config(ms, rounds, a, b, names, pooled_rate)
            result["configs"].append(c)
            per_round, tot_n = c["throughput_lost_per_round"], c["iterations"]
            spread = f"{100 * min(per_round):.1f}..{100 * max(per_round):.1f}"
            print(f"{ms:>8} {tot_n[names[a]]:>6} {tot_n[names[b]]:>6} {c['share_of_device_a']:>8.2f} "
                  f"{c['switches']:>8} {c['handover_median_ms']:>9.3f}/{c['handover_p99_ms']:<9.3f} "
                  f"{100 * c['handover_idle_fraction']:>7.3f} {100 * c['throughput_lost_median']:>14.2f} "
                  f"{spread:>16} {100 * c['throughput_lost_pooled']:>7.2f}")
        print("idle %: summed handover time / wall (device idle between jobs); goal: lost <= 1 % at 100 ms")
        os.makedirs(self.args.out, exist_ok=True)
        path = os.path.join(self.args.out, "bench_slicing_throughput.json")
        with open(path, "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {path}")


def slice_config(ms, rounds, a, b, names, pooled_rate):
    """One slice length's figures over all rounds: throughput lost against the
    jobs' rates alone, per round and pooled, the device share, the handovers."""
    def lost(n, wall, rate):
        return 1 - (n[a] / rate[a] + n[b] / rate[b]) / wall

    per_round, handover = [], []
    tot_n, tot_wall = {a: 0, b: 0}, 0.0
    for rd in rounds:
        n, wall, h = rd["sliced"][ms]
        rate = {j: rd["alone"][j][0] / rd["alone"][j][1] for j in (a, b)}
        per_round.append(lost(n, wall, rate))
        handover += h
        tot_wall += wall
        for j in (a, b):
            tot_n[j] += n[j]
    work_a = tot_n[a] / pooled_rate[a]
    return {"slice_ms": ms, "wall_s": tot_wall,
            "iterations": {names[a]: tot_n[a], names[b]: tot_n[b]},
            "share_of_device_a": work_a / (work_a + tot_n[b] / pooled_rate[b]), "switches": len(handover),
            "handover_median_ms": statistics.median(handover) if handover else 0.0,
            "handover_p99_ms": percentile(handover, 0.99),
            "throughput_lost_median": statistics.median(per_round),
            "throughput_lost_per_round": per_round,
            "throughput_lost_pooled": lost(tot_n, tot_wall, pooled_rate),
            # The part of the loss no machine load can hide: the device idle
            # between one job parking and the next running.
            "handover_idle_fraction": sum(handover) / 1e3 / tot_wall}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.environ.get("GANDIVA_BUILD_DIR", "build"))
    ap.add_argument("--source-dir", help="repository root (default: from the build's CMakeCache)")
    ap.add_argument("--python", help="interpreter for train_cnn.py (default: the build's Python3)")
    ap.add_argument("--out", default=".", help="directory for the JSON result")
    ap.add_argument("--slices", type=lambda s: [int(x) for x in s.split(",")], default=[50, 100, 250])
    ap.add_argument("--rounds", type=int, default=6, help="rounds of alone A, alone B, each slice")
    ap.add_argument("--window", type=float, default=4, help="seconds measured per configuration and round")
    ap.add_argument("--settle", type=float, default=0.5, help="pause after each change")
    args = ap.parse_args()
    bench = Bench(args)
    try:
        bench.run()
    finally:
        bench.stop_all()


if __name__ == "__main__":
    main()
