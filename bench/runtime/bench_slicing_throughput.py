#!/usr/bin/python3
"""bench_slicing_throughput: throughput lost when two real training jobs share one
device in time slices, against each job running alone, measured in the same run.

Starts its own gandivad (one cpu device, private ipc endpoint), starts the PyTorch
CNN (examples/pytorch/train_cnn.py) and the libtorch MLP (train_mlp) under
`gandiva run`, one intra-op thread each, and keeps both processes for the whole
run, so every configuration sees the same warm processes:

  alone A, alone B   the other job held (parked at a boundary, sleeping)
  sliced at 50, 100, 250 ms
  alone A, alone B   again: the alone rates are the mean over both brackets,
                     which evens out drift in the load of a shared machine

Each configuration is a window of wall time in which both jobs' iteration
counters (read from gandivad, i.e. from the jobs' own profile rings) are sampled
at the start and end. Then

  lost = 1 - (n_A / rate_A_alone + n_B / rate_B_alone) / wall_sliced

Prints a table and writes bench_slicing_throughput.json. Run with an interpreter
that has torch and the built gandiva package (Debian's /usr/bin/python3):

  /usr/bin/python3 bench/runtime/bench_slicing_throughput.py --build-dir build --out /tmp
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
        env = dict(os.environ)
        env["GANDIVA_ENDPOINT"] = self.endpoint
        # One core's worth each: the comparison is about slicing, not threading.
        env["OMP_NUM_THREADS"] = "1"
        env["MKL_NUM_THREADS"] = "1"
        return env

    def start_daemon(self):
        log = open(os.path.join(self.tmp, "gandivad.log"), "w")
        self.daemon = subprocess.Popen(
            [self.cli, "daemon", "--devices", "cpu:1", "--slice-ms", "100", "--endpoint", self.endpoint],
            stdout=log, stderr=subprocess.STDOUT, env=self.env())
        self.client = self.gandiva.Client(self.endpoint, timeout_ms=2000)
        deadline = time.monotonic() + 15
        while True:
            try:
                self.client.hello()
                return
            except Exception:
                if self.daemon.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"gandivad did not come up; see {log.name}")
                time.sleep(0.1)

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

    def switches_between(self, t0_s, t1_s):
        # gandivad timestamps switches with CLOCK_MONOTONIC, as time.monotonic() is.
        return [s["handover_ms"] for s in self.client.switches(limit=100000) if t0_s <= s["at_s"] <= t1_s]

    def run(self):
        self.start_daemon()
        threads = ["--threads", "1"]
        a = self.start_job("cnn", [self.python, self.cnn, "--iterations", "100000000"] + threads)
        b = self.start_job("mlp", [self.mlp, "--iterations", "100000000"] + threads)
        names = {a: "train_cnn.py", b: "train_mlp"}
        self.wait_iterations([a, b], 5)
        time.sleep(self.args.settle)

        alone = {a: [], b: []}
        def measure_alone():
            for run, held in ((a, b), (b, a)):
                alone[run].append(self.alone(run, held, self.args.alone_seconds))

        measure_alone()
        sliced = []
        for ms in self.args.slices:
            self.client.set_slice("cpu0", ms)
            time.sleep(self.args.settle)
            n, wall, t0, t1 = self.window(self.args.seconds)
            handover = self.switches_between(t0, t1)
            sliced.append({"slice_ms": ms, "n": n, "wall_s": wall, "switches": len(handover),
                           "handover_median_ms": statistics.median(handover) if handover else 0.0,
                           "handover_p99_ms": percentile(handover, 0.99)})
        measure_alone()

        rate = {j: sum(n for n, _ in alone[j]) / sum(w for _, w in alone[j]) for j in (a, b)}
        jobs_info = {job["id"]: job for job in self.client.jobs()}
        result = {
            "bench": "slicing_throughput",
            "machine_cpus": os.cpu_count(),
            "device": "cpu0 (gandivad --devices cpu:1)",
            "alone_seconds": self.args.alone_seconds,
            "sliced_seconds": self.args.seconds,
            "jobs": {names[j]: {"rate_alone_it_per_s": rate[j],
                                "alone_windows": [{"iterations": n, "wall_s": w} for n, w in alone[j]],
                                "mean_ms": jobs_info[j]["mean_ms"]} for j in (a, b)},
            "configs": [],
        }
        print(f"bench_slicing_throughput: {names[a]} and {names[b]}, 1 thread each, one cpu device")
        for j in (a, b):
            windows = ", ".join(f"{n / w:.1f}" for n, w in alone[j])
            print(f"  {names[j]:<13} alone: {rate[j]:8.1f} it/s  (windows: {windows})")
        print(f"{'slice ms':>8} {'wall s':>7} {'it A':>6} {'it B':>6} {'share A':>8} {'switches':>8} "
              f"{'handover med/p99 ms':>20} {'lost %':>7}")
        for c in sliced:
            work = c["n"][a] / rate[a] + c["n"][b] / rate[b]
            lost = 1 - work / c["wall_s"]
            share_a = (c["n"][a] / rate[a]) / work if work else 0
            c.update({"iterations": {names[a]: c["n"][a], names[b]: c["n"][b]},
                      "share_of_device_a": share_a, "throughput_lost": lost})
            del c["n"]
            result["configs"].append(c)
            print(f"{c['slice_ms']:>8} {c['wall_s']:>7.1f} {c['iterations'][names[a]]:>6} "
                  f"{c['iterations'][names[b]]:>6} {share_a:>8.2f} {c['switches']:>8} "
                  f"{c['handover_median_ms']:>9.3f}/{c['handover_p99_ms']:<9.3f} {100 * lost:>7.2f}")
        print("goal: lost <= 1 % at 100 ms")
        path = os.path.join(self.args.out, "bench_slicing_throughput.json")
        with open(path, "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.environ.get("GANDIVA_BUILD_DIR", "build"))
    ap.add_argument("--source-dir", help="repository root (default: from the build's CMakeCache)")
    ap.add_argument("--python", help="interpreter for train_cnn.py (default: the build's Python3)")
    ap.add_argument("--out", default=".", help="directory for the JSON result")
    ap.add_argument("--slices", type=lambda s: [int(x) for x in s.split(",")], default=[50, 100, 250])
    ap.add_argument("--seconds", type=float, default=15, help="window per sliced configuration")
    ap.add_argument("--alone-seconds", type=float, default=8, help="window per alone measurement")
    ap.add_argument("--settle", type=float, default=1.0, help="pause after each change")
    args = ap.parse_args()
    bench = Bench(args)
    try:
        bench.run()
    finally:
        bench.stop_all()


if __name__ == "__main__":
    main()
