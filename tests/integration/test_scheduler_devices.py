"""The live scheduler with jobs across several devices of a node: a real
2-rank DDP job over gloo submitted with --gpus 2 runs as one gandivad job
across both devices of a node (bitwise the losses of an undisturbed run), and
the gandiva policy grows a restartable job onto a node's idle device and
shrinks it back when growing did not pay, each time by checkpoint and
relaunch, with the weights of an uninterrupted run at the end."""

import json
import os
import signal
import subprocess

import nodes
from conftest import BUILD
from sched_cluster import SchedCluster, reference_digest
from test_gang import ddp_cmd, read


def test_a_job_of_two_devices_runs_across_both_devices_of_a_node(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"), OMP_NUM_THREADS="1")
    env.pop("GANDIVA_CONTROL_BLOCK", None)
    subprocess.run(ddp_cmd(tmp_path / "reference", iterations=60), check=True, env=env,
                   capture_output=True, timeout=120)
    reference = [read(tmp_path / "reference", k) for k in range(2)]
    cluster = SchedCluster(tmp_path, names=("a",), devices="cpu:2")
    try:
        cluster.start(policy="fifo")
        out = tmp_path / "ddp"
        job = cluster.submit(*ddp_cmd(out, iterations=60), flags=("--gpus", "2", "--ranks", "2"))
        jobs = cluster.wait_ended([job], timeout=120)
        assert jobs[job]["state"] == "finished", jobs[job]
        assert jobs[job]["device"] == "cpu0,cpu1", jobs[job]
        run = cluster.node("a").job(jobs[job]["node_job"])
        assert run["devices"] == ["cpu0", "cpu1"] and run["ranks"] == 2, run
        for k in range(2):
            got = read(out, k)
            assert got["done"] and got["losses"] == reference[k]["losses"], f"rank {k}"
        assert [read(out, k)["device"] for k in range(2)] == ["cpu0", "cpu1"]
    finally:
        cluster.stop()


def test_gandiva_grows_an_idle_node_s_job_and_shrinks_it_back_by_checkpoint(tmp_path):
    # One job alone on a node of two devices: the gandiva policy grows it onto
    # the idle one (Resize: checkpoint, stop, relaunch across both from the
    # checkpoint). The job has one process, so two devices do not make it
    # faster: the next introspection round measures no gain and shrinks it
    # back the same way. Every step runs once: the weights are an
    # uninterrupted run's.
    steps = 400
    reference = reference_digest(tmp_path, steps)
    cluster = SchedCluster(tmp_path, names=("a",), devices="cpu:2")
    try:
        cluster.start("--interval", "2", policy="gandiva")
        job = cluster.submit_job(steps, 25, tmp_path / "job.json", flags=("--restartable",))
        seen = []  # (device, rate) of the job running, as the queue shows it

        def grown():
            j = cluster.job(job)
            if j["state"] == "running":
                seen.append((j["device"], j["rate"]))
            return j["device"] == "cpu0,cpu1"

        nodes.wait_for(grown, 60, "the job to grow")
        # Started, not timed yet (Python imports torch for seconds): no rate,
        # not the 1.0 the policy would once grow it on.
        assert any(rate is None for device, rate in seen if device != "cpu0,cpu1"), seen
        nodes.wait_for(lambda: cluster.job(job)["attempt"] >= 3, 60, "the job to shrink back")
        jobs = cluster.wait_ended([job], timeout=120)
        assert jobs[job]["state"] == "finished", jobs[job]
        r = json.loads((tmp_path / "job.json").read_text())
        assert r["resumed_at"] > 0, "restarted from a checkpoint, not from step 0"
        assert r["weights_sha256"] == reference
        runs = [j for j in cluster.node("a").jobs() if f".s{job}.a" in j["name"]]
        assert any(j["devices"] == ["cpu0", "cpu1"] for j in runs), runs
        assert runs[-1]["devices"] == ["cpu0"] or runs[-1]["devices"] == ["cpu1"], runs
        cluster.kill(signal.SIGTERM)
        assert "resizes 2" in cluster.read_log(), cluster.read_log()[-2000:]
    finally:
        cluster.stop()
