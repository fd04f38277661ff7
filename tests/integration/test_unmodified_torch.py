"""Unmodified PyTorch scripts under `gandiva run` on CPU devices: the start-up
hook gandiva ships (gandiva/_startup) makes each round of optimizer steps one
iteration, with no gandiva in the scripts (tests/integration/jobs/unmodified/):
a plain loop, a GAN's two optimizers, gradient accumulation, a DataLoader with
2 worker processes. A pair of them time-sliced on one device trains exactly as
each alone; a script without an optimizer is reported ("no iteration
boundaries seen") in ps, metrics and gandivad's log; GANDIVA_AUTO_TORCH=0
turns the hook off; a script that attaches its optimizer itself is counted
once; a job gandivad launches (run --detach) gets the hook too.

A job that comes after the script without an optimizer on its device trains
to its end: once gandivad has waited --boundary-wait-s for that script's first
boundary, it stops holding the device.

A pair on a device in auto share mode is measured sliced and packed, from the
rates their optimizer steps give, and gandivad decides how they share it.

Every job runs at once under one gandivad (cpu0: the counted ones; cpu1: the
pair; cpu2: the script without an optimizer and the one behind it; cpu3: the
pair in auto mode), so that the suite takes about as long as its longest job."""

import json
import os
import re
import subprocess

import pytest

from conftest import GANDIVA, PYTHON, HERE, Daemon
from nodes import free_port
from test_metrics import samples, scrape_once_up

JOBS = os.path.join(HERE, "jobs", "unmodified")
COUNTED = ("plain", "gan", "accum", "loader")
SEEDS = (5, 6)
AUTO_PAIR = ("auto_a", "auto_b")
PACK_MARGIN = 1.05  # node/devices/share_mode.cc: pack only when it is this much faster


def script(name, *args):
    return [PYTHON, os.path.join(JOBS, name), *args]


class Run:
    """Everything started at once; `jobs` are the records once the finite ones ended."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.port = free_port()
        self.d = Daemon(tmp, "--devices", "cpu:4", "--slice-ms", "50", "--boundary-wait-s", "1",
                        "--metrics", f"127.0.0.1:{self.port}")
        self.result = {n: tmp / f"{n}.json" for n in
                       (*COUNTED, "off", "attached", "detached", "behind", *(f"pair{s}" for s in SEEDS),
                        *AUTO_PAIR)}
        self.stop_file = tmp / "stop"
        env = dict(os.environ, OMP_NUM_THREADS="1")
        env.pop("GANDIVA_CONTROL_BLOCK", None)
        # The pair's references: the same scripts alone, without gandiva.
        self.refs = {s: subprocess.Popen(script("plain_loop.py", "--steps", "100", "--seed", str(s),
                                                "--result", str(tmp / f"alone{s}.json")), env=env)
                     for s in SEEDS}
        r = self.result
        self.runs = {
            "plain": self.run("plain", "plain_loop.py", "--steps", "40"),
            "gan": self.run("gan", "gan.py", "--iterations", "30"),
            "accum": self.run("accum", "grad_accum.py", "--micro-batches", "48", "--accumulate", "4"),
            "loader": self.run("loader", "loader_workers.py", "--epochs", "2"),
            "attached": self.run("attached", "attached.py", "--steps", "30"),
            "off": self.run("off", "plain_loop.py", "--steps", "20", env={"GANDIVA_AUTO_TORCH": "0"}),
            "inference": subprocess.Popen(
                [GANDIVA, "run", "--name", "inference", "--device", "cpu2", "--",
                 *script("no_optimizer.py", "--until-file", str(self.stop_file))],
                env=self.d.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
        }
        # Registered after it on its device (cpu2): it waits for no park that never comes.
        self.d.wait_for(lambda: "inference" in self.d.jobs(), 60, "the script without an optimizer")
        self.runs["behind"] = self.run("behind", "plain_loop.py", "--steps", "20", device="cpu2")
        for s in SEEDS:  # 100 steps of >= 20 ms (2 s) each, in 50 ms slices on cpu1
            self.runs[f"pair{s}"] = self.run(f"pair{s}", "plain_loop.py", "--steps", "100", "--seed",
                                             str(s), "--sleep-ms", "20", device="cpu1")
        # Auto share mode on cpu3: a window sliced, a window packed, then a decision.
        for name in AUTO_PAIR:
            self.runs[name] = self.run(name, "plain_loop.py", "--steps", "400", "--sleep-ms", "10",
                                       device="cpu3")
        self.d.wait_for(lambda: all(self.d.jobs().get(n, {}).get("iterations", 0) > 5 for n in AUTO_PAIR),
                        120, "the auto pair to train")
        self.d.cli("share", "cpu3", "auto", "--window-ms", "1000")
        self.auto = self.d.wait_for(self.auto_decided, 120, "auto mode's decision on cpu3")
        self.auto_ids = sorted(self.d.jobs()[n]["id"] for n in AUTO_PAIR)
        self.d.cli("run", "--detach", "--name", "detached", "--device", "cpu0", "--",
                   *script("plain_loop.py", "--steps", "15", "--result", str(r["detached"])))
        for name, proc in self.runs.items():
            if name != "inference":
                out, err = proc.communicate(timeout=300)
                assert proc.returncode == 0, f"{name}: {err}"
        self.d.wait_for(lambda: self.d.jobs()["detached"]["state"] in ("exited", "failed"), 120,
                        "the detached job")
        self.jobs = self.d.jobs()

    def run(self, name, file, *args, device="cpu0", env=None):
        return subprocess.Popen(
            [GANDIVA, "run", "--name", name, "--device", device, "--",
             *script(file, *args, "--result", str(self.result[name]))],
            env=dict(self.d.env, **(env or {})), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)

    def auto_decided(self):
        device = self.d.cli_json("devices")[3]
        return device if device["share_phase"] == "decided" else None

    def got(self, name):
        return json.loads(self.result[name].read_text())

    def close(self):
        self.stop_file.touch()
        for proc in (*self.runs.values(), *self.refs.values()):
            if proc.poll() is None:
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
        self.d.stop()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    r = Run(tmp_path_factory.mktemp("unmodified"))
    yield r
    r.close()


def test_iterations_counted_are_the_optimizer_rounds_run(run):
    for name in COUNTED:
        got, job = run.got(name), run.jobs[name]
        assert job["iterations"] == got["rounds"], (name, job["iterations"], got)
        assert job["boundary_source"] == "explicit" and job["boundary_warning"] == "", job
        assert job["parks"] >= 1, job  # it went through the slicer, parked at a step
    # The GAN stepped two optimizers per iteration, the accumulating loop one per 4 batches.
    assert run.got("gan")["steps"] == 2 * run.got("gan")["rounds"] == 60
    assert run.got("accum")["rounds"] == 12
    assert run.got("loader")["rounds"] == 20  # 160 samples in batches of 16, twice


def test_a_pair_time_sliced_trains_as_each_alone(run):
    for s in SEEDS:
        assert run.refs[s].wait(timeout=120) == 0
        job = run.jobs[f"pair{s}"]
        # 100 steps of >= 20 ms beside a job of as many, in 50 ms slices: each waited for the other.
        assert job["iterations"] == 100 and job["parks"] >= 2 and job["slices"] >= 2, job
        alone = json.loads((run.tmp / f"alone{s}.json").read_text())["losses"]
        assert run.got(f"pair{s}")["losses"] == alone, f"seed {s}: differs from running alone"


def test_auto_share_mode_decides_on_the_rates_their_steps_give(run):
    """The gandiva policy's pack/unpack decision for unmodified scripts: made on
    rates measured from their optimizer steps, sliced and packed."""
    device, decision = run.auto, run.auto["share_decision"]
    assert device["name"] == "cpu3" and decision["reason"] == "measured", device
    assert sorted(decision["jobs"]) == run.auto_ids, decision
    assert decision["mode"] in ("pack", "slice") and decision["window_s"] == 1.0, decision
    # Each rate sums the pair's iterations against their alone times: about 1 sliced;
    # packed up to about 2 for these mostly sleeping steps (more on a loaded machine,
    # where an alone time is estimated from slowed iterations).
    assert 0 < decision["slice_rate"] < 4 and 0 < decision["pack_rate"] < 4, decision
    assert (decision["mode"] == "pack") == (decision["pack_rate"] > decision["slice_rate"] * PACK_MARGIN), decision
    for name in AUTO_PAIR:
        job = run.jobs[name]
        assert job["iterations"] == run.got(name)["steps"] == 400, job
        assert job["boundary_source"] == "explicit" and job["alone_ms"] is not None, job


def test_a_script_without_an_optimizer_is_reported(run):
    job = run.d.jobs()["inference"]
    assert run.runs["inference"].poll() is None, "it runs until told to stop"
    assert job["boundary_warning"].startswith("no iteration boundaries seen: "), job
    assert job["iterations"] == 0 and job["state"] == "starting"
    ps = run.d.cli("ps").stdout
    assert f"job {job['id']} (inference): no iteration boundaries seen: " in ps, ps
    assert "gandiva.step()" in ps  # says what to do
    said = re.findall(rf"job {job['id']}: no iteration boundaries seen", run.d.read_log())
    assert len(said) == 1, run.d.read_log()  # in the log, once
    text = run.d.wait_for(lambda: scrape_once_up(run.port), 30, "metrics")
    flagged = [k for k, v in samples(text, "gandiva_job_no_boundaries").items() if v == 1]
    assert len(flagged) == 1 and 'name="inference"' in flagged[0], text  # the only live job
    run.stop_file.touch()
    run.runs["inference"].communicate(timeout=60)
    assert run.runs["inference"].returncode == 0


def test_a_job_behind_one_without_boundaries_trains_to_its_end(run):
    job = run.jobs["behind"]
    assert run.got("behind")["steps"] == job["iterations"] == 20, job
    assert job["state"] == "exited" and job["slices"] >= 1, job
    assert run.jobs["inference"]["state"] == "starting", "it ran on, unsliced, all along"
    assert "marked no iteration boundary: it runs unsliced" in run.d.read_log()


def test_auto_torch_off_marks_no_boundaries(run):
    job = run.jobs["off"]
    assert run.got("off")["steps"] == 20
    assert job["iterations"] == 0 and job["boundary_source"] == "none", job


def test_a_script_that_attaches_its_optimizer_is_counted_once(run):
    assert run.jobs["attached"]["iterations"] == run.got("attached")["steps"] == 30


def test_a_job_gandivad_launches_gets_the_hook_too(run):
    """`gandiva run --detach`: gandivad starts the job (launch, as the scheduler does)."""
    job = run.jobs["detached"]
    assert job["state"] == "exited" and job["launched"], job
    assert job["iterations"] == run.got("detached")["steps"] == 15, job
