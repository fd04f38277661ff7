"""Shared by the adversarial suite: paths into the build, real users created with
useradd (the suite runs as root in CI; it skips otherwise), and a root gandivad
with --shared-socket that those users attack."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

BUILD = os.environ.get("GANDIVA_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
GANDIVA = os.path.join(BUILD, "cli", "gandiva")
GANDIVAD = os.path.join(BUILD, "node", "gandivad")
SYNTHETIC_JOB = os.path.join(BUILD, "bench", "migration", "synthetic_state_job")
# The attacker's tool for their own control block (hostile_block.cc).
HOSTILE_BLOCK = os.path.join(BUILD, "tests", "security", "hostile_block")

sys.path.insert(0, os.path.join(BUILD, "python"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyhelpers"))
from polling import wait_for  # noqa: E402,F401  (the suites' one poll loop)


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


# Two devices: two users' jobs land on different ones (least loaded first), so
# that one user's job that never reaches a boundary (a bare process, as some
# attacks register) does not hold the other's device in its time slice.
@pytest.fixture
def shared_node():
    root = other_users_dir()
    work = os.path.join(root, "work")
    os.mkdir(work)
    os.chmod(work, 0o777)
    endpoint = f"ipc://{root}/run/gd.sock"
    log = open(os.path.join(root, "gandivad.log"), "w")
    proc = subprocess.Popen([GANDIVAD, "--endpoint", endpoint, "--state-dir",
                             os.path.join(root, "state"), "--devices", "cpu:2", "--shared-socket",
                             "--admin-group", ADMINS, "--max-jobs-per-user", "1"], stdout=log, stderr=subprocess.STDOUT)
    env = dict(os.environ, GANDIVA_ENDPOINT=endpoint, OMP_NUM_THREADS="1")
    wait_for(lambda: subprocess.run([GANDIVA, "ps"], env=env, capture_output=True).returncode == 0,
             20, "gandivad up")
    node = {"root": root, "work": work, "env": env, "proc": proc}
    yield node
    # No job outlives its test: each one still live is killed through gandivad
    # (which could not be, if the test killed gandivad: then its jobs fail open).
    if proc.poll() is None:
        for job in jobs(node, "root").values():
            if job["state"] not in ("exited", "failed", "migrated"):
                cli(node, "root", "kill", str(job["id"]), "--signal", "9")
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



def process_of(uid, cmdline, started):
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
