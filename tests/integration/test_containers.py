"""Jobs in real containers (runc; tests/pyhelpers/containers.py) joining the
node's gandivad, as docs/containers.md describes: each container has its own
pid, IPC and mount namespaces and /dev/shm, and gets gandivad's socket
directory and blocks directory bound in at the same paths, the build (under
/work) read-only, and an output directory of its own. The job is `gandiva run
-- python3 sched_job.py` inside the container (a small PyTorch MLP whose batch k
is seeded by k, so its loss history is the same however it is sliced,
suspended or restored).

Shown: two containers time-sliced by one gandivad train as each alone (loss
histories equal, bit for bit), with the kernel's pid of each job (not the
container's) in gandivad and their blocks in the blocks directory, not /dev/shm;
a containerised job suspended makes no progress and resumes; a checkpoint taken
in one container (to a directory named as the job sees it) is restored in a
new container; a container killed leaves its job failed and its device free;
a gandivad restarted takes a containerised job back (its host pid, its block);
a launch from inside a container is refused; one user's container cannot open
another user's block. The suspend, kill and restart scenarios run a job that
steps without PyTorch (importing it costs seconds of this machine's 2 cores)."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import BUILD, GANDIVA, GANDIVAD, HERE, PYTHON, wait_for

sys.path.insert(0, os.path.join(HERE, "..", "pyhelpers"))
import containers  # noqa: E402

JOB = os.path.join(HERE, "jobs", "sched_job.py")
# A job with boundaries and no PyTorch (its import costs seconds of this
# machine's two cores): N steps of 10 ms, then a line on stdout.
STEPPER = ("import sys, time, gandiva\n"
           "for _ in range(int(sys.argv[1])):\n"
           "    time.sleep(0.01)\n"
           "    gandiva.step()\n"
           "print('managed' if gandiva.managed() else 'unmanaged', flush=True)\n")
# OpenBLAS's kernel choice, as the host's environment makes it (this machine
# sets OPENBLAS_CORETYPE): another kernel rounds otherwise, and the losses
# would differ from the reference's in their last bits for that reason alone.
BLAS_ENV = {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS_")}
STEPS = 40
STEP_MS = 10


class Reference:
    """The job alone, on the host, without gandiva: the loss history to match.
    Started at once, in the background (beside the first test's containers);
    read when first needed."""

    def __init__(self, out):
        self.out = out
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.path.join(BUILD, "python"))
        env.pop("GANDIVA_CONTROL_BLOCK", None)
        self.proc = subprocess.Popen(
            [PYTHON, JOB, "--steps", str(STEPS), "--step-ms", "0", "--result", str(out)], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.got = None

    def __getitem__(self, key):
        if self.got is None:
            out, _ = self.proc.communicate(timeout=120)
            assert self.proc.returncode == 0, out
            self.got = json.loads(self.out.read_text())
        return self.got[key]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    r = Reference(tmp_path_factory.mktemp("ref") / "alone.json")
    yield r
    if r.proc.poll() is None:
        r.proc.kill()
        r.proc.wait()


class Node:
    """A root gandivad on one CPU device with 50 ms slices, its socket and state
    under a fresh directory in /tmp (a container's own /tmp hides the host's)."""

    def __init__(self, devices="cpu:1"):
        self.devices = devices
        self.root = subprocess.run(["mktemp", "-d", "/tmp/gd-ctr-XXXXXX"], capture_output=True,
                                   text=True, check=True).stdout.strip()
        os.chmod(self.root, 0o755)
        self.run_dir = os.path.join(self.root, "run")
        os.mkdir(self.run_dir)
        os.chmod(self.run_dir, 0o755)
        self.state = os.path.join(self.root, "state")
        self.endpoint = f"ipc://{self.run_dir}/gd.sock"
        self.log_path = os.path.join(self.root, "gandivad.log")
        self.log = open(self.log_path, "w")
        self.env = dict(os.environ, GANDIVA_ENDPOINT=self.endpoint)
        self.start()
        self.blocks = self.hello()["blocks_dir"]
        self.containers = []

    def start(self):
        self.proc = subprocess.Popen(
            [GANDIVAD, "--endpoint", self.endpoint, "--state-dir", self.state, "--devices", self.devices,
             "--slice-ms", "50", "--shared-socket", "--boundary-wait-s", "0"],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: self.cli("ps", check=False).returncode == 0, 20, "gandivad up",
                 log=self.read_log)

    def restart(self):
        """gandivad stopped (SIGTERM: its jobs run on) and started on the same state."""
        self.proc.terminate()
        self.proc.wait(timeout=20)
        self.start()

    def read_log(self):
        with open(self.log_path) as f:
            return f.read()

    def cli(self, *args, check=True):
        r = subprocess.run([GANDIVA, *args], env=self.env, capture_output=True, text=True,
                           timeout=60)
        if check:
            assert r.returncode == 0, f"gandiva {' '.join(args)}: {r.stderr}"
        return r

    def hello(self):
        sys.path.insert(0, os.path.join(BUILD, "python"))
        import gandiva
        return gandiva.Client(self.endpoint).hello()

    def jobs(self):
        return {j["name"]: j for j in json.loads(self.cli("ps", "--all", "--json").stdout)}

    def job(self, name):
        return self.jobs().get(name, {})

    def out_dir(self, name, uid=0):
        d = os.path.join(self.root, "out-" + name)
        os.mkdir(d)
        os.chown(d, uid, uid)
        return d

    def container(self, name, cmd, *, mounts=(), uid=0, env=None, blocks_at=None):
        """`cmd` in a container with the socket and blocks directories in it (the
        blocks at gandivad's path, or at blocks_at with GANDIVA_BLOCKS_DIR saying so)."""
        log = open(os.path.join(self.root, f"{name}.log"), "w")
        env = dict(env or {})
        if blocks_at:
            env["GANDIVA_BLOCKS_DIR"] = blocks_at
        mounts = [(self.run_dir, self.run_dir, False), (self.blocks, blocks_at or self.blocks, True),
                  *mounts]
        c = containers.Container(
            cmd, mounts=mounts, uid=uid, gid=uid, name=name, stdout=log, stderr=subprocess.STDOUT,
            env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "OMP_NUM_THREADS": "1",
                 "GANDIVA_ENDPOINT": self.endpoint, **BLAS_ENV, **env})
        c.log_path = log.name
        self.containers.append(c)
        return c

    def training(self, name, out, *, steps=STEPS, restore=None, uid=0, device=None):
        """`gandiva run` of the job in a new container; its result in out (host) as /out."""
        run = [GANDIVA, "run", "--name", name] + (["--device", device] if device else [])
        if restore:
            run += ["--restore", restore]
        return self.container(
            name, [*run, "--", PYTHON, JOB, "--steps", str(steps), "--step-ms", str(STEP_MS),
                   "--result", "/out/result.json"],
            mounts=[(out, "/out", True)], uid=uid)

    def stepper(self, name, steps, blocks_at=None):
        """`gandiva run` of STEPPER in a new container."""
        return self.container(name, [GANDIVA, "run", "--name", name, "--", PYTHON, "-c", STEPPER,
                                     str(steps)], blocks_at=blocks_at)

    def close(self):
        for c in self.containers:
            c.remove()
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def node():
    why = containers.runtime_problem()
    if why:
        pytest.skip(why)
    n = Node()
    yield n
    n.close()


def result(out):
    with open(os.path.join(out, "result.json")) as f:
        return json.load(f)


def log_of(c):
    with open(c.log_path) as f:
        return f.read()


def ns_pids(pid):
    """The pid's NSpid line: its pid in each pid namespace, outermost first."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("NSpid:"):
                return [int(p) for p in line.split()[1:]]
    return []


def parent_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def job_facts(pid):
    """What the host's kernel says of a job's process, read while it runs."""
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        cmdline = f.read()
    return {"ns_pids": ns_pids(pid), "parent_ns_pids": ns_pids(parent_of(pid)),
            "parent": parent_of(pid), "cmdline": cmdline,
            "pid_ns": os.readlink(f"/proc/{pid}/ns/pid"),
            "mnt_ns": os.readlink(f"/proc/{pid}/ns/mnt")}


class TorchRuns:
    """The two PyTorch scenarios at once under one gandivad (so that the suite
    takes about its longer one, not their sum): on cpu0 the pair a and b,
    time-sliced; on cpu1 the job "first", checkpointed from the host to /ckpt
    (its container's mount of the host's ckpt, a path the host does not have),
    its container then killed, and "second", a new container restoring it from
    its own mount of the same directory at /restore. What the tests assert is
    recorded here, each fact when it can be read."""

    def __init__(self, node):
        self.node = node
        self.outs = {n: node.out_dir(n) for n in ("a", "b", "second")}
        self.ckpt = node.out_dir("ckpt")
        self.pair = {n: node.training(n, self.outs[n], device="cpu0") for n in ("a", "b")}
        first = node.container(
            "first", [GANDIVA, "run", "--name", "first", "--device", "cpu1", "--", PYTHON, JOB,
                      # Steps of 100 ms (the same losses): the checkpoint lands
                      # well before its end, however late the machine lets it.
                      "--steps", str(STEPS), "--step-ms", "100",
                      "--result", "/ckpt/unused.json"],
            mounts=[(self.ckpt, "/ckpt", True)])
        wait_for(lambda: all(node.job(n).get("pid", 0) > 0 for n in self.pair), 60,
                 "both jobs started", log=node.read_log)
        jobs = node.jobs()
        self.facts = {n: job_facts(jobs[n]["pid"]) for n in self.pair}
        self.pids = {n: jobs[n]["pid"] for n in self.pair}
        self.blocks = {f: os.stat(os.path.join(node.blocks, f)) for f in os.listdir(node.blocks)}
        self.ids = {n: jobs[n]["id"] for n in jobs}
        self.gandivad_pid = node.hello()["pid"]
        self.host_shm = os.listdir("/dev/shm")

        wait_for(lambda: node.job("first").get("iterations", 0) >= 3, 60, "first to train",
                 log=node.read_log)
        job = node.job("first")["id"]
        self.before = node.job("first")["iterations"]
        self.checkpoint = node.cli("checkpoint", str(job), "--to", "/ckpt", check=False)
        self.after = node.job("first")["iterations"]
        self.saved = os.path.exists(os.path.join(self.ckpt, "state.gdck"))
        first.kill()
        containers.wait_gone(first)
        second = node.container(
            "second", [GANDIVA, "run", "--name", "second", "--device", "cpu1", "--restore",
                       "/restore", "--", PYTHON, JOB, "--steps", str(STEPS), "--step-ms",
                       str(STEP_MS), "--result", "/out/result.json"],
            mounts=[(self.ckpt, "/restore", False), (self.outs["second"], "/out", True)])
        self.exits = {n: c.wait(timeout=120) for n, c in (*self.pair.items(), ("second", second))}
        self.logs = {n: log_of(c) for n, c in (*self.pair.items(), ("second", second))}
        self.jobs = node.jobs()
        self.switches = json.loads(node.cli("switches", "--json").stdout)
        self.blocks_left = os.listdir(node.blocks)


@pytest.fixture(scope="module")
def torch_runs(reference):
    why = containers.runtime_problem()
    if why:
        pytest.skip(why)
    n = Node(devices="cpu:2")
    try:
        yield TorchRuns(n)
    finally:
        n.close()


def test_two_containers_are_time_sliced_and_train_as_each_alone(torch_runs, reference):
    r = torch_runs
    for n in ("a", "b"):
        f, pid = r.facts[n], r.pids[n]
        # gandivad holds the job's pid in its own namespace (the kernel's): the
        # training process, whose parent is the container's first (gandiva run, its 1).
        assert len(f["ns_pids"]) == 2 and f["ns_pids"][0] == pid and f["ns_pids"][1] != pid, f
        assert JOB.encode() in f["cmdline"]
        assert f["parent_ns_pids"] == [f["parent"], 1], f
        assert f["pid_ns"] != os.readlink("/proc/self/ns/pid")
        assert f["mnt_ns"] != os.readlink("/proc/self/ns/mnt")
        # Its block is a file in the blocks directory, owner-only.
        [block] = [b for b in r.blocks if b.endswith(f".{r.ids[n]}")]
        assert r.blocks[block].st_mode & 0o777 == 0o600
    # None in the host's /dev/shm.
    assert not [f for f in r.host_shm if f.startswith("gandiva.") and f".{r.gandivad_pid}." in f]
    for n in ("a", "b"):
        assert r.exits[n] == 0, r.logs[n]
        got = result(r.outs[n])
        assert got["losses"] == reference["losses"], f"{n}: trained otherwise than alone"
        assert got["weights_sha256"] == reference["weights_sha256"]
        assert r.jobs[n]["state"] == "exited" and r.jobs[n]["exit_code"] == 0
        assert r.jobs[n]["iterations"] >= STEPS - 1
    # Sliced: the device went from one to the other and back, more than once.
    ids = {r.jobs["a"]["id"], r.jobs["b"]["id"]}
    between = [s for s in r.switches if {s["from"], s["to"]} == ids]
    assert len(between) >= 3, r.switches
    assert not r.blocks_left, "an ended job's block stays behind"


def test_a_checkpoint_in_one_container_restores_in_another(torch_runs, reference):
    r = torch_runs
    # The directory as the job sees it: the job wrote its checkpoint itself.
    assert "checkpointed" in r.checkpoint.stdout, r.checkpoint.stdout + r.checkpoint.stderr
    assert r.saved and not os.path.exists("/ckpt")
    assert r.exits["second"] == 0, r.logs["second"]
    got = result(r.outs["second"])
    # It went on from where the checkpoint was (not from step 0), and trained
    # as one run never interrupted.
    assert got["resumed_at"] is not None and 0 < got["resumed_at"] < STEPS, got["resumed_at"]
    assert r.before - 1 <= got["resumed_at"] <= r.after + 1, (got["resumed_at"], r.before, r.after)
    assert got["losses"] == reference["losses"]
    assert got["weights_sha256"] == reference["weights_sha256"]
    assert r.jobs["first"]["state"] == "failed"  # its container was killed


def test_a_containerised_job_suspends_and_resumes(node):
    # This container has the blocks directory where the CDI spec puts it
    # (GANDIVA_BLOCKS_DIR), not at gandivad's path.
    c = node.stepper("s", 150, blocks_at="/run/gandiva-blocks")
    wait_for(lambda: node.job("s").get("iterations", 0) >= 5, 60, "the job to step",
             log=node.read_log)
    job = node.job("s")["id"]
    node.cli("suspend", str(job))
    wait_for(lambda: node.job("s")["state"] == "suspended", 20, "the job to park")
    held_at = node.job("s")["iterations"]
    time.sleep(0.5)  # 50 steps' time: none taken while suspended
    assert node.job("s")["iterations"] == held_at
    assert c.proc.poll() is None
    # A migration would start it on the other node outside any container.
    r = node.cli("migrate", str(job), "--to", "elsewhere", check=False)
    assert r.returncode != 0 and "runs in a container" in r.stderr, r.stderr
    node.cli("resume", str(job))
    assert c.wait(timeout=120) == 0, log_of(c)
    assert held_at < 150
    assert "managed" in log_of(c) and "unmanaged" not in log_of(c)
    done = node.job("s")
    assert done["state"] == "exited" and done["iterations"] >= 149, done


def test_a_killed_container_leaves_its_job_failed_and_its_device_free(node):
    c = node.stepper("doomed", 100000)
    wait_for(lambda: node.job("doomed").get("iterations", 0) >= 3, 60, "the job to step",
             log=node.read_log)
    assert len(os.listdir(node.blocks)) == 1
    c.kill()
    containers.wait_gone(c)
    wait_for(lambda: node.job("doomed")["state"] in ("failed", "exited"), 20,
             "gandivad to see the job end", log=node.read_log)
    job = node.job("doomed")
    assert job["state"] == "failed", job
    assert job["exit_reason"] == "lost", job  # gandiva run died with it: no exit status came
    devices = json.loads(node.cli("devices", "--json").stdout)
    assert devices[0]["jobs"] == [] and devices[0]["running"] == [], devices
    assert not os.listdir(node.blocks)


def test_a_restarted_gandivad_takes_a_containerised_job_back(node):
    c = node.stepper("kept", 100000)
    wait_for(lambda: node.job("kept").get("iterations", 0) >= 3, 60, "the job to step",
             log=node.read_log)
    before = node.job("kept")
    node.restart()
    # The same job, by its host pid and its block in the blocks directory, managed again.
    wait_for(lambda: node.job("kept").get("iterations", 0) > before["iterations"] + 3, 30,
             "the job to step under the new gandivad", log=node.read_log)
    after = node.job("kept")
    assert (after["id"], after["pid"]) == (before["id"], before["pid"])
    assert after["state"] in ("running", "suspending", "suspended"), after
    assert "re-adopted: pid" in node.read_log(), node.read_log()
    node.cli("suspend", str(after["id"]))
    wait_for(lambda: node.job("kept")["state"] == "suspended", 20, "the job to park")
    c.kill()
    containers.wait_gone(c)


def test_a_launch_from_a_container_is_refused(node):
    c = node.container("launcher", [GANDIVA, "run", "--detach", "--", "/usr/bin/true"])
    assert c.wait(timeout=60) != 0
    assert "inside a container" in log_of(c), log_of(c)
    assert "launcher" not in node.jobs()
    # Where containers mount the blocks from, for an operator.
    assert node.blocks == os.path.join(node.state, "blocks")
    assert f"control blocks of jobs in containers: {node.blocks}\n" in node.cli("devices").stdout


def security_helpers():
    """tests/security/conftest.py's users (gd-alice, gd-bob), created if missing."""
    import importlib.util
    path = os.path.join(HERE, "..", "security", "conftest.py")
    spec = importlib.util.spec_from_file_location("security_conftest", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_one_users_container_cannot_open_anothers_block(node):
    if not shutil.which("useradd"):
        pytest.skip("needs useradd to create the test's users")
    sec = security_helpers()
    sec.ensure_users()
    if sec.as_user("gd-bob", GANDIVA, "--help").returncode != 0:
        pytest.skip("the build is not readable by other users")
    alice, bob = (int(subprocess.run(["id", "-u", u], capture_output=True, text=True,
                                     check=True).stdout) for u in ("gd-alice", "gd-bob"))
    # Her job need not train: its block is made when it registers.
    c = node.container("alices", [GANDIVA, "run", "--name", "alices", "--", "/bin/sleep", "60"],
                       uid=alice)
    wait_for(lambda: node.job("alices").get("pid", 0) > 0, 30, "alice's job to start",
             log=lambda: node.read_log() + log_of(c))
    job = node.job("alices")
    [block] = [os.path.join(node.blocks, f) for f in os.listdir(node.blocks)]
    st = os.stat(block)
    assert st.st_uid == alice and st.st_mode & 0o777 == 0o600, (st.st_uid, oct(st.st_mode))
    # Bob's container has the same mounts; the kernel keeps him out of alice's
    # block, out of the directory's listing and from creating anything there,
    # and gandivad (his uid from SO_PEERCRED) from her job.
    probe = ("import os, sys\n"
             "def tried(f):\n"
             "    try:\n"
             "        f(); return 'allowed'\n"
             "    except PermissionError:\n"
             "        return 'denied'\n"
             f"print('open', tried(lambda: open({block!r}, 'r+b')))\n"
             f"print('list', tried(lambda: os.listdir({node.blocks!r})))\n"
             f"print('create', tried(lambda: open({node.blocks!r} + '/mine', 'w')))\n")
    spy = node.container("bobs", [PYTHON, "-c", probe], uid=bob)
    assert spy.wait(timeout=60) == 0, log_of(spy)
    said = log_of(spy)
    assert "open denied" in said and "list denied" in said and "create denied" in said, said
    kill = node.container("bobs-kill", [GANDIVA, "kill", str(job["id"])], uid=bob)
    assert kill.wait(timeout=60) != 0
    assert "may not" in log_of(kill), log_of(kill)
    assert node.job("alices")["state"] == "starting"  # not killed (it marks no boundaries)
    assert c.proc.poll() is None
