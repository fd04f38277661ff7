"""Jobs the scheduler starts, and jobs that move, run as the user who submitted
them. Before, the scheduler passed no user to its nodes, so every job it
started ran as the nodes' gandivad (root), and any caller of the scheduler
could cancel any job; a job that migrated ran as the destination's gandivad
user (a migration of another user's job was refused for that reason). Now the
scheduler records its submitter's uid (from the kernel: SO_PEERCRED), launches
with it, and lets a user cancel and read only their own jobs; a migration
carries the job's uid, and the destination starts the copy as that user,
never as root."""

import json
import os
import pathlib
import pwd
import subprocess
import sys

import pytest

from conftest import (ADMINS, BUILD, GANDIVA, SYNTHETIC_JOB, as_user, other_users_dir,
                      wait_for)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import nodes  # noqa: E402  (the integration suite's multi-node helper)

from gandiva.client import Client, GandivaError  # noqa: E402


def uid_of(user):
    return pwd.getpwnam(user).pw_uid


def process_uid(pid):
    """The real uid of a running process (its /proc entry's owner is the effective one)."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Uid:"))


@pytest.fixture
def cluster():
    root = pathlib.Path(other_users_dir())
    work = root / "work"
    work.mkdir()
    os.chmod(work, 0o777)
    (root / "keys").mkdir()
    ops_key, ops_public = nodes.keygen(root / "keys", "ops")
    shared = ["--shared-socket", "--admin-group", ADMINS]
    a, b = nodes.Node(root, "a", extra=shared), nodes.Node(root, "b", extra=shared)
    a.start([ops_public], [("b", b.tcp, b.public)], peer_keys=[b.public])
    b.start([ops_public], [("a", a.tcp, a.public)], peer_keys=[a.public])
    (root / "nodes").write_text(f"a {a.endpoint}\nb {b.endpoint}\n")
    endpoint = f"ipc://{root}/sched/api/sched.sock"
    log = open(root / "scheduler.log", "w")
    sched = subprocess.Popen(
        [GANDIVA, "scheduler", "--nodes", str(root / "nodes"), "--state-dir", str(root / "sched"),
         "--policy", "fifo", "--pass-ms", "200", "--endpoint", endpoint, "--shared-socket",
         "--admin-group", ADMINS], stdout=log, stderr=subprocess.STDOUT)
    env = dict(os.environ, GANDIVA_SCHEDULER=endpoint, OMP_NUM_THREADS="1",
               PYTHONPATH=os.path.join(BUILD, "python"))
    wait_for(lambda: sched.poll() is not None or subprocess.run(
        [GANDIVA, "queue"], env=env, capture_output=True).returncode == 0, 30, "the scheduler up")
    assert sched.poll() is None, (root / "scheduler.log").read_text()
    c = {"root": root, "work": work, "env": env, "a": a, "b": b, "ops_key": ops_key,
         "sched": sched}
    yield c
    sched.terminate()
    sched.wait(timeout=20)
    log.close()
    for n in (a, b):
        for job in n.jobs():
            if job["state"] not in ("exited", "failed", "migrated"):
                n.cli("kill", str(job["id"]), "--signal", "9", check=False)
        n.stop()
    subprocess.run(["rm", "-rf", str(root)])


def queue(c):
    r = subprocess.run([GANDIVA, "queue", "--all", "--json"], env=c["env"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return {j["id"]: j for j in json.loads(r.stdout)["jobs"]}


def submit(c, user, *cmd):
    r = as_user(user, GANDIVA, "submit", "--cwd", str(c["work"]), "--", *cmd, env=c["env"])
    assert r.returncode == 0, r.stderr
    return int(r.stdout.strip())


def running_pid(c, job):
    """The pid of the scheduler's job `job` on its node, once it runs."""
    j = wait_for(lambda: (lambda q: q if q["state"] == "running" and q["node_job"] else None)(
        queue(c)[job]), 60, f"scheduler job {job} running")
    node = c[j["node"]]
    return wait_for(lambda: node.job(j["node_job"]).get("pid"), 30, "its process"), j


def call_as(user, c, fields):
    """A raw submit to the scheduler as `user`, through the Python client: what
    the CLI would not send. Returns the client's error text, or "" if accepted."""
    script = ("import json, sys\nfrom gandiva.client import SchedulerClient, GandivaError\n"
              "try:\n    SchedulerClient().call('submit', **json.loads(sys.argv[1]))\n"
              "except GandivaError as e:\n    print(e)\n")
    r = as_user(user, sys.executable, "-c", script, json.dumps(fields), env=c["env"])
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_a_submitted_job_runs_as_its_submitter_and_only_they_or_an_admin_cancel_it(cluster):
    c = cluster
    alice = uid_of("gd-alice")
    job_cmd = (SYNTHETIC_JOB, "--mib", "1", "--iterations", "100000", "--iteration-ms", "10")
    first, second = submit(c, "gd-alice", *job_cmd), submit(c, "gd-alice", *job_cmd)
    for job in (first, second):
        pid, j = running_pid(c, job)
        assert process_uid(pid) == alice, f"job {job} runs as uid {process_uid(pid)}, not gd-alice's"
        assert j["uid"] == alice and j["user"] == "gd-alice", j

    # A submit that would run as root, or as another user, is refused.
    fields = {"command": ["/bin/true"], "cwd": str(c["work"])}
    assert "never as root" in call_as("gd-bob", c, dict(fields, uid=0))
    assert "may submit jobs for itself only" in call_as("gd-bob", c, dict(fields, uid=alice))

    # Bob may neither cancel alice's job nor read its output; it goes on.
    for args in (("cancel", str(first)), ("logs", "--scheduler", str(first))):
        r = as_user("gd-bob", GANDIVA, *args, env=c["env"])
        assert r.returncode != 0 and "belongs to gd-alice" in r.stderr, r.stderr
    assert queue(c)[first]["state"] == "running"
    # Alice cancels her own; carol, an admin, cancels alice's other one.
    r = as_user("gd-alice", GANDIVA, "cancel", str(first), env=c["env"])
    assert r.returncode == 0, r.stderr
    r = as_user("gd-carol", GANDIVA, "cancel", str(second), env=c["env"])
    assert r.returncode == 0, r.stderr
    wait_for(lambda: all(queue(c)[j]["state"] == "cancelled" for j in (first, second)), 60,
             "both jobs cancelled")


def test_a_migrated_job_runs_as_its_user_on_the_destination(cluster):
    c = cluster
    a, b = c["a"], c["b"]
    alice = uid_of("gd-alice")
    result = c["work"] / "mover.json"
    r = as_user("gd-alice", GANDIVA, "run", "--detach", "--name", "mover", "--", SYNTHETIC_JOB,
                "--mib", "1", "--iterations", "400", "--iteration-ms", "10", "--result",
                str(result), env=dict(c["env"], GANDIVA_ENDPOINT=a.endpoint), cwd=str(c["work"]))
    assert r.returncode == 0, r.stderr
    job = wait_for(lambda: next((j for j in a.jobs() if j["name"] == "mover" and
                                 j["iterations"] > 20), None), 60, "the job training on a")
    a.cli("migrate", str(job["id"]), "--to", "b")
    copy = wait_for(lambda: next((j for j in b.jobs() if j["name"] == "mover" and j["pid"]), None),
                    60, "its copy on b")
    assert process_uid(copy["pid"]) == alice, "the copy runs as another user than the job's"
    done = wait_for(lambda: (lambda j: j if j["state"] in ("exited", "failed") else None)(
        b.job(copy["id"])), 60, "the job ending on b")
    assert done["exit_code"] == 0, b.read_log()
    assert os.stat(result).st_uid == alice, "its result was written by another user"


def test_a_migration_never_starts_a_copy_as_root_or_as_no_user(cluster):
    c = cluster
    b = c["b"]
    client = Client(b.tcp, key=c["ops_key"], server_key=b.public)
    fields = {"name": "intruder", "command": ["/bin/sleep", "30"], "cwd": "/",
              "env": {"PATH": "/usr/bin:/bin"}, "source_node": "a", "source_job": 1}
    with pytest.raises(GandivaError) as e:
        client.call("migrate_prepare", uid=0, **fields)
    assert e.value.code == "permission_denied" and "never as root" in e.value.message
    with pytest.raises(GandivaError) as e:
        client.call("migrate_prepare", uid=3999999, **fields)
    assert e.value.code == "failed_precondition" and "no user of node b" in e.value.message
    assert not [j for j in b.jobs() if j["name"] == "intruder" and j["state"] == "running"]
