"""The workload of bench/scheduler/live_vs_sim.py: a dozen real PyTorch
training jobs (sleep-paced MLPs, CPU-bound CNNs, one 2-rank DDP gang), their
staggered arrivals, how to check each job's result, and the same workload as a
`gandiva sim` trace (the generic CSV of docs/simulator.md)."""

import json
import os
import random
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
JOBS = os.path.join(ROOT, "tests", "integration", "jobs")
PYTHON = "/usr/bin/python3"
SCHED_JOB = os.path.join(JOBS, "sched_job.py")
DDP_JOB = os.path.join(JOBS, "ddp_job.py")
TORCHRUN = os.path.join(JOBS, "torchrun.py")
CNN = os.path.join(ROOT, "examples", "pytorch", "train_cnn.py")


@dataclass
class Job:
    name: str
    kind: str  # mlp, cnn or ddp
    size: int  # steps or iterations
    ranks: int = 1
    arrival_s: float = 0.0
    solo_s: float = 0.0  # measured: its JCT alone on the idle cluster
    solo_result: dict = field(default_factory=dict)

    def command(self, result):
        """The command line, writing its result to `result` (ddp: result.rank<k>)."""
        if self.kind == "mlp":
            # 20 ms steps, mostly asleep: such jobs pack well, and the 2 cores suffice.
            return [PYTHON, SCHED_JOB, "--steps", str(self.size), "--step-ms", "20",
                    "--result", result]
        if self.kind == "cnn":
            # One thread: CPU-bound, so three devices on two cores contend only
            # when more than two compute at once.
            return [PYTHON, CNN, "--iterations", str(self.size), "--batch", "32", "--threads", "1",
                    "--report-every", "0", "--result", result]
        return [PYTHON, TORCHRUN, "--rdzv_backend=c10d", "--rdzv_endpoint=localhost:0",
                "--nnodes=1", f"--nproc_per_node={self.ranks}", DDP_JOB,
                "--iterations", str(self.size), "--work-ms", "15", "--out", result]

    def read_result(self, result):
        """What must be the same in every run of this job (it is seeded)."""
        if self.kind == "mlp":
            r = json.load(open(result))
            return {"steps": r["steps"], "weights_sha256": r["weights_sha256"]}
        if self.kind == "cnn":
            r = json.load(open(result))
            return {"iterations": r["iterations"], "parameters_sha256": r["parameters_sha256"],
                    "final_loss": r["losses"][-1]}
        out = {}
        for rank in range(self.ranks):
            r = json.load(open(f"{result}.rank{rank}"))
            if not r["done"]:
                raise ValueError(f"rank {rank} not done")
            out[f"rank{rank}_losses"] = r["losses"]
        return out


def make_workload(seed=7, spread_s=40.0, scale=1.0):
    """12 jobs: 7 MLPs and 4 CNNs of different lengths and one 2-rank DDP job,
    arriving at seeded offsets within `spread_s` (the first at 0). `scale`
    multiplies every job's length (a quick development run: 0.3)."""
    specs = ([("mlp", s) for s in (150, 300, 500, 800, 250, 400, 1100)] +
             [("cnn", s) for s in (1000, 2500, 4000, 1800)] + [("ddp", 250)])
    rng = random.Random(seed)
    offsets = sorted([0.0] + [round(rng.uniform(0, spread_s), 1) for _ in specs[1:]])
    order = list(range(len(specs)))
    rng.shuffle(order)  # lengths arrive in a seeded, mixed order
    jobs = []
    for n, (i, t) in enumerate(zip(order, offsets)):
        kind, size = specs[i]
        jobs.append(Job(name=f"j{n:02d}-{kind}", kind=kind, size=max(10, int(size * scale)),
                        ranks=2 if kind == "ddp" else 1, arrival_s=t))
    return jobs


def write_trace(jobs, path):
    """The workload as a generic `gandiva sim` trace: each job's arrival and
    measured solo duration on one device (a 2-rank gang shares one device),
    its kind as the job type of write_colocation's table."""
    with open(path, "w") as f:
        f.write("# bench/scheduler/live_vs_sim.py: measured solo durations, live arrivals\n")
        f.write("submit_time,num_gpus,duration,user,job_type\n")
        for j in jobs:
            f.write(f"{j.arrival_s:.3f},1,{j.solo_s:.3f},{j.name},{j.kind}\n")


def write_colocation(path, pack_rate):
    """A co-location table (the format of docs/simulator.md's Gavel table) for
    the three kinds: every job runs at `pack_rate` of its alone speed when
    packed with any other. Why one number: the MLP and DDP jobs sleep through
    most of each step (a few % of a core), and two one-thread CNNs fit the two
    cores, so a packed pair does not slow down (1.0) unless other devices'
    jobs want the same cores, which no table can say; 0.5 is the simulator's
    neutral model (packing no better than taking turns)."""
    kinds = ("mlp", "cnn", "ddp")
    entry = {f"('{k}', 1)": dict({"null": 1.0}, **{f"('{o}', 1)": [pack_rate, pack_rate]
                                                    for o in kinds}) for k in kinds}
    with open(path, "w") as f:
        json.dump({cls: entry for cls in ("k80", "p100", "v100")}, f, indent=1)
