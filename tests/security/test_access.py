"""Per-user access on a shared node: gandivad runs as root with --shared-socket, real
users created by this test connect to its local socket, and the kernel's peer
credentials say who each caller is. A user acts on their own jobs only; another
user, not an admin, gets permission_denied; members of --admin-group and root act
on every job; reading is for everyone. The job's control block belongs to its
user, owner-only."""

import glob
import os
import pwd
import shutil
import subprocess

from conftest import BUILD, GANDIVA, GANDIVAD, SYNTHETIC_JOB, as_user, cli, jobs, other_users_dir, wait_for


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


def test_a_users_launched_job_runs_as_that_user_never_as_root(shared_node):
    """`gandiva run --detach` (launch) from a user: before, launch was refused to
    users, and every launched job ran as gandivad's user (root here). Now a user
    launches for themselves only, and the job runs as them: its processes, its
    control block and what it writes are theirs."""
    node = shared_node
    out = os.path.join(node["work"], "whoami")
    r = as_user("gd-alice", GANDIVA, "run", "--detach", "--name", "mine", "--", "sh", "-c",
                f"id -u > {out}; id -G >> {out}", env=node["env"], cwd=node["work"])
    assert r.returncode == 0, r.stderr
    wait_for(lambda: os.path.exists(out) and os.path.getsize(out) > 0, 30, "the job's output")
    alice = pwd.getpwnam("gd-alice")
    with open(out) as f:
        uid, groups = f.read().split("\n")[:2]
    assert int(uid) == alice.pw_uid, "the launched job did not run as alice"
    assert os.stat(out).st_uid == alice.pw_uid
    assert "0" not in groups.split(), "the job kept root's groups"
    job = wait_for(lambda: next((j for j in jobs(node).values() if j["name"] == "mine"
                                 and j["state"] == "exited"), None), 30, "the job ended")
    assert job["exit_code"] == 0, job
    # Another's uid, or root's, may not be asked for.
    env = dict(node["env"], PYTHONPATH=os.path.join(BUILD, "python"))
    r = as_user("gd-alice", "/usr/bin/python3", "-c",
                "from gandiva.client import Client, GandivaError\n"
                "try:\n"
                "    Client().call('launch', command=['id'], cwd='/', uid=0)\n"
                "    print('ran')\n"
                "except GandivaError as e:\n"
                "    print(e.code, e.message)\n", env=env)
    assert r.stdout.startswith("permission_denied") and "for itself only" in r.stdout, r.stdout
