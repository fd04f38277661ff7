#!/usr/bin/python3
"""bench_parked_quiet: does a parked job take anything from the running one?

Two copies of a PyTorch CNN with torch's default thread settings (no
set_num_threads, no OMP_NUM_THREADS) and a 2-worker DataLoader
(tests/integration/jobs/loader_cnn_job.py), run under a real gandivad on
`--devices cpu:1`:

  sequential   A alone, then B alone (a job alone is never parked)
  sliced       A and B together, time-sliced at 100 ms

measured by the training loops themselves (each job writes the monotonic time
its loop started and ended; start-up, imports and DataLoader workers are done
before a shared start file releases the loops):

  ratio = (max(end) - min(start) of the sliced pair) / (elapsed A + elapsed B alone)

1.0 means slicing costs nothing against running the jobs one after the other.
The sliced pair runs twice per round, with gandivad's parked-job freezing on
and off (`--freeze-parked on|off`), on an idle machine and with a background
load of one busy core. Prints a table (median and range over rounds) and
writes bench_parked_quiet.json with every sample.

  /usr/bin/python3 bench/job/bench_parked_quiet.py --build-dir build --out DIR [--rounds 3]
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
SOURCE = os.path.abspath(os.path.join(HERE, "..", ".."))
JOB = os.path.join(SOURCE, "tests", "integration", "jobs", "loader_cnn_job.py")
PYTHON = "/usr/bin/python3"


class Daemon:
    """A gandivad on a private endpoint, one cpu device."""

    def __init__(self, build, tmp, slice_ms, freeze):
        self.tmp = tempfile.mkdtemp(dir=tmp)
        self.endpoint = f"ipc://{self.tmp}/gd.sock"
        self.cli = os.path.join(build, "cli", "gandiva")
        self.env = job_env(build, self.endpoint)
        try:
            self.proc = start_gandivad(
                [os.path.join(build, "node", "gandivad"), "--endpoint", self.endpoint, "--devices",
                 "cpu:1", "--slice-ms", str(slice_ms), "--freeze-parked", "on" if freeze else "off"],
                os.path.join(self.tmp, "gandivad.log"), self.env,
                lambda: os.path.exists(f"{self.tmp}/gd.sock"), timeout_s=10)
        except RuntimeError as e:
            sys.exit(f"bench_parked_quiet: {e}")

    def run_jobs(self, names, iterations):
        """Starts the jobs, releases their loops together, waits; returns their results."""
        go = os.path.join(self.tmp, "go")
        procs = {}
        for n in names:
            result = os.path.join(self.tmp, f"{n}.json")
            procs[n] = (subprocess.Popen(
                [self.cli, "run", "--name", n, "--", PYTHON, JOB, "--iterations", str(iterations),
                 "--result", result, "--start-file", go],
                env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True), result)
        deadline = time.monotonic() + 300
        while not all(os.path.exists(r + ".ready") for _, r in procs.values()):
            if time.monotonic() > deadline or any(p.poll() is not None for p, _ in procs.values()):
                sys.exit("bench_parked_quiet: the jobs did not start")
            time.sleep(0.05)
        time.sleep(0.5)  # their DataLoader workers' first batches
        open(go, "w").close()
        out = {}
        for n, (p, result) in procs.items():
            if p.wait(timeout=600) != 0:
                sys.exit(f"bench_parked_quiet: job {n} failed: {p.stderr.read()}")
            with open(result) as f:
                out[n] = json.load(f)
            os.unlink(result + ".ready")
        os.unlink(go)
        return out

    def mean_handover_ms(self):
        r = subprocess.run([self.cli, "devices", "--json"], env=self.env, capture_output=True,
                           text=True)
        try:
            return json.loads(r.stdout)[0].get("mean_handover_ms", 0.0)
        except (ValueError, IndexError, AttributeError):
            return 0.0

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)


def busy_core():
    return subprocess.Popen([PYTHON, "-c", "while True: pass"])


def one_round(args, tmp, load):
    background = busy_core() if load == "loaded" else None
    try:
        time.sleep(0.5 if background else 0)
        sample = {"load": load, "loadavg_1m_at_start": os.getloadavg()[0]}
        d = Daemon(args.build, tmp, args.slice_ms, True)
        a = d.run_jobs(["A"], args.iterations)["A"]
        b = d.run_jobs(["B"], args.iterations)["B"]
        d.stop()
        sample["alone_s"] = [a["elapsed_s"], b["elapsed_s"]]
        sequential = a["elapsed_s"] + b["elapsed_s"]
        sample["sequential_s"] = sequential
        sample["threads"] = a["threads"]
        for freeze in (True, False) if args.round_index % 2 == 0 else (False, True):
            d = Daemon(args.build, tmp, args.slice_ms, freeze)
            pair = d.run_jobs(["A", "B"], args.iterations)
            handover = d.mean_handover_ms()
            d.stop()
            makespan = max(r["end_s"] for r in pair.values()) - min(r["start_s"] for r in pair.values())
            key = "freeze_on" if freeze else "freeze_off"
            sample[key] = {"makespan_s": makespan, "ratio": makespan / sequential,
                           "mean_handover_ms": handover,
                           "same_losses": pair["A"]["losses"] == a["losses"]}
        return sample
    finally:
        if background:
            background.kill()
            background.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--out", default=".")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=150, help="per job")
    ap.add_argument("--slice-ms", type=int, default=100)
    ap.add_argument("--loads", default="idle,loaded")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build_dir)
    for exe in ("node/gandivad", "cli/gandiva"):
        if not os.path.exists(os.path.join(args.build, exe)):
            sys.exit(f"bench_parked_quiet: {exe} not built in {args.build}")
    tmp = tempfile.mkdtemp(prefix="gd-quiet-")
    samples = []
    for i in range(args.rounds):
        args.round_index = i
        for load in args.loads.split(","):
            s = one_round(args, tmp, load)
            s["round"] = i
            samples.append(s)
            print(f"round {i} {load:6s}: sequential {s['sequential_s']:.2f} s, sliced/sequential "
                  f"freeze on {s['freeze_on']['ratio']:.3f}, off {s['freeze_off']['ratio']:.3f} "
                  f"(machine load average {s['loadavg_1m_at_start']:.1f} on {os.cpu_count()} cpus)",
                  flush=True)
    summary = []
    print()
    print(f"{'load':8s} {'freezing':9s} {'ratio median':>13s} {'range':>15s} {'handover ms':>12s} "
          f"{'losses equal':>13s}")
    for load in args.loads.split(","):
        for key, label in (("freeze_on", "on"), ("freeze_off", "off")):
            rs = [s[key]["ratio"] for s in samples if s["load"] == load]
            hs = [s[key]["mean_handover_ms"] for s in samples if s["load"] == load]
            eq = all(s[key]["same_losses"] for s in samples if s["load"] == load)
            row = {"load": load, "freezing": label, "ratio_median": statistics.median(rs),
                   "ratio_min": min(rs), "ratio_max": max(rs),
                   "mean_handover_ms": statistics.median(hs), "losses_equal": eq}
            summary.append(row)
            print(f"{load:8s} {label:9s} {row['ratio_median']:13.3f} "
                  f"{row['ratio_min']:7.3f}–{row['ratio_max']:<7.3f} "
                  f"{row['mean_handover_ms']:12.3f} {str(eq):>13s}")
    result = {"bench": "bench_parked_quiet", "slice_ms": args.slice_ms,
              "iterations_per_job": args.iterations, "rounds": args.rounds,
              "loadavg_at_end": os.getloadavg(), "cpus": os.cpu_count(),
              "goal": {"idle": 1.03, "loaded": 1.10}, "summary": summary, "samples": samples}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "bench_parked_quiet.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
