#!/usr/bin/env python3
"""The gandiva demo: two real PyTorch training jobs (a Python CNN and a libtorch
C++ MLP) share one device in 100 ms time slices under a real gandivad, then run
alone for comparison. Run it with `make demo` (which installs and builds first).

It prints each job's live iteration time while they share the device, then per
job: iterations, mean and p99 iteration time, share of device time, slices, mean
switch latency; and the throughput lost to slicing against the jobs run alone.
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    ap = argparse.ArgumentParser(description="gandiva time-slicing demo")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--slice-ms", type=int, default=100)
    ap.add_argument("--cnn-iterations", type=int, default=700)
    ap.add_argument("--mlp-iterations", type=int, default=2500)
    ap.add_argument("--json", help="also write the report here")
    return ap.parse_args()


class Demo:
    def __init__(self, args, workdir):
        self.args = args
        self.workdir = workdir
        self.gandiva = os.path.join(args.build, "cli", "gandiva")
        self.endpoint = f"ipc://{workdir}/gandivad.sock"
        # The jobs run with torch's default thread settings, as users run them.
        self.env = dict(os.environ, GANDIVA_ENDPOINT=self.endpoint)
        sys.path.insert(0, os.path.join(args.build, "python"))
        import gandiva
        self.client = gandiva.Client(self.endpoint)
        self.daemon = None

    def start_daemon(self):
        log = open(os.path.join(self.workdir, "gandivad.log"), "w")
        self.daemon = subprocess.Popen(
            [self.gandiva, "daemon", "--devices", "cpu:1", "--slice-ms", str(self.args.slice_ms),
             "--endpoint", self.endpoint], stdout=log, stderr=log)
        for _ in range(200):
            if os.path.exists(self.endpoint[len("ipc://"):]):
                return
            time.sleep(0.05)
        raise SystemExit("gandivad did not start; see " + log.name)

    def stop_daemon(self):
        if self.daemon and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            self.daemon.wait(timeout=10)

    def job_commands(self, tag):
        cnn = ["/usr/bin/python3",  # Debian's, which has torch
               os.path.join(ROOT, "examples", "pytorch", "train_cnn.py"),
               "--iterations", str(self.args.cnn_iterations), "--report-every", "0",
               "--result", os.path.join(self.workdir, f"cnn-{tag}.json")]
        mlp = [os.path.join(self.args.build, "examples", "train_mlp"),
               "--iterations", str(self.args.mlp_iterations), "--report-every", "0",
               "--result", os.path.join(self.workdir, f"mlp-{tag}.json")]
        return {"cnn (PyTorch)": cnn, "mlp (libtorch)": mlp}

    def run_jobs(self, names_and_cmds, live):
        procs = {}
        for name, cmd in names_and_cmds.items():
            procs[name] = subprocess.Popen([self.gandiva, "run", "--name", name, "--", *cmd],
                                           env=self.env, stdout=subprocess.DEVNULL)
        last = 0
        while any(p.poll() is None for p in procs.values()):
            time.sleep(0.1)
            if live and time.monotonic() - last >= 1.0:
                last = time.monotonic()
                self.print_live(set(procs))
        for name, p in procs.items():
            if p.returncode != 0:
                raise SystemExit(f"job {name} failed with exit code {p.returncode}")

    def print_live(self, names):
        jobs = [j for j in self.client.jobs() if j["name"] in names and j["state"] not in ("exited", "failed")]
        line = "  ".join(f"{j['name']}: {j['state']:<10} iter {j['iterations']:5d} "
                         f"ewma {j['ewma_ms']:6.2f} ms" for j in jobs)
        if line:
            print("  live | " + line, flush=True)

    def latest_jobs(self, names):
        by_name = {}
        for j in self.client.jobs():
            if j["name"] in names:
                by_name[j["name"]] = j  # later registrations win
        return by_name

    def result(self, name, tag):
        short = name.split()[0]
        with open(os.path.join(self.workdir, f"{short}-{tag}.json")) as f:
            return json.load(f)


def main():
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="gandiva-demo-") as workdir:
        demo = Demo(args, workdir)
        demo.start_daemon()
        try:
            names = list(demo.job_commands("x"))
            print(f"gandiva demo: two real training jobs on one device (cpu0), {args.slice_ms} ms slices\n")

            print("1) each job alone (the baseline)", flush=True)
            alone = {}
            for name, cmd in demo.job_commands("alone").items():
                demo.run_jobs({name: cmd}, live=False)
                r = demo.result(name, "alone")
                alone[name] = r["iterations"] / r["elapsed_s"]
                print(f"   {name:<15} {r['iterations']} iterations in {r['elapsed_s']:.2f} s "
                      f"= {alone[name]:.1f} it/s", flush=True)

            print("\n2) both jobs time-sliced on the same device", flush=True)
            demo.run_jobs(demo.job_commands("sliced"), live=True)
            jobs = demo.latest_jobs(names)
            results = {n: demo.result(n, "sliced") for n in names}
            switches = demo.client.switches(device="cpu0", limit=100000)
            ids = {jobs[n]["id"] for n in names}
            switches = [s for s in switches if s["from"] in ids and s["to"] in ids]
            report = build_report(names, jobs, results, alone, switches)
            print_report(report)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(report, f, indent=2)
        finally:
            demo.stop_daemon()
    return 0


def build_report(names, jobs, results, alone, switches):
    total_device = sum(jobs[n]["device_time_s"] for n in names) or 1.0
    start = min(results[n]["start_monotonic_s"] for n in names)
    end = max(results[n]["end_monotonic_s"] for n in names)
    wall = end - start
    # Useful device time: how long each job's iterations would take alone.
    useful = sum(results[n]["iterations"] / alone[n] for n in names)
    per_job = {}
    for n in names:
        j = jobs[n]
        to_me = [s["handover_ms"] for s in switches if s["to"] == j["id"]]
        per_job[n] = {
            "iterations": j["iterations"],
            "mean_ms": j["mean_ms"],
            "p99_ms": j["p99_ms"],
            "device_share": j["device_time_s"] / total_device,
            "slices": j["slices"],
            "mean_switch_ms": statistics.mean(to_me) if to_me else 0.0,
            "alone_it_per_s": alone[n],
        }
    handovers = sorted(s["handover_ms"] for s in switches)
    return {
        "jobs": per_job,
        "switches": len(switches),
        "switch_ms_mean": statistics.mean(handovers) if handovers else 0.0,
        "switch_ms_p99": handovers[min(len(handovers) - 1, int(0.99 * len(handovers)))] if handovers else 0.0,
        "wall_s": wall,
        "throughput_lost_pct": 100.0 * (1.0 - useful / wall),
    }


def print_report(r):
    print()
    header = f"{'job':<15} {'iters':>6} {'mean_ms':>8} {'p99_ms':>8} {'device':>7} {'slices':>6} {'switch_ms':>9}"
    print(header)
    print("-" * len(header))
    for name, j in r["jobs"].items():
        print(f"{name:<15} {j['iterations']:>6} {j['mean_ms']:>8.2f} {j['p99_ms']:>8.2f} "
              f"{100 * j['device_share']:>6.1f}% {j['slices']:>6} {j['mean_switch_ms']:>9.3f}")
    print()
    print(f"switches: {r['switches']}, hand-over mean {r['switch_ms_mean']:.3f} ms, p99 {r['switch_ms_p99']:.3f} ms")
    print(f"throughput lost to time-slicing vs each job alone: {r['throughput_lost_pct']:.2f} % "
          f"(over {r['wall_s']:.1f} s)")
    if r["throughput_lost_pct"] < 0:
        print("  (below zero: the jobs ran faster together than in their alone runs a moment earlier;"
              " that is run-to-run noise, and the loss is within it)")


if __name__ == "__main__":
    sys.exit(main())
