#!/usr/bin/python3
"""bench_packing: what a pair of identical training jobs gets from sharing one
device by taking turns (sliced), by running at once (packed), and by gandivad's
auto mode, against running them one after the other, in one run.

Starts its own gandivad (one device, private ipc endpoint) and two copies of
bench/job/packing_job.py under `gandiva run`, torch's default thread settings,
and keeps both processes for the whole run. Each round measures windows of
wall time, each after a settling time:

  alone A, alone B   the other job held (parked at a boundary)
  sliced             share mode slice (100 ms slices)
  packed             share mode pack (both run at once)
  auto               share mode auto, until it decided (its figures recorded)

Back-to-back time for a window's work is what the same iterations take at the
rates alone measured in the same round: n_A / rate_A + n_B / rate_B. Then

  makespan vs back-to-back = window wall time / back-to-back time
                           = 1 / (sum of the jobs' throughput against alone)

(< 1: the pair is done sooner than one after the other). gandivad's own
rate_vs_alone of each job at the window's end is reported beside it. On a GPU
node (--device gpu0) the packed row runs under MPS when list_devices says MPS
is running. Prints a table and writes bench_packing.json:

  /usr/bin/python3 bench/job/bench_packing.py --build-dir build --out /tmp
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_node import job_env, start_gandivad  # noqa: E402


class Bench:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build_dir)
        self.cli = os.path.join(self.build, "cli", "gandiva")
        self.job = os.path.join(HERE, "packing_job.py")
        if not os.path.exists(self.cli):
            sys.exit(f"bench_packing: missing {self.cli} (build first)")
        sys.path.insert(0, os.path.join(self.build, "python"))
        import gandiva  # noqa: E402  (the freshly built package)
        self.gandiva = gandiva
        self.tmp = tempfile.mkdtemp(prefix="gd-pack-")
        self.endpoint = f"ipc://{self.tmp}/gd.sock"
        self.procs, self.daemon, self.client = [], None, None

    def env(self):
        return job_env(self.build, self.endpoint)

    def start(self):
        kind = "gpu" if self.args.device.startswith("gpu") else "cpu"
        # A GPU node's GPUs are found by NVML; here, one CPU device.
        devices = [] if kind == "gpu" else ["--devices", "cpu:1"]
        self.client = self.gandiva.Client(self.endpoint, timeout_ms=5000)
        self.daemon = start_gandivad(
            [self.cli, "daemon", *devices, "--slice-ms", "100", "--endpoint", self.endpoint],
            os.path.join(self.tmp, "gandivad.log"), self.env(), self.client.hello)
        ids = [self.start_job(n) for n in ("A", "B")]
        deadline = time.monotonic() + 120
        while min(self.jobs()[i]["iterations"] for i in ids) < 5:
            if time.monotonic() > deadline:
                raise RuntimeError(f"jobs made no progress; see {self.tmp}")
            time.sleep(0.2)
        return ids

    def start_job(self, name):
        log = open(os.path.join(self.tmp, f"{name}.log"), "w")
        self.procs.append(subprocess.Popen(
            [self.cli, "run", "--name", name, "--device", self.args.device, "--",
             sys.executable, self.job], stdout=log, stderr=subprocess.STDOUT, env=self.env()))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for job in self.client.jobs():
                if job["name"] == name:
                    return job["id"]
            time.sleep(0.1)
        raise RuntimeError(f"job {name} never registered; see {log.name}")

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        if self.daemon and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            self.daemon.wait(timeout=10)

    def jobs(self):
        return {j["id"]: j for j in self.client.jobs()}

    def device(self):
        return self.client.call("list_devices")["devices"][0]

    def window(self):
        """Iterations per job and wall time over one window; gandivad's rates at its end."""
        before, t0 = self.jobs(), time.monotonic()
        time.sleep(self.args.window)
        after, t1 = self.jobs(), time.monotonic()
        n = {i: after[i]["iterations"] - before[i]["iterations"] for i in after}
        return {"n": n, "wall": t1 - t0,
                "rate_vs_alone": {i: after[i]["rate_vs_alone"] for i in after},
                "alone_ms": {i: after[i]["alone_ms"] for i in after}}

    def mode(self, mode, **kw):
        self.client.set_share_mode(self.args.device, mode, **kw)
        time.sleep(self.args.settle)
        return self.window()

    def round(self, a, b):
        rnd = {}
        self.client.set_share_mode(self.args.device, "slice")
        for run, held in ((a, b), (b, a)):
            self.client.suspend(held)
            time.sleep(self.args.settle)
            w = self.window()
            rnd[f"alone_{run}"] = w["n"][run] / w["wall"]
            self.client.resume(held)
        rnd["sliced"] = self.mode("slice")
        rnd["packed"] = self.mode("pack")
        self.client.set_share_mode(self.args.device, "auto", window_ms=self.args.auto_window_ms)
        deadline = time.monotonic() + 4 * self.args.auto_window_ms / 1000 + 30
        while self.device()["share_phase"] != "decided" and time.monotonic() < deadline:
            time.sleep(0.2)
        rnd["auto_decision"] = self.device()["share_decision"]
        rnd["auto"] = self.window()
        for key in ("sliced", "packed", "auto"):
            w = rnd[key]
            back_to_back = w["n"][a] / rnd[f"alone_{a}"] + w["n"][b] / rnd[f"alone_{b}"]
            w["makespan_vs_back_to_back"] = w["wall"] / back_to_back
        return rnd

    def run(self):
        try:
            a, b = self.start()
            time.sleep(self.args.settle)
            rounds = []
            for r in range(self.args.rounds):
                rounds.append(self.round(a, b))
                rd = rounds[-1]
                print(f"  round {r + 1}/{self.args.rounds}: makespan vs back-to-back "
                      f"sliced {rd['sliced']['makespan_vs_back_to_back']:.2f}, "
                      f"packed {rd['packed']['makespan_vs_back_to_back']:.2f}, "
                      f"auto {rd['auto']['makespan_vs_back_to_back']:.2f} "
                      f"(kept {rd['auto_decision']['mode']})", flush=True)
            self.report(rounds, a, b)
        finally:
            self.stop()

    def report(self, rounds, a, b):
        dev = self.device()
        result = {"bench": "packing", "device": self.args.device, "mps": dev["mps"],
                  "machine_cpus": os.cpu_count(), "rounds": len(rounds), "window_s": self.args.window,
                  "job": "bench/job/packing_job.py (default torch threads)", "modes": {}}
        print(f"bench_packing: two copies of packing_job.py on {self.args.device} "
              f"(MPS: {dev['mps']}), {len(rounds)} rounds of {self.args.window:g} s windows")
        print(f"{'mode':<8} {'makespan/b2b median':>20} {'min..max':>12} "
              f"{'rate_vs_alone A':>16} {'rate_vs_alone B':>16} {'sum':>6} {'1/sum min..max':>15}")
        print(f"{'b2b':<8} {1.0:>20.2f} {'':>12} {1.0:>16.2f} {1.0:>16.2f} {1.0:>6.2f}")
        for key in ("sliced", "packed", "auto"):
            ms = [rd[key]["makespan_vs_back_to_back"] for rd in rounds]
            ra = [rd[key]["rate_vs_alone"][a] for rd in rounds if rd[key]["rate_vs_alone"][a]]
            rb = [rd[key]["rate_vs_alone"][b] for rd in rounds if rd[key]["rate_vs_alone"][b]]
            med = lambda v: statistics.median(v) if v else float("nan")  # noqa: E731
            # gandivad's own view: the makespan its rate_vs_alone figures imply.
            inv = [1 / (rd[key]["rate_vs_alone"][a] + rd[key]["rate_vs_alone"][b]) for rd in rounds
                   if rd[key]["rate_vs_alone"][a] and rd[key]["rate_vs_alone"][b]]
            result["modes"][key] = {
                "makespan_vs_back_to_back_per_round": ms,
                "makespan_vs_back_to_back_median": med(ms),
                "rate_vs_alone_a_per_round": ra, "rate_vs_alone_b_per_round": rb,
                "makespan_implied_by_rate_vs_alone_per_round": inv}
            spread = f"{min(inv):.2f}..{max(inv):.2f}" if inv else "-"
            print(f"{key:<8} {med(ms):>20.2f} {min(ms):>5.2f}..{max(ms):<5.2f} "
                  f"{med(ra):>16.2f} {med(rb):>16.2f} {med(ra) + med(rb):>6.2f} {spread:>15}")
        result["auto_decisions"] = [rd["auto_decision"] for rd in rounds]
        result["alone_it_per_s"] = {"A": [rd[f"alone_{a}"] for rd in rounds],
                                    "B": [rd[f"alone_{b}"] for rd in rounds]}
        result["rounds_raw"] = rounds
        kept = ", ".join(d["mode"] for d in result["auto_decisions"])
        print(f"auto kept: {kept}; makespan/b2b < 1: the pair is done sooner than one after the "
              "other (measured against the alone windows; 1/sum: as gandivad's rate_vs_alone implies)")
        os.makedirs(self.args.out, exist_ok=True)
        path = os.path.join(self.args.out, "bench_packing.json")
        with open(path, "w") as f:
            json.dump(result, f, indent=2, default=str)
        print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--out", default=".")
    ap.add_argument("--device", default="cpu0", help="cpu0, or gpu0 on a GPU node")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--window", type=float, default=6.0, help="seconds per measured window")
    ap.add_argument("--settle", type=float, default=1.5, help="seconds after a change")
    ap.add_argument("--auto-window-ms", type=int, default=3000)
    Bench(ap.parse_args()).run()


if __name__ == "__main__":
    main()
