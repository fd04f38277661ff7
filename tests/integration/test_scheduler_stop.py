"""The policy says whether a preempted job is parked or stopped. On a GPU
whose memory cannot hold both jobs, LAS preempting a restartable CUDA job
for a newcomer of the same kind has it checkpointed and stopped (its memory
leaves the device), not parked; the job later restarts from that checkpoint
and ends with every device byte an uninterrupted run has. Real gandivad and
scheduler; the CUDA program runs under the real shim against the CPU
stand-in for libcuda.so.1 (a test double: there is no GPU here)."""

import json
import os
import re
import signal
import subprocess

import nodes
from sched_cluster import SchedCluster
from standin_gpu import CKPT_APP as APP, CUBIN, SHIM, STANDIN_DIR, STANDIN_DRIVER, built

MIB = 1 << 20
FIRST_BYTES = 40 * MIB  # two such jobs do not fit on the 64 MiB device below
ITERATIONS = 300

pytestmark = built(SHIM, STANDIN_DRIVER, APP, CUBIN)


def app_cmd(result, sleep_ms):
    return [APP, "--image", CUBIN, "--iterations", str(ITERATIONS), "--sleep-ms", str(sleep_ms),
            "--first-bytes", str(FIRST_BYTES), "--result", str(result)]


def cuda_env():
    env = dict(os.environ, LD_LIBRARY_PATH=STANDIN_DIR, LD_PRELOAD=SHIM)
    env.pop("GANDIVA_CONTROL_BLOCK", None)
    return env


def test_las_stops_a_job_the_newcomer_does_not_fit_beside(tmp_path):
    out = tmp_path / "reference.json"
    subprocess.run(app_cmd(out, 0), check=True, env=cuda_env(), capture_output=True, timeout=120)
    reference = json.loads(out.read_text())["digest"]

    cluster = SchedCluster(tmp_path, names=("a",), devices="gpu:1",
                           node_flags=("--device-memory-mib", "64"))
    try:
        cluster.start("--las-thresholds", "1,1000", policy="las")
        cluster.env.update(cuda_env())  # what submitted jobs run with (the shim is inert in the CLI)
        flags = ("--restartable", "--kind", "cuda-loop")
        first = cluster.submit(*app_cmd(tmp_path / "first.json", 20), flags=flags + ("--name", "first"))
        nodes.wait_for(lambda: cluster.job(first)["attained_s"] > 1.5, 60, "a second of service")
        second = cluster.submit(*app_cmd(tmp_path / "second.json", 5), flags=flags + ("--name", "second"))
        stopped = nodes.wait_for(
            lambda: (j := cluster.job(first))["state"] == "queued" and j["checkpoint_dir"] and j,
            30, "the preempted job to be stopped")
        assert stopped["node"] == "", stopped
        jobs = cluster.wait_ended([first, second], timeout=180)
        assert jobs[first]["state"] == jobs[second]["state"] == "finished", jobs
        assert jobs[first]["attempt"] == 2, "launched again, from its checkpoint"
        result = json.loads((tmp_path / "first.json").read_text())
        assert result["start_iteration"] > 0, "restarted from its checkpoint, not from the start"
        assert result["digest"] == reference
        assert json.loads((tmp_path / "second.json").read_text())["digest"] == reference
        # Then the newcomer, demoted in its turn, yields to the first job (first
        # in their level): it is stopped too, and restarts from its checkpoint.
        restarted = [j for j in (first, second) if jobs[j]["attempt"] == 2]
        cluster.kill(signal.SIGTERM)
        log = cluster.read_log()
        assert log.count("preempted to stop") == len(restarted), log
        actions = re.search(r"actions: (.*)", log).group(1).split()
        counts = dict(zip(actions[::2], map(int, actions[1::2])))
        assert counts["stops"] == counts["suspends"] == len(restarted) >= 1, counts  # none parked
        nodes.wait_for(lambda: all(j["state"] in ("exited", "failed")
                                   for j in cluster.node("a").jobs()), 30, "every run to end")
    finally:
        cluster.stop()
