#!/usr/bin/env python3
"""The GPU suite: one command that checks gandiva on a machine with an NVIDIA GPU
and reports every figure in one table (and JSON). See docs/gpu.md.

    tests/gpu/gpu_suite.py [--build DIR | --bundle DIR] [--device cuda|cpu]
                           [--json FILE] [--traces DIR] [--only ROW,...] [--quick] [--keep]

Rows: driver_api, torch_unmodified, torch_registered, slicing_pair, swap_pair,
checkpoint_restore, migration, copy_floor, release, traces. The traces row records the driver
calls of its jobs (GANDIVA_SHIM_TRACE) into --traces (default: beside --json), so a
run on a GPU leaves them behind for tests/shim/traces (its README says how). Exit status: 0 all rows passed or
skipped, 1 a row failed, 77 no GPU (nvidia-smi lists none, or torch has no CUDA)
with --device cuda. --device cpu is the dry run: the same plumbing and job
scripts with torch on the CPU (and the stand-in driver where a row needs one);
its figures say nothing about a GPU. Standard library only (Python 3.8+).
"""
import argparse
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ROWS = ["driver_api", "torch_unmodified", "torch_registered", "slicing_pair", "swap_pair",
        "checkpoint_restore", "migration", "copy_floor", "release", "traces"]


class Skip(Exception):
    pass


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


# ---- Where things are: a build tree or a bundle from ../shared/gpu/bundle.sh.

def find_tools(args):
    if args.bundle:
        b = os.path.abspath(args.bundle)
        t = {"gandiva": f"{b}/bin/gandiva", "gandivad": f"{b}/bin/gandivad",
             "procaddr_app": f"{b}/bin/gd_shim_procaddr_app", "swap_bench": f"{b}/bin/swap_bench",
             "release_bench": f"{b}/bin/release_bench",
             "trace_tool": f"{b}/bin/gandiva-shim-trace", "replay": f"{b}/bin/shim_trace_replay",
             "shim": f"{b}/lib/libgandiva_shim.so", "fatbin": f"{b}/lib/kernels.fatbin",
             "standin_dir": None, "pythonpath": f"{b}/py", "ld_library_path": f"{b}/lib"}
    else:
        b = os.path.abspath(args.build or os.path.join(ROOT, "build"))
        t = {"gandiva": f"{b}/cli/gandiva", "gandivad": f"{b}/node/gandivad",
             "procaddr_app": f"{b}/tests/shim/gd_shim_procaddr_app",
             "swap_bench": f"{b}/bench/shim/swap_bench", "shim": f"{b}/shim/libgandiva_shim.so",
             "release_bench": f"{b}/bench/shim/release_bench",
             "trace_tool": f"{b}/shim/gandiva-shim-trace", "replay": f"{b}/tests/shim/shim_trace_replay",
             "fatbin": f"{b}/tests/shim/kernels.fatbin", "standin_dir": f"{b}/tests/shim/standin",
             "pythonpath": f"{b}/python", "ld_library_path": os.environ.get("LD_LIBRARY_PATH", "")}
    return {k: (v if v is None or k in ("pythonpath", "ld_library_path") or os.path.exists(v) else None)
            for k, v in t.items()}


def gpu_missing(python):
    """Why there is no GPU to test on, or None."""
    if not shutil.which("nvidia-smi"):
        return "no nvidia-smi on PATH"
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    if r.returncode != 0 or "GPU" not in r.stdout:
        return "nvidia-smi lists no GPU"
    r = subprocess.run([python, "-c", "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return "torch cannot use CUDA" if r.returncode == 3 else "torch does not import"
    return None


# ---- The suite's context: tools, environment, sizes.

class Suite:
    def __init__(self, args):
        self.args = args
        self.cuda = args.device == "cuda"
        self.tools = find_tools(args)
        self.python = args.python
        self.work = tempfile.mkdtemp(prefix="gd_gpu_suite.")
        self.env = dict(os.environ, PYTHONPATH=self.tools["pythonpath"], OMP_NUM_THREADS="1",
                        GANDIVA_LOG="warn")
        if self.tools["ld_library_path"]:
            self.env["LD_LIBRARY_PATH"] = self.tools["ld_library_path"]
        if self.tools["shim"]:
            self.env["GANDIVA_SHIM"] = self.tools["shim"]
        self.job = os.path.join(HERE, "jobs", "train.py")
        # Small on the CPU (the dry run checks plumbing, not speed).
        self.job_args = ["--device", args.device] + (
            ["--width", "64", "--batch", "128"] if self.cuda else ["--width", "4", "--batch", "4"])
        self.calibration = None  # the solo run of torch_unmodified: start-up and iteration time
        self.solo = {}           # iterations -> loss history of a solo run

    def need(self, *names):
        missing = [n for n in names if not self.tools.get(n)]
        if missing:
            raise Skip("not built: " + ", ".join(missing))

    def train(self, out, iterations, extra=(), env=None, wrap=()):
        cmd = [*wrap, self.python, self.job, "--out", out, "--iterations", str(iterations),
               *self.job_args, *extra]
        t = time.monotonic()
        r = subprocess.run(cmd, env=env or self.env, capture_output=True, text=True, timeout=900)
        wall = time.monotonic() - t
        check(r.returncode == 0, f"{' '.join(cmd[-8:])}: exit {r.returncode}: {r.stderr[-600:]}")
        d = load(out)
        d["wall_s"] = wall
        return d

    def iterations_for(self, seconds, floor=20):
        """Iterations that keep a job busy for `seconds` after its start-up, from the
        calibration run (finding 8: a migration did not start because the
        destination's warm start outlasted the job). --quick: a quarter (dry runs)."""
        c = self.calibrate()
        if self.args.quick:
            seconds /= 4
        return max(floor, int(math.ceil(seconds / c["iter_s"])))

    def calibrate(self):
        if self.calibration is None:
            n = 30 if self.cuda else 8
            d = self.train(f"{self.work}/calibrate.json", n)
            steady = d["iter_s"][len(d["iter_s"]) // 3:]
            self.calibration = {"startup_s": d["startup_s"], "iter_s": statistics.median(steady),
                                "peak_reserved": d["peak_reserved"]}
        return self.calibration

    def solo_losses(self, iterations, extra=()):
        key = (iterations, tuple(extra))
        if key not in self.solo:
            self.solo[key] = self.train(f"{self.work}/solo_{iterations}_{len(self.solo)}.json",
                                        iterations, extra)
        return self.solo[key]


def load(path):
    with open(path) as f:
        return json.load(f)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """A gandivad for one row, on its own Unix socket (and TCP port for migration)."""

    def __init__(self, suite, name, *flags):
        suite.need("gandivad", "gandiva")
        self.suite = suite
        self.dir = os.path.join(suite.work, name)
        os.makedirs(self.dir, exist_ok=True)
        self.name = name
        self.endpoint = f"ipc://{self.dir}/gd.sock"
        self.env = dict(suite.env, GANDIVA_ENDPOINT=self.endpoint)
        devices = [] if suite.cuda else ["--devices", "cpu:1"]
        self.log_path = f"{self.dir}/gandivad.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([suite.tools["gandivad"], "--node", name, "--endpoint", self.endpoint,
                                      *devices, *flags], stdout=self.log, stderr=subprocess.STDOUT,
                                     env=self.env)
        deadline = time.monotonic() + 30
        while not os.path.exists(f"{self.dir}/gd.sock"):
            check(self.proc.poll() is None, f"gandivad {name} exited: {self.read_log()[-800:]}")
            check(time.monotonic() < deadline, f"gandivad {name} did not start")
            time.sleep(0.05)

    def read_log(self):
        with open(self.log_path) as f:
            return f.read()

    def cli(self, *args, check_ok=True):
        r = subprocess.run([self.suite.tools["gandiva"], *args], env=self.env, capture_output=True,
                           text=True, timeout=300)
        if check_ok:
            check(r.returncode == 0, f"gandiva {' '.join(args)}: {r.stderr.strip()[-400:]}")
        return r

    def jobs(self):
        return json.loads(self.cli("ps", "--all", "--json").stdout)

    def job(self, job_id):
        return next((j for j in self.jobs() if j["id"] == job_id), {})

    def run(self, args, name, restore=None, env=None):
        cmd = [self.suite.tools["gandiva"], "run", "--name", name]
        if restore:
            cmd += ["--restore", restore]
        return subprocess.Popen(cmd + ["--", *args], env=dict(self.env, **(env or {})),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while not cond():
        check(time.monotonic() < deadline, f"timed out waiting for {what}")
        time.sleep(0.05)


def wait_all(procs, timeout):
    for p in procs:
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            raise Fail("a job did not finish in time")
        check(rc == 0, f"job exit {rc}: {p.stderr.read()[-600:]}")


# ---- Rows. Each returns (figures: dict, note: str); raises Skip or Fail.

def row_driver_api(s):
    """The cuGetProcAddress test program (nvcc kernels, 2 threads, graphs) under the
    shim: every iteration found, launches seen. On the real driver with a GPU; on
    the stand-in (test double) in the dry run."""
    s.need("procaddr_app", "shim", "fatbin")
    env = dict(s.env, LD_PRELOAD=s.tools["shim"], GANDIVA_SHIM_REPORT=f"{s.work}/driver_api.txt",
               GANDIVA_SHIM_SWAP_VERIFY="full")
    if not s.cuda:
        if not s.tools["standin_dir"]:
            raise Skip("the dry run needs the stand-in driver (a build tree, not a bundle)")
        env["LD_LIBRARY_PATH"] = s.tools["standin_dir"]
    r = subprocess.run([s.tools["procaddr_app"], "--image", s.tools["fatbin"], "--iterations", "50",
                        "--threads", "2", "--graph"], env=env, capture_output=True, text=True,
                       timeout=300)
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr[-400:]}")
    rep = dict(line.split(" ", 1) for line in open(env["GANDIVA_SHIM_REPORT"]).read().splitlines()
               if " " in line)
    launches = sum(int(v) for k, v in rep.items() if k.startswith("calls.cuLaunch"))
    boundaries = int(rep.get("boundaries", 0))
    check(launches > 0, "no launch seen by the shim")
    check(boundaries == 50, f"inferred boundaries {boundaries} of 50")
    return {"launches": launches, "boundaries": boundaries}, "real driver" if s.cuda else "stand-in"


def row_torch_unmodified(s):
    """An unmodified PyTorch job (no gandiva import) alone, then under the shim
    (LD_PRELOAD, unmanaged): iteration rate both ways, loss histories bitwise equal,
    boundaries the shim infers against iterations run."""
    c = s.calibrate()
    n = s.iterations_for(10 if s.cuda else 2, floor=20)
    base = s.solo_losses(n)
    figures = {"iterations": n, "startup_s": round(c["startup_s"], 2),
               "iter_ms": round(1e3 * statistics.median(base["iter_s"]), 3)}
    if not s.tools["shim"]:
        raise Skip("shim not built")
    report = f"{s.work}/torch_unmodified.txt"
    env = dict(s.env, LD_PRELOAD=s.tools["shim"], GANDIVA_SHIM_REPORT=report)
    shimmed = s.train(f"{s.work}/torch_unmodified_shim.json", n, env=env)
    figures["iter_ms_shim"] = round(1e3 * statistics.median(shimmed["iter_s"]), 3)
    figures["overhead_pct"] = round(100 * (figures["iter_ms_shim"] / figures["iter_ms"] - 1), 2)
    check(shimmed["losses"] == base["losses"], "loss history differs under the shim")
    rep = dict(line.split(" ", 1) for line in open(report).read().splitlines() if " " in line)
    figures["boundaries"] = int(rep.get("boundaries", 0))
    if s.cuda:
        # An inferred boundary is the sync before an iteration's forward pass, and it is
        # recognised by the window of one whole period ending there, which holds the
        # previous iteration's compute and optimizer step. The first two iterations'
        # windows hold start-up and the first step (which creates the optimizer's state:
        # 8 launches where later steps make 4, H200 trace): two boundaries no inference
        # can see. The exact count is the optimizer hook's (below).
        check(n - 2 <= figures["boundaries"] <= n, f"inferred boundaries {figures['boundaries']} for {n} iterations")
    # The same unmodified script under `gandiva run`: the start-up hook marks a boundary
    # at each optimizer step, which wins over the shim's inference.
    d = Daemon(s, "unmodified")
    try:
        out = f"{s.work}/torch_unmodified_run.json"
        wait_all([d.run([s.python, s.job, "--out", out, "--iterations", str(n), *s.job_args], "unmod")], 900)
        job = d.jobs()[0]
        check(load(out)["losses"] == base["losses"], "loss history under gandiva run differs")
        figures["counted_by_hook"] = job["iterations"]
        figures["boundary_source"] = job.get("boundary_source")
        check(job["iterations"] == n and job.get("boundary_source") == "explicit",
              f"gandiva run counted {job['iterations']} of {n} ({job.get('boundary_source')})")
    finally:
        d.stop()
    return figures, "losses bitwise equal; the optimizer hook counted every iteration" + \
        ("" if s.cuda else "; CPU torch: no driver calls to infer from")


def row_torch_registered(s):
    """The job with gandiva.torch.register + attach under a real gandivad: every
    iteration counted, loss history bitwise equal to the unmodified solo run."""
    n = s.iterations_for(10 if s.cuda else 2, floor=20)
    base = s.solo_losses(n)
    d = Daemon(s, "registered")
    try:
        out = f"{s.work}/registered.json"
        p = d.run([s.python, s.job, "--out", out, "--iterations", str(n), "--register", *s.job_args], "reg")
        wait_all([p], 900)
        got = load(out)
        job = d.jobs()[0]
        check(got["losses"] == base["losses"], "loss history differs from the solo run")
        check(job["iterations"] in (n, n + 1), f"gandivad counted {job['iterations']} of {n}")
        return {"iterations": n, "counted": job["iterations"], "boundary_source": job.get("boundary_source")}, \
            "losses bitwise equal"
    finally:
        d.stop()


def pair(s, name, flags, n, extra=(), envs=(None, None)):
    """Two jobs started together under one gandivad; returns (makespan, their outputs, ps)."""
    d = Daemon(s, name, *flags)
    try:
        outs = [f"{s.work}/{name}_{i}.json" for i in (0, 1)]
        t = time.monotonic()
        procs = [d.run([s.python, s.job, "--out", o, "--iterations", str(n), *s.job_args, *extra], f"{name}{i}",
                       env=envs[i])
                 for i, o in enumerate(outs)]
        wait_all(procs, 1800)
        makespan = time.monotonic() - t
        return makespan, [load(o) for o in outs], d.jobs()
    finally:
        d.stop()


def row_slicing_pair(s):
    """Two jobs that fit together, time-sliced at 100 ms by gandivad: makespan
    against two solo runs back-to-back (goal <= 1.01x), losses bitwise equal."""
    n = s.iterations_for(8 if s.cuda else 3, floor=30)
    # On a GPU: unmodified jobs (the shim infers their boundaries), as measured on the
    # H100. On the CPU nothing infers boundaries, so the dry run registers them.
    extra = [] if s.cuda else ["--register"]
    solo = [s.train(f"{s.work}/slicing_solo{i}.json", n) for i in (0, 1)]
    back_to_back = sum(x["wall_s"] for x in solo)
    makespan, outs, jobs = pair(s, "slicing", ["--slice-ms", "100"], n, extra)
    for o in outs:
        check(o["losses"] == solo[0]["losses"], "a sliced job's loss history differs from its solo run")
    ratio = makespan / back_to_back
    slices = sum(j.get("slices", 0) for j in jobs)
    check(slices >= 4, f"{slices} slices: the pair was not time-sliced")
    figures = {"iterations": n, "makespan_s": round(makespan, 2), "back_to_back_s": round(back_to_back, 2),
               "ratio": round(ratio, 3), "slices": slices}
    return figures, f"goal <= 1.01: {'met' if ratio <= 1.01 else 'missed'}" + ("" if s.cuda else " (CPU: not a GPU figure)")


def row_swap_pair(s):
    """Two jobs that do not fit together under --device-memory-mib: each holds a
    ballast of live memory; the one leaving swaps out. Makespan against
    back-to-back (goal <= 1.25x), every byte and loss kept."""
    if not s.cuda:
        raise Skip("needs a GPU: CPU torch makes no device allocations for the shim to swap "
                   "(the stand-in covers swap: shim.Host/ShimSwapHost.*, integration_swap)")
    c = s.calibrate()
    ballast = 2048
    footprint = ballast + c["peak_reserved"] / 2**20 + 512  # + context and the model
    budget = int(footprint * 1.5)  # one fits, two do not
    n = s.iterations_for(8, floor=50)
    solo = [s.train(f"{s.work}/swap_solo{i}.json", n, ["--ballast-mib", str(ballast)]) for i in (0, 1)]
    back_to_back = sum(x["wall_s"] for x in solo)
    # Registered: gandiva.torch releases torch's cached blocks before each swap-out.
    makespan, outs, jobs = pair(s, "swap", ["--slice-ms", "100", "--device-memory-mib", str(budget)], n,
                                ["--ballast-mib", str(ballast), "--register"])
    for o in outs:
        check(o["losses"] == solo[0]["losses"], "a swapped job's loss history differs")
    swaps = sum(j.get("swaps", 0) for j in jobs)
    check(swaps >= 2, f"only {swaps} swaps: the pair fitted")
    ratio = makespan / back_to_back
    return {"iterations": n, "budget_mib": budget, "ballast_mib": ballast, "swaps": swaps,
            "makespan_s": round(makespan, 2), "back_to_back_s": round(back_to_back, 2),
            "ratio": round(ratio, 3)}, f"goal <= 1.25: {'met' if ratio <= 1.25 else 'missed'}"


def row_checkpoint_restore(s):
    """A registered job checkpointed mid-run by gandivad, killed, restored in a new
    process (`gandiva run --restore`): the loss history is bitwise the solo run's."""
    c = s.calibrate()
    # Long enough that the checkpoint lands mid-run with time to spare.
    n = s.iterations_for(max(10.0, 2 * c["startup_s"]) if s.cuda else 3, floor=30)
    base = s.solo_losses(n)
    d = Daemon(s, "ckpt")
    try:
        out = f"{s.work}/ckpt.json"
        args = [s.python, s.job, "--out", out, "--iterations", str(n), "--register", *s.job_args]
        p = d.run(args, "ckpt")
        wait_for(lambda: d.jobs() and d.jobs()[0]["iterations"] >= n // 3, 600, "a third of the run")
        ckpt = f"{s.work}/ckpt_dir"
        t = time.monotonic()
        d.cli("checkpoint", "1", "--to", ckpt)
        ckpt_s = time.monotonic() - t
        p.kill()
        p.wait()
        t = time.monotonic()
        q = d.run(args, "restored", restore=ckpt)
        wait_all([q], 900)
        got = load(out)
        check(got["losses"] == base["losses"], "loss history after restore differs from the solo run")
        return {"iterations": n, "checkpoint_s": round(ckpt_s, 3),
                "checkpoint_bytes": sum(os.path.getsize(os.path.join(ckpt, f)) for f in os.listdir(ckpt)),
                "restored_run_s": round(time.monotonic() - t, 2)}, "losses bitwise equal"
    finally:
        d.stop()


def row_migration(s):
    """A registered job migrated between two gandivad on this machine (CURVE TCP):
    sized so that the destination's warm start (measured: the job's start-up) fits
    well inside the rest of the run; loss history bitwise the solo run's."""
    c = s.calibrate()
    keys = f"{s.work}/keys"
    os.makedirs(keys, exist_ok=True)
    pubs, ports = {}, {}
    for name in ("a", "b"):
        subprocess.run([s.tools["gandiva"], "keygen", "--out", keys, "--name", name], check=True,
                       capture_output=True, env=s.env)
        pubs[name] = open(f"{keys}/{name}.pub").read().strip()
        ports[name] = free_port()
    nodes = {}
    try:
        for name in ("a", "b"):
            other = "b" if name == "a" else "a"
            d_dir = f"{s.work}/mig_{name}"
            os.makedirs(d_dir, exist_ok=True)
            with open(f"{d_dir}/authorized", "w") as f:
                f.write("\n".join(pubs.values()) + "\n")
            with open(f"{d_dir}/peers", "w") as f:
                f.write(f"{other} tcp://127.0.0.1:{ports[other]} {pubs[other]}\n")
            nodes[name] = Daemon(s, f"mig_{name}", "--tcp", f"tcp://127.0.0.1:{ports[name]}",
                                 "--key", f"{keys}/{name}.key", "--authorized-keys", f"{d_dir}/authorized",
                                 "--peers", f"{d_dir}/peers")
        # The rest of the run after the migration starts must outlast the destination's
        # warm start (about one start-up) several times over: never shortened by --quick
        # (a quarter failed exactly as finding 8 did: "job 1 has ended").
        want = max(10.0, 4 * c["startup_s"]) if s.cuda else 4 * c["startup_s"]
        n = max(30, int(math.ceil(want / c["iter_s"] * 10 / 9)))
        base = s.solo_losses(n)
        out = f"{s.work}/migrated.json"
        p = nodes["a"].run([s.python, s.job, "--out", out, "--iterations", str(n), "--register", *s.job_args], "mig")
        wait_for(lambda: nodes["a"].jobs() and nodes["a"].jobs()[0]["iterations"] >= n // 10, 600, "training on a")
        t = time.monotonic()
        op = json.loads(nodes["a"].cli("migrate", "1", "--to", "b", "--json").stdout)
        migrate_s = time.monotonic() - t
        check(op.get("state") == "done", f"migration: {op}")
        p.wait(timeout=120)
        wait_for(lambda: nodes["b"].job(op["to_job"]).get("state") in ("exited", "failed"), 900,
                 "the job to finish on b")
        check(nodes["b"].job(op["to_job"])["state"] == "exited", "the migrated job failed on b")
        got = load(out)
        check(got["losses"] == base["losses"], "loss history after migration differs from the solo run")
        return {"iterations": n, "startup_s": round(c["startup_s"], 2), "migrate_s": round(migrate_s, 2),
                "state_bytes": op.get("bytes", op.get("transfer_bytes"))}, "losses bitwise equal"
    finally:
        for d in nodes.values():
            d.stop()


def row_copy_floor(s):
    """The copy-rate floor with torch (pinned and pageable, both directions) and
    the shim's swap against it (bench/shim/swap_bench, same driver): goal each
    swap direction <= 1.5x bytes / pinned rate."""
    figures = {}
    if s.cuda:
        r = subprocess.run([s.python, os.path.join(HERE, "jobs", "copy_rate.py"), "1024"], env=s.env,
                           capture_output=True, text=True, timeout=600)
        check(r.returncode == 0, f"copy_rate.py: {r.stderr[-400:]}")
        t = json.loads(r.stdout.strip().splitlines()[-1])
        figures.update({k: round(v, 2) for k, v in t.items() if k.endswith("_gbps")})
        figures["torch_pin_s"] = round(t["pin_s"], 3)
    s.need("swap_bench")
    out = f"{s.work}/swap_bench.json"
    args = [s.tools["swap_bench"], "--json", out] + ([] if s.cuda else ["--standin", "--mib", "64", "--rounds", "2"])
    r = subprocess.run(args, env=s.env, capture_output=True, text=True, timeout=600)
    check(r.returncode == 0, f"swap_bench: {r.stderr[-400:]}")
    b = load(out)
    for m in b["modes"]:
        figures[f"swap_{m['mode']}_out_x"] = m["out_x"]
        figures[f"swap_{m['mode']}_in_x"] = m["in_x"]
    staged = next(m for m in b["modes"] if m["mode"] == "staged")
    met = staged["out_x"] <= 1.5 and staged["in_x"] <= 1.5
    note = f"default (staged) goal <= 1.5x: {'met' if met else 'missed'}"
    return figures, note if s.cuda else note + " (stand-in: CPU memcpy figures, not a GPU's)"


def row_release(s):
    """The two ways a parked job releases its device memory (gandivad --release
    swap|driver), side by side on the same memory in one process
    (bench/shim/release_bench): the shim's swap and the driver's checkpoint API
    (cuCheckpointProcessLock/Checkpoint/Restore/Unlock, driver >= 570). Every byte is
    checked after the cycles; the driver must leave no more device memory in use than
    swap does. Skips where the driver lacks the checkpoint API."""
    s.need("release_bench")
    out = f"{s.work}/release_bench.json"
    args = [s.tools["release_bench"], "--json", out] + ([] if s.cuda else ["--standin", "--mib", "64", "--rounds", "2"])
    r = subprocess.run(args, env=s.env, capture_output=True, text=True, timeout=600)
    if r.returncode == 77:
        raise Skip(r.stdout.strip()[-200:])
    check(r.returncode == 0, f"release_bench: {r.stderr[-400:]}")
    b = {m["release"]: m for m in load(out)["mechanisms"]}
    figures = {}
    for name, m in b.items():
        figures[f"{name}_out_s"] = round(m["out_s"], 4)
        figures[f"{name}_in_s"] = round(m["in_s"], 4)
        figures[f"{name}_left_mib"] = m["device_used_released_mib"]  # -1: not said
    figures["driver_x_swap"] = b["driver"]["x_swap"]
    check(b["driver"]["device_used_released_mib"] <= b["swap"]["device_used_released_mib"],
          f"the driver left more device memory in use than swap: {figures}")
    note = "driver/swap time ratio (out + in)"
    return figures, note if s.cuda else note + " (stand-in: CPU memcpy figures, not a GPU's)"


def row_traces(s):
    """The driver calls of the suite's jobs recorded (GANDIVA_SHIM_TRACE) into --traces:
    the cuGetProcAddress test program with calls the driver must refuse, the unmodified
    PyTorch job, the registered one under gandivad, and a time-sliced pair. Each trace
    is replayed against the stand-in (tests/shim/shim_trace_replay) where it is built:
    the shim must decide as it did on the real driver, and the stand-in refuse what the
    driver refused. The dry run records the test program only (on the stand-in): CPU
    torch calls no driver."""
    s.need("shim", "procaddr_app", "fatbin")
    os.makedirs(s.traces, exist_ok=True)
    prefix = "gpu" if s.cuda else "standin"
    traces = {}

    def traced(name):
        path = os.path.join(s.traces, f"{prefix}_{name}.gdtrace")
        if os.path.exists(path):
            os.unlink(path)
        traces[name] = path
        return {"GANDIVA_SHIM_TRACE": path, "GANDIVA_SHIM_TRACE_MAX_BYTES": str(256 << 20)}

    env = dict(s.env, LD_PRELOAD=s.tools["shim"], **traced("driver_api"))
    if not s.cuda:
        if not s.tools["standin_dir"]:
            raise Skip("the dry run needs the stand-in driver (a build tree, not a bundle)")
        env["LD_LIBRARY_PATH"] = s.tools["standin_dir"]
    r = subprocess.run([s.tools["procaddr_app"], "--image", s.tools["fatbin"], "--iterations", "50",
                        "--threads", "2", "--graph", "--bad-calls"], env=env, capture_output=True,
                       text=True, timeout=300)
    check(r.returncode == 0, f"procaddr_app: exit {r.returncode}: {r.stderr[-400:]}")
    if s.cuda:  # CPU torch makes no driver call: nothing to record in the dry run
        # Short runs (~4 KiB of trace per iteration after ~150 KiB of start-up), so that
        # a trace is small enough to keep in tests/shim/traces and replay in every run.
        n = 40
        s.train(f"{s.work}/traced_unmodified.json", n,
                env=dict(s.env, LD_PRELOAD=s.tools["shim"], **traced("torch_unmodified")))
        d = Daemon(s, "traced")
        try:
            p = d.run([s.python, s.job, "--out", f"{s.work}/traced_registered.json", "--iterations", str(n),
                       "--register", *s.job_args], "traced", env=traced("torch_registered"))
            wait_all([p], 900)
        finally:
            d.stop()
        pair(s, "traced_pair", ["--slice-ms", "100"], n, envs=(traced("pair_0"), traced("pair_1")))
    figures = {}
    replayed, failed = 0, []
    for name, path in traces.items():
        if not os.path.exists(path):
            figures[f"{name}_kib"] = 0  # the job made no driver call
            continue
        if s.tools.get("trace_tool"):
            st = subprocess.run([s.tools["trace_tool"], "stats", path], capture_output=True, text=True)
            check(st.returncode == 0, f"{path}: {st.stderr.strip()}")
        figures[f"{name}_kib"] = round(os.path.getsize(path) / 1024, 1)
        if s.tools.get("replay") and s.tools["standin_dir"]:
            rp = subprocess.run([s.tools["replay"], path], capture_output=True, text=True, timeout=300,
                                env=dict(s.env, GANDIVA_SHIM_LIBCUDA=f"{s.tools['standin_dir']}/libcuda.so.1"))
            with open(path + ".replay.txt", "w") as f:
                f.write(rp.stdout + rp.stderr)
            replayed += 1
            if rp.returncode != 0:
                failed.append(os.path.basename(path))
    check(os.path.exists(traces["driver_api"]), "the test program left no trace")
    figures["replayed"] = replayed
    # The shim decided otherwise on the stand-in than on the recorded driver, or the
    # stand-in accepted what the driver refused: kept beside the trace (.replay.txt).
    check(not failed, f"replays differ: {', '.join(failed)} (see their .replay.txt in {s.traces})")
    return figures, f"traces in {s.traces}" + ("" if s.cuda else " (stand-in and CPU torch: not a GPU's)")


# ---- Driver.

def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", help="build tree (default: <repo>/build)")
    p.add_argument("--bundle", help="a folder made by ../shared/gpu/bundle.sh")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--python", default=sys.executable, help="Python with torch for the jobs")
    p.add_argument("--json", default="gpu_suite.json")
    p.add_argument("--traces", help="folder for the traces row's recordings (default: beside --json)")
    p.add_argument("--only", help="comma-separated rows")
    p.add_argument("--keep", action="store_true", help="keep the work folder (logs, outputs)")
    p.add_argument("--quick", action="store_true", help="runs a quarter as long (dry runs, CTest)")
    args = p.parse_args()
    rows = args.only.split(",") if args.only else ROWS
    unknown = set(rows) - set(ROWS)
    if unknown:
        p.error(f"unknown rows: {', '.join(sorted(unknown))}")
    if args.device == "cuda":
        why = gpu_missing(args.python)
        if why:
            print(f"gpu_suite: skipped: {why}. Run it on a machine with an NVIDIA GPU, or "
                  f"--device cpu for the dry run.", flush=True)
            return 77
    s = Suite(args)
    s.traces = os.path.abspath(args.traces or os.path.join(os.path.dirname(os.path.abspath(args.json)), "traces"))
    results = []
    device = "cpu (dry run)"
    if s.cuda:
        device = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip()

    def write_json():
        with open(args.json, "w") as f:
            json.dump({"device": device, "dry_run": not s.cuda, "calibration": s.calibration,
                       "rows": results}, f, indent=1)

    for name in rows:
        fn = globals()[f"row_{name}"]
        t = time.monotonic()
        try:
            figures, note = fn(s)
            status = "pass"
        except Skip as e:
            figures, note, status = {}, str(e), "skip"
        except Fail as e:
            figures, note, status = {}, str(e), "FAIL"
        except Exception as e:  # a bug in a row is a failure of that row, not of the suite
            figures, note, status = {}, f"{type(e).__name__}: {e}", "FAIL"
        results.append({"row": name, "status": status, "seconds": round(time.monotonic() - t, 1),
                        "figures": figures, "note": note})
        print(f"{name:<20} {status:<5} {results[-1]['seconds']:>7.1f}s  "
              f"{' '.join(f'{k}={v}' for k, v in figures.items())}  {note}", flush=True)
        write_json()  # after every row: a run cut short (a lent GPU's time) keeps what it did
    print()
    print(f"device: {device}; work folder: {s.work}{'' if args.keep else ' (removed)'}")
    print(f"{'row':<20} {'status':<6} {'s':>7}  figures / note")
    for r in results:
        figs = " ".join(f"{k}={v}" for k, v in r["figures"].items())
        print(f"{r['row']:<20} {r['status']:<6} {r['seconds']:>7.1f}  {figs}")
        print(f"{'':<36}{r['note']}")
    if not args.keep:
        shutil.rmtree(s.work, ignore_errors=True)
    return 1 if any(r["status"] == "FAIL" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
