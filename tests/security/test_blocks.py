"""A job's control block is shared memory its user owns, so the user may do
anything to it: here, cut it to nothing (ftruncate) or fill the fields gandivad
reads as text with no end. gandivad (root) must survive it, end that job alone
saying why, and keep serving every other user's job."""

import json
import os
import subprocess

from conftest import BUILD, GANDIVA, HOSTILE_BLOCK, SYNTHETIC_JOB, as_user, cli, jobs, wait_for


def start_job(node, user, name):
    return subprocess.Popen(["runuser", "-u", user, "--", GANDIVA, "run", "--name", name, "--",
                             SYNTHETIC_JOB, "--mib", "1", "--iterations", "1000000",
                             "--iteration-ms", "5"],
                            env=node["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def training(node, name):
    return next((j for j in jobs(node).values() if j["name"] == name and j["iterations"] > 5), None)


# Alice's job is a process with no runtime in it (a sleep), so that only
# gandivad maps her block: its next heartbeat into the cut block is the fault.
REGISTER = """
import json, subprocess, sys
from gandiva.client import Client
c = Client()
job = c.call("register_job", name="cut", command=["sleep", "600"])["job"]
proc = subprocess.Popen(["sleep", "600"])
c.call("job_started", job=job, pid=proc.pid)
print(json.dumps({"job": job, "pid": proc.pid}), flush=True)
sys.exit(-proc.wait())  # 9 if SIGKILLed
"""


def test_a_user_who_cuts_their_block_short_ends_only_their_job(shared_node):
    node = shared_node
    env = dict(node["env"], PYTHONPATH=os.path.join(BUILD, "python"))
    bobs = start_job(node, "gd-bob", "bystander")
    alices = subprocess.Popen(["runuser", "-u", "gd-alice", "--", "/usr/bin/python3", "-c", REGISTER],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        started = json.loads(alices.stdout.readline())
        wait_for(lambda: training(node, "bystander"), 60, "bob's job training")
        name = f"/gandiva.{os.uname().nodename}.{node['proc'].pid}.{started['job']}"
        assert os.path.exists("/dev/shm" + name), name
        r = as_user("gd-alice", HOSTILE_BLOCK, "cut", name)
        assert r.returncode == 0, r.stderr
        ended = wait_for(lambda: jobs(node)[started["job"]]["state"] == "failed"
                         and jobs(node)[started["job"]], 30, "alice's job ended")
        assert "cut short by its user" in ended["exit_detail"], ended
        assert node["proc"].poll() is None, "gandivad died (SIGBUS)"
        assert alices.wait(timeout=30) == 9, "alice's process was not killed"
        # Bob's job trains on, and gandivad answers.
        bob = training(node, "bystander")
        wait_for(lambda: jobs(node)[bob["id"]]["iterations"] > bob["iterations"] + 5, 30,
                 "bob's job still training")
        assert cli(node, "gd-bob", "ps").returncode == 0
    finally:
        for p in (alices, bobs):
            p.kill()
            p.wait()
