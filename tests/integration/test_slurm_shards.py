"""Slurm 22.05's `shard` GRES mapped onto gandiva: jobs holding shards of one
GPU are time-sliced on one gandivad device with weights equal to their shard
counts (gandiva_spank.so reads SLURM_SHARDS_ON_NODE when --gandiva has no
weight, and the GPU from SLURM_STEP_GPUS/SLURM_JOB_GPUS).

What is real here: Slurm's gres/gpu and gres/shard plugins (slurmd reads
gres.conf, slurmctld allocates the shards and starts two jobs holding 1 and 3
of the GPU's 4 shards on n1 at once, slurmstepd sets the jobs' GRES
environment), the plugin reading it in slurmstepd, an srun step inside a
`sbatch --gandiva` job, and gandivad time-slicing the two training jobs.

What is not: a GPU. slurmd 22.05 requires gres.conf's File= to be a character
or block device (a regular file: "is not a valid character or block device",
and the jobs get no SLURM_JOB_GPUS; no File=: slurmd exits, 'SHARING
configuration lacks "File" specification'), so File= is a character device this test makes
with mknod in its own directory, named nvidia0 (Slurm takes the GPU's index, 0,
from the name) with /dev/null's numbers; nothing opens it (TaskPlugin=task/none:
no cgroup device constraint), AutoDetect=off (no NVML). The jobs get
CUDA_VISIBLE_DEVICES=0 from Slurm, which nothing uses. gandivad has no GPU
either, only its CPU device cpu0: Slurm's GPU 0 is gandivad's "gpu0", which
this gandivad lacks, so the plugin registers the jobs on gandivad's choice,
cpu0, saying so in the job's output. Registering on gandivad's gpu0 itself,
the CUDA shim and MPS are not exercised.

Skipped only where Slurm cannot run (not root, no ip netns, no Slurm)."""

import json
import os
import stat

import pytest

from conftest import BUILD, INTERVAL_JOB, PYTHON
from slurm_cluster import SlurmCluster
from test_slurm import REASON, gandiva_lines, plugstack, share_while_both_ran
from test_time_slicing import overlaps

pytestmark = pytest.mark.skipif(REASON is not None, reason=f"Slurm cannot start here: {REASON}")

SHARDS = 4  # of n1's one GPU


def fake_gpu(tmp_path):
    """gres.conf's device file for GPU 0: a character device with /dev/null's numbers."""
    dev = tmp_path / "dev"
    dev.mkdir()
    path = dev / "nvidia0"
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return path


def shard_gres(tmp_path):
    """(gres.conf, node Gres=) for one GPU of SHARDS shards."""
    gpu = fake_gpu(tmp_path)
    conf = f"AutoDetect=off\nName=gpu File={gpu}\nName=shard Count={SHARDS} File={gpu}\n"
    return conf, f"gpu:1,shard:{SHARDS}"


def shard_job_script(out, srun=False):
    """Prints the GRES variables Slurm gave the batch step (and, with srun, the
    step), then runs interval_job.py there."""
    show = 'echo "{}: shards=$SLURM_SHARDS_ON_NODE job_gpus=$SLURM_JOB_GPUS ' \
           'step_gpus=$SLURM_STEP_GPUS cuda=$CUDA_VISIBLE_DEVICES"'
    train = f"{PYTHON} {INTERVAL_JOB} --iterations 400 --work-ms 6 --out {out}"
    run = f"srun sh -c '{show.format('step')}; exec {train}'" if srun else f"exec {train}"
    return ("#!/bin/sh\n"
            f"export PYTHONPATH={BUILD}/python OMP_NUM_THREADS=1\n"
            f"{show.format('batch')}\n{run}\n")


def test_jobs_with_shards_of_one_gpu_are_sliced_by_their_shard_counts(tmp_path):
    with SlurmCluster(tmp_path, names=("n1",), plugstack_lines=[plugstack(tmp_path)], cpus=2,
                      grace_time=0, gres=shard_gres(tmp_path)) as cluster:
        assert "Gres=gpu:1,shard:4" in cluster.slurm("scontrol", "show", "node", "n1").stdout
        out = {n: tmp_path / f"shards{n}.json" for n in (1, 3)}
        # --gandiva without a weight: the shard count is the weight. The 3-shard
        # job trains under srun, as GPU jobs usually do.
        ids = {n: cluster.sbatch("-c", "1", f"--gres=shard:{n}", "--gandiva",
                                 script=shard_job_script(out[n], srun=n == 3))
               for n in (1, 3)}
        for n, job_id in ids.items():
            job = cluster.wait_state(job_id, "COMPLETED", timeout=60)
            assert (job["TresPerNode"], job["NodeList"]) == (f"gres:shard:{n}", "n1"), job

        # What Slurm 22.05 gave them: their shards and the GPU they are of.
        for n, job_id in ids.items():
            lines = cluster.output(job_id).splitlines()
            assert f"batch: shards={n} job_gpus=0 step_gpus= cuda=0" in lines, lines
        assert "step: shards=3 job_gpus=0 step_gpus=0 cuda=0" in cluster.output(ids[3]).splitlines()

        results = {n: json.loads(out[n].read_text()) for n in (1, 3)}
        assert all(r["managed"] and r["done"] for r in results.values()), "both ran under gandivad"
        # Slurm ran both at once on the GPU's shards; gandivad gave the device
        # to one at a time.
        ran = {n: (r["intervals"][0][0], r["intervals"][-1][1]) for n, r in results.items()}
        assert max(s for s, _ in ran.values()) < min(e for _, e in ran.values()), ran
        assert overlaps(results[1]["intervals"], results[3]["intervals"]) == []

        jobs = {j["name"]: j for j in cluster.node_jobs("n1")}
        assert len(jobs) == 2, "the srun step joined its batch job's gandiva job"
        for n, job_id in ids.items():
            name = f"slurm-{job_id}.batch"
            j = jobs[name]
            assert (j["weight"], j["device"], j["state"], j["iterations"]) == (n, "cpu0", "exited", 400), j
            assert gandiva_lines(cluster.output(job_id)) == [
                f"gandiva: n1's gandivad has no gpu0, the GPU Slurm gave {name}; it is sliced on "
                "gandivad's choice, cpu0",
                f"gandiva: {name} is job {j['id']} on n1's cpu0 (weight {n})"]
        share = share_while_both_ran(results[3]["intervals"], results[1]["intervals"])
        print(f"\n3 shards against 1, device time while both ran: {share:.2f}; "
              f"cluster up in {cluster.started_s:.1f} s")
        assert 2.0 < share < 4.5, share
