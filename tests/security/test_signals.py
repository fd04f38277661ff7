"""Signals on a shared node: gandivad runs as root, so a process it signals or
freezes for a user's job must be one that user could signal themselves. A user
who reports another's process as their job's is refused, and nothing is killed."""

import json
import os
import pwd
import subprocess
import time

from conftest import BUILD, GANDIVA, HOSTILE_BLOCK, SYNTHETIC_JOB, as_user, cli, jobs, process_of, wait_for

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
            her_sleep = wait_for(lambda: process_of(uid, b"sleep\x00600\x00", alices.pid), 10,
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


def test_a_gang_rank_cannot_name_another_users_process(shared_node):
    """A rank's control block is its user's: alice writes the pid of root's
    process into rank 0's block, as if it were her rank. gandivad must not take
    it: the gang fails at once, saying why, and when her job ends nothing of
    root's is killed (before, ending the gang SIGKILLed every rank's pid as
    read from the blocks)."""
    node = shared_node
    roots = subprocess.Popen(["sleep", "600"])
    try:
        # Rank 0 is only the forged pid; rank 1 is a real job of hers.
        attack = (f'{HOSTILE_BLOCK} write-pid "$GANDIVA_CONTROL_BLOCK.r0" {roots.pid} && '
                  f'LOCAL_RANK=1 exec {SYNTHETIC_JOB} --mib 1 --iterations 100000 --iteration-ms 5')
        run = subprocess.Popen(["runuser", "-u", "gd-alice", "--", GANDIVA, "run", "--ranks", "2",
                                "--name", "forged", "--", "sh", "-c", attack],
                               env=node["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        job = wait_for(lambda: next((j for j in jobs(node).values() if j["name"] == "forged"
                                     and j["state"] in ("failed", "exited")), None), 60,
                       "the forged gang to end")
        assert "not its user's" in job["gang_error"], job
        assert run.wait(timeout=60) != 0
        time.sleep(0.2)
        assert roots.poll() is None, "root's process was killed for alice's gang"
        assert node["proc"].poll() is None, "gandivad died"
        assert cli(node, "gd-bob", "ps").returncode == 0, "gandivad stopped serving"
    finally:
        roots.kill()
        roots.wait()
