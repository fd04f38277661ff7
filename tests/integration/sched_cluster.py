"""A small real cluster for the live scheduler's tests: gandivad nodes on this
machine (each its own Unix socket and CURVE TCP endpoint, peers of each other
so jobs can migrate between them) and a `gandiva scheduler` over them,
talking to each node on its Unix socket."""

import json
import os
import signal
import subprocess

import nodes
from conftest import BUILD, GANDIVA, PYTHON, HERE

SCHED_JOB = os.path.join(HERE, "jobs", "sched_job.py")


class SchedCluster:
    """lan: a nodes.NetnsLan holding a namespace per node name. Then each node
    runs in its namespace, and the scheduler, on the host, talks to the nodes
    over CURVE TCP on the LAN (its own key, which the nodes authorize) instead
    of their Unix sockets."""

    def __init__(self, root, names=("a", "b"), devices="cpu:1", lan=None, node_flags=()):
        (root / "keys").mkdir()
        self.root = root
        self.lan = lan
        self.nodes = []
        for n in names:
            ns, address = lan.spaces[n] if lan else (None, "127.0.0.1")
            self.nodes.append(nodes.Node(root, n, address=address, netns=ns,
                                         extra=["--devices", devices, *node_flags]))
        self.key, self.public = nodes.keygen(root / "keys", "scheduler")
        publics = [n.public for n in self.nodes] + [self.public]
        for n in self.nodes:
            n.start(publics, [(m.name, m.tcp, m.public) for m in self.nodes if m is not n])
        self.nodes_file = root / "nodes"
        self.nodes_file.write_text("".join(
            f"{n.name} {n.tcp} {n.public}\n" if lan else f"{n.name} {n.endpoint}\n"
            for n in self.nodes))
        self.state = root / "sched"
        self.endpoint = f"ipc://{root}/sched.sock"
        self.env = dict(os.environ, GANDIVA_SCHEDULER=self.endpoint, OMP_NUM_THREADS="1")
        self.proc = None

    def node(self, name):
        return next(n for n in self.nodes if n.name == name)

    def start(self, *flags, policy="fifo"):
        self.log = open(self.root / "scheduler.log", "a")
        self.proc = subprocess.Popen(
            [GANDIVA, "scheduler", "--nodes", str(self.nodes_file), "--state-dir", str(self.state),
             "--policy", policy, "--pass-ms", "200", *(("--key", str(self.key)) if self.lan else ()),
             *flags],
            env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        nodes.wait_for(lambda: self.cli("queue", check=False).returncode == 0 or self.proc.poll() is not None,
                       30, "the scheduler to answer")
        assert self.proc.poll() is None, self.read_log()

    def read_log(self):
        return (self.root / "scheduler.log").read_text()

    def kill(self, sig=signal.SIGKILL):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=20)

    def stop(self):
        self.kill(signal.SIGTERM)
        for n in self.nodes:
            n.stop()

    def cli(self, *args, check=True, timeout=60):
        r = subprocess.run([GANDIVA, *args], env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        if check:
            assert r.returncode == 0, f"gandiva {' '.join(args)}: {r.stderr}\n{self.read_log()}"
        return r

    def submit(self, *cmd, flags=()):
        return int(self.cli("submit", *flags, "--", *cmd).stdout.strip())

    def submit_job(self, steps, step_ms, result, flags=()):
        return self.submit(PYTHON, SCHED_JOB, "--steps", str(steps), "--step-ms", str(step_ms),
                           "--result", str(result), flags=flags)

    def queue(self):
        return json.loads(self.cli("queue", "--all", "--json").stdout)

    def job(self, job_id):
        return next(j for j in self.queue()["jobs"] if j["id"] == job_id)

    def wait_ended(self, job_ids, timeout=120):
        def ended():
            jobs = {j["id"]: j for j in self.queue()["jobs"]}
            return all(jobs[i]["state"] in ("finished", "failed", "cancelled") for i in job_ids) and jobs
        return nodes.wait_for(ended, timeout, f"jobs {job_ids} to end")


_reference_digests = {}  # by steps: the job is seeded, every run of it ends the same


def reference_digest(tmp_path, steps):
    """The weights of an uninterrupted run of sched_job.py, outside gandiva."""
    if steps not in _reference_digests:
        out = tmp_path / "reference.json"
        env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"), OMP_NUM_THREADS="1")
        subprocess.run([PYTHON, SCHED_JOB, "--steps", str(steps), "--step-ms", "0", "--result", str(out)],
                       env=env, check=True, capture_output=True)
        _reference_digests[steps] = json.loads(out.read_text())["weights_sha256"]
    return _reference_digests[steps]
