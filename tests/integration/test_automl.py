"""examples/automl: search.py against a real scheduler and node (four real
trials time-sliced on one CPU device under the gandiva policy; successive
halving at epoch 1 keeps the better half and cancels the rest), and a trial
checkpointed mid-epoch and restored reports the same epochs as one never
interrupted."""

import json
import os
import subprocess

import pytest

from conftest import BUILD, GANDIVA, PYTHON
from sched_cluster import SchedCluster

TRIAL = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "automl", "trial.py")
SEARCH = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "automl", "search.py")


@pytest.fixture
def cluster(tmp_path):
    c = SchedCluster(tmp_path, names=("a",))
    yield c
    c.stop()


def test_search_halves_at_the_rung_and_keeps_the_best(cluster, tmp_path):
    cluster.start("--max-share", "4", policy="gandiva")
    out = tmp_path / "search.json"
    env = dict(cluster.env, PYTHONPATH=os.path.join(BUILD, "python"))
    r = subprocess.run([PYTHON, SEARCH, "--scheduler", cluster.endpoint, "--lrs", "0.03,3",
                        "--widths", "16,64", "--epochs", "2", "--rungs", "1", "--target", "0.5",
                        "--trial-args", "--train 1000 --test 500", "--out", str(out),
                        "--timeout-s", "120"], env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr + cluster.read_log()
    result = json.loads(out.read_text())
    trials = result["trials_detail"]
    assert len(trials) == 4 and "target 0.5 first reached" in r.stdout
    cut = [t for t in trials if t["stopped_at_rung"] == 1]
    kept = [t for t in trials if t["stopped_at_rung"] is None]
    assert len(cut) == 2 and len(kept) == 2, trials
    # The survivors had the best accuracy at the rung, and trained their whole budget.
    assert min(t["accuracy"]["1"] for t in kept) >= max(t["accuracy"]["1"] for t in cut)
    assert all(t["state"] == "finished" and t["epochs"] == 2 for t in kept), kept
    assert all(t["state"] in ("cancelled", "finished") for t in cut), cut
    # The first to the target is the earliest epoch line at or above it.
    first = result["first_to_target"]
    assert first and 0 < result["time_to_target_s"] <= result["wall_s"]
    hit = next(t for t in trials if t["id"] == first["id"])
    assert hit["accuracy"][str(first["epoch"])] >= 0.5


def epochs_without_time(text):
    return [line.rsplit(" time ", 1)[0] for line in text.splitlines() if line.startswith("epoch ")]


def test_trial_restored_mid_epoch_reports_the_same_epochs(daemon_factory, tmp_path):
    d = daemon_factory("--devices", "cpu:1")
    trial = [PYTHON, TRIAL, "--lr", "0.03", "--width", "64", "--epochs", "4", "--train", "20000"]
    reference = subprocess.run(trial, env=d.env, capture_output=True, text=True, check=True)
    expected = epochs_without_time(reference.stdout)
    assert len(expected) == 4
    first = d.run(*trial, name="trial")
    assert first.stdout.readline().startswith("epoch 1 ")
    d.cli("checkpoint", "1", "--to", str(tmp_path / "ck"))  # at its next boundary, in epoch 2
    first.communicate(timeout=60)
    restored = subprocess.run([GANDIVA, "run", "--restore", str(tmp_path / "ck"), "--name", "restored",
                               "--", *trial],
                              env=d.env, capture_output=True, text=True, timeout=60)
    assert restored.returncode == 0, restored.stderr
    assert epochs_without_time(restored.stdout) == expected
    # It went on from the checkpoint (in epoch 2), not from the start: 4 epochs are 5,000 steps.
    assert 0 < d.jobs()["restored"]["iterations"] < 3750
