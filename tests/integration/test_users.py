"""Per-user access on a shared node: gandivad runs as root with --shared-socket, real
users created by this test connect to its local socket, and the kernel's peer
credentials say who each caller is. A user acts on their own jobs only; another
user, not an admin, gets permission_denied; members of --admin-group and root act
on every job; reading is for everyone. The job's control block belongs to its
user, owner-only."""

import glob
import json
import os
import pwd
import shutil
import subprocess
import time

import pytest

from conftest import BUILD, GANDIVA, GANDIVAD, SYNTHETIC_JOB, wait_for

USERS = ("gd-alice", "gd-bob", "gd-carol")
ADMINS = "gd-admins"


def ensure_users():
    """Creates the group and users if missing. A second suite on this machine may
    create them at the same moment: then groupadd/useradd fail (the name is taken,
    or /etc/passwd is locked), so each is retried until it exists."""
    def exists(kind, name):
        return subprocess.run(["getent", kind, name], capture_output=True).returncode == 0

    def create(kind, name, cmd):
        deadline = time.monotonic() + 60
        while not exists(kind, name):
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0 and not exists(kind, name) and time.monotonic() > deadline:
                raise AssertionError(f"{' '.join(cmd)}: {r.stderr}")
            if r.returncode != 0:
                time.sleep(0.1)  # a lock held by the other suite's useradd: try again

    create("group", ADMINS, ["groupadd", "--system", ADMINS])
    for user in USERS:
        create("passwd", user, ["useradd", "--system", "--no-create-home", "--shell", "/bin/sh", user])
    deadline = time.monotonic() + 60
    while subprocess.run(["usermod", "-a", "-G", ADMINS, "gd-carol"], capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, "usermod -a -G gd-admins gd-carol kept failing"
        time.sleep(0.1)


def as_user(user, *args, env=None, **kw):
    return subprocess.run(["runuser", "-u", user, "--", *args], env=env, capture_output=True,
                          text=True, timeout=60, **kw)


def other_users_dir():
    """Creates the test's users (or skips) and returns a fresh directory under /tmp
    that every user can reach (pytest's tmp_path is root's alone)."""
    if os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("runuser"):
        pytest.skip("needs root, useradd and runuser to create and act as other users")
    if not os.path.exists(SYNTHETIC_JOB):
        pytest.skip("synthetic_state_job not built")
    ensure_users()
    if as_user("gd-bob", GANDIVA, "--help").returncode != 0:
        pytest.skip("the build is not readable by other users")
    root = subprocess.run(["mktemp", "-d", "/tmp/gd-users-XXXXXX"], capture_output=True,
                          text=True, check=True).stdout.strip()
    os.chmod(root, 0o755)
    return root


@pytest.fixture
def shared_node():
    root = other_users_dir()
    work = os.path.join(root, "work")
    os.mkdir(work)
    os.chmod(work, 0o777)
    endpoint = f"ipc://{root}/run/gd.sock"
    log = open(os.path.join(root, "gandivad.log"), "w")
    proc = subprocess.Popen([GANDIVAD, "--endpoint", endpoint, "--state-dir",
                             os.path.join(root, "state"), "--devices", "cpu:1", "--shared-socket",
                             "--admin-group", ADMINS, "--max-jobs-per-user", "1"], stdout=log, stderr=subprocess.STDOUT)
    env = dict(os.environ, GANDIVA_ENDPOINT=endpoint, OMP_NUM_THREADS="1")
    wait_for(lambda: subprocess.run([GANDIVA, "ps"], env=env, capture_output=True).returncode == 0,
             20, "gandivad up")
    yield {"root": root, "work": work, "env": env, "proc": proc}
    proc.terminate()
    proc.wait(timeout=20)
    log.close()
    shutil.rmtree(root, ignore_errors=True)


def cli(node, user, *args):
    if user == "root":
        return subprocess.run([GANDIVA, *args], env=node["env"], capture_output=True, text=True,
                               timeout=60)
    return as_user(user, GANDIVA, *args, env=node["env"])


def jobs(node, user="gd-bob"):
    r = cli(node, user, "ps", "--all", "--json")
    assert r.returncode == 0, r.stderr
    return {j["id"]: j for j in json.loads(r.stdout)}


def test_each_user_acts_on_their_own_jobs_and_admins_on_all(shared_node):
    node = shared_node
    result = os.path.join(node["work"], "alice.json")
    run = subprocess.Popen(["runuser", "-u", "gd-alice", "--", GANDIVA, "run", "--name", "alices",
                            "--", SYNTHETIC_JOB, "--mib", "1", "--iterations", "100000", "--result", result],
                           env=node["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    # Everyone reads: bob sees alice's job training.
    job = wait_for(lambda: next((j for j in jobs(node).values()
                                 if j["name"] == "alices" and j["iterations"] > 10), None), 60,
                   "alice's job training")
    jid = str(job["id"])

    # Its control block is alice's, owner-only.
    blocks = glob.glob(f"/dev/shm/gandiva.*.{node['proc'].pid}.{jid}")
    assert len(blocks) == 1, blocks
    st = os.stat(blocks[0])
    assert st.st_uid == pwd.getpwnam("gd-alice").pw_uid and st.st_mode & 0o777 == 0o600

    # Bob, not an admin, may not touch it, nor the node.
    for args in (("suspend", jid), ("kill", jid), ("checkpoint", jid, "--to", node["work"])):
        r = cli(node, "gd-bob", *args)
        assert r.returncode != 0, args
        assert "belongs to gd-alice" in r.stderr and "may not" in r.stderr, r.stderr
    r = cli(node, "gd-bob", "slice", "--device", "cpu0", "--ms", "60")
    assert r.returncode != 0 and "is for the node's admins" in r.stderr, r.stderr
    assert jobs(node)[job["id"]]["state"] == "running"

    # Alice may, on her own job.
    assert cli(node, "gd-alice", "suspend", jid).returncode == 0
    wait_for(lambda: jobs(node)[job["id"]]["state"] == "suspended", 30, "suspended by alice")
    assert cli(node, "gd-alice", "resume", jid).returncode == 0
    wait_for(lambda: jobs(node)[job["id"]]["state"] == "running", 30, "resumed by alice")

    # Carol, in --admin-group, and root act on every job.
    assert cli(node, "gd-carol", "suspend", jid).returncode == 0
    wait_for(lambda: jobs(node)[job["id"]]["state"] == "suspended", 30, "suspended by carol")
    assert cli(node, "root", "resume", jid).returncode == 0
    r = cli(node, "gd-carol", "slice", "--device", "cpu0", "--ms", "60")
    assert r.returncode == 0, r.stderr

    # One live job per user here (--max-jobs-per-user 1): alice's second is refused,
    # bob's first is not.
    r = as_user("gd-alice", GANDIVA, "run", "--", SYNTHETIC_JOB, "--mib", "1", "--iterations", "5",
                env=node["env"])
    assert r.returncode != 0 and "the limit per user" in r.stderr, r.stderr
    r = as_user("gd-bob", GANDIVA, "run", "--", SYNTHETIC_JOB, "--mib", "1", "--iterations", "5",
                env=node["env"])
    assert r.returncode == 0, r.stderr

    # Alice ends her job.
    assert cli(node, "gd-alice", "kill", jid).returncode == 0
    assert run.wait(timeout=60) != 0
    assert jobs(node)[job["id"]]["state"] in ("failed", "exited")


ATTACK = """
import json, sys
from gandiva.client import Client, GandivaError
c = Client()
job = c.call("register_job", name="attack", command=["sleep"])["job"]
out = {"job": job}
try:
    c.call("job_started", job=job, pid=int(sys.argv[1]))
    out["started"] = "ok"
except GandivaError as e:
    out["started"] = e.code + ": " + e.message
try:
    c.call("kill", job=job, signal=9)
    out["kill"] = "ok"
except GandivaError as e:
    out["kill"] = e.code + ": " + e.message
print(json.dumps(out))
"""


def test_a_user_cannot_make_root_kill_a_process_they_could_not(shared_node):
    """A user registers a job and reports a process of root's as its own, then
    asks for it to be killed: gandivad (root) must refuse the report, and kill
    nothing. The same user's own process is taken."""
    node = shared_node
    env = dict(node["env"], PYTHONPATH=os.path.join(BUILD, "python"))
    roots = subprocess.Popen(["sleep", "600"])
    try:
        r = as_user("gd-bob", "/usr/bin/python3", "-c", ATTACK, str(roots.pid), env=env)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["started"].startswith("permission_denied") and "could signal itself" in out["started"], out
        assert out["kill"].startswith("failed_precondition") and "no process" in out["kill"], out
        time.sleep(0.2)
        assert roots.poll() is None, "root's process was killed for another user"
        assert node["proc"].poll() is None, "gandivad died"
        # Alice's own process is hers to report, and to have killed (bob's one
        # job here is the refused one: --max-jobs-per-user 1).
        alices = subprocess.Popen(["runuser", "-u", "gd-alice", "--", "sleep", "600"])
        try:
            uid = pwd.getpwnam("gd-alice").pw_uid
            her_sleep = wait_for(lambda: _process_of(uid, b"sleep\x00600\x00", alices.pid), 10,
                                 "alice's sleep")
            r = as_user("gd-alice", "/usr/bin/python3", "-c", ATTACK, str(her_sleep), env=env)
            assert r.returncode == 0, r.stderr
            out = json.loads(r.stdout)
            assert out["started"] == "ok" and out["kill"] == "ok", out
            assert alices.wait(timeout=30) != 0, "alice's own process was not killed"
        finally:
            alices.kill()
    finally:
        roots.kill()
        roots.wait()


def _process_of(uid, cmdline, started):
    """The pid of `started`, or of its child, if it runs `cmdline` as `uid`
    (runuser may fork its command or be it)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read() != cmdline:
                    continue
            with open(f"/proc/{pid}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            if os.stat(f"/proc/{pid}").st_uid == uid and started in (pid, parent):
                return pid
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
    return None


def test_without_shared_socket_other_users_cannot_connect():
    root = other_users_dir()
    endpoint = f"ipc://{root}/gd.sock"
    proc = subprocess.Popen([GANDIVAD, "--endpoint", endpoint, "--devices", "cpu:1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        env = dict(os.environ, GANDIVA_ENDPOINT=endpoint)
        wait_for(lambda: subprocess.run([GANDIVA, "ps"], env=env, capture_output=True)
                 .returncode == 0, 20, "gandivad up")
        assert os.stat(f"{root}/gd.sock").st_mode & 0o777 == 0o600
        r = subprocess.run(["runuser", "-u", "gd-bob", "--", GANDIVA, "ps"],
                           env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode != 0
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        shutil.rmtree(root, ignore_errors=True)
