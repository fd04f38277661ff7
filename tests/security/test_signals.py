"""Signals on a shared node: gandivad runs as root, so a process it signals or
freezes for a user's job must be one that user could signal themselves. A user
who reports another's process as their job's is refused, and nothing is killed."""

import json
import os
import pwd
import subprocess
import time

from conftest import BUILD, as_user, process_of, wait_for

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
