"""Unmodified PyTorch scripts under `gandiva run` on a CPU device: the start-up
hook gandiva ships (gandiva/_startup) makes each round of optimizer steps one
iteration, with no gandiva in the scripts (tests/integration/jobs/unmodified/):
a plain loop, a GAN's two optimizers, gradient accumulation, a DataLoader with
2 worker processes. A pair of them time-sliced on one device trains exactly as
each alone; a script without an optimizer is reported ("no iteration
boundaries seen") in ps, metrics and gandivad's log; GANDIVA_AUTO_TORCH=0
turns the hook off; a script that attaches its optimizer itself is counted
once."""

import json
import os
import subprocess

from conftest import HERE, PYTHON
from nodes import free_port
from test_metrics import samples, scrape_once_up

JOBS = os.path.join(HERE, "jobs", "unmodified")


def script(name, *args):
    return [PYTHON, os.path.join(JOBS, name), *args]


def finished(d, runs):
    """Waits for the `gandiva run`s; returns their job records by name."""
    for name, proc in runs.items():
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, f"{name}: {err}"
    return d.jobs()


def test_iterations_counted_are_the_optimizer_rounds_run(daemon_factory, tmp_path):
    d = daemon_factory("--devices", "cpu:1", "--slice-ms", "50")
    result = {n: tmp_path / f"{n}.json" for n in ("plain", "gan", "accum", "loader")}
    runs = {
        "plain": d.run(*script("plain_loop.py", "--steps", "40", "--result", str(result["plain"])),
                       name="plain", device="cpu0"),
        "gan": d.run(*script("gan.py", "--iterations", "30", "--result", str(result["gan"])),
                     name="gan", device="cpu0"),
        "accum": d.run(*script("grad_accum.py", "--micro-batches", "48", "--accumulate", "4",
                               "--result", str(result["accum"])), name="accum", device="cpu0"),
        "loader": d.run(*script("loader_workers.py", "--epochs", "2", "--result",
                                str(result["loader"])), name="loader", device="cpu0"),
    }
    jobs = finished(d, runs)
    for name, path in result.items():
        got = json.loads(path.read_text())
        job = jobs[name]
        assert job["iterations"] == got["rounds"], (name, job["iterations"], got)
        assert job["boundary_source"] == "explicit" and job["boundary_warning"] == ""
    # The GAN stepped two optimizers per iteration, the accumulating loop one per 4 batches.
    gan = json.loads(result["gan"].read_text())
    assert gan["steps"] == 2 * gan["rounds"] == 60
    assert json.loads(result["accum"].read_text())["rounds"] == 12
    assert json.loads(result["loader"].read_text())["rounds"] == 20  # 160 samples / 16, twice
    # Each went through the slicer: parked at a step, resumed there.
    assert all(j["parks"] >= 1 for j in jobs.values()), jobs


def test_a_pair_time_sliced_trains_as_each_alone(daemon_factory, tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("GANDIVA_CONTROL_BLOCK", None)
    refs = {seed: subprocess.Popen(script("plain_loop.py", "--steps", "100", "--seed", str(seed),
                                          "--result", str(tmp_path / f"alone{seed}.json")),
                                   env=env) for seed in (5, 6)}
    alone = {}
    for seed, proc in refs.items():
        assert proc.wait(timeout=120) == 0
        alone[seed] = json.loads((tmp_path / f"alone{seed}.json").read_text())["losses"]
    d = daemon_factory("--devices", "cpu:1", "--slice-ms", "50")
    runs = {f"pair{seed}": d.run(*script("plain_loop.py", "--steps", "100", "--seed", str(seed),
                                         "--sleep-ms", "20", "--result",
                                         str(tmp_path / f"pair{seed}.json")),
                                 name=f"pair{seed}", device="cpu0") for seed in (5, 6)}
    jobs = finished(d, runs)
    for seed in (5, 6):
        job = jobs[f"pair{seed}"]
        # 100 steps of >= 20 ms (2 s) beside a job of as many, in 50 ms slices:
        # each waited for the other.
        assert job["iterations"] == 100 and job["parks"] >= 2 and job["slices"] >= 2, job
        got = json.loads((tmp_path / f"pair{seed}.json").read_text())["losses"]
        assert got == alone[seed], f"seed {seed}: the loss history differs from running alone"


def test_a_script_without_an_optimizer_is_reported(daemon_factory, tmp_path):
    port = free_port()
    d = daemon_factory("--devices", "cpu:1", "--boundary-wait-s", "1", "--metrics",
                       f"127.0.0.1:{port}")
    stop = tmp_path / "stop"
    run = d.run(*script("no_optimizer.py", "--until-file", str(stop)), name="inference")
    try:
        job = d.wait_for(lambda: (j := d.jobs().get("inference")) and j["boundary_warning"] and j,
                         60, "the warning")
        assert job["boundary_warning"].startswith("no iteration boundaries seen: ")
        assert job["iterations"] == 0 and job["state"] == "starting"
        ps = d.cli("ps").stdout
        assert f"job {job['id']} (inference): no iteration boundaries seen: " in ps, ps
        assert "gandiva.step()" in ps  # says what to do
        d.wait_for(lambda: "no iteration boundaries seen" in d.read_log(), 10, "the log line")
        assert d.read_log().count("no iteration boundaries seen") == 1  # said once
        text = d.wait_for(lambda: scrape_once_up(port), 30, "metrics")
        assert list(samples(text, "gandiva_job_no_boundaries").values()) == [1.0], text
    finally:
        stop.touch()
        run.communicate(timeout=60)
    assert run.returncode == 0


def test_auto_torch_off_marks_no_boundaries(daemon_factory, tmp_path):
    d = daemon_factory("--devices", "cpu:1")
    d.env["GANDIVA_AUTO_TORCH"] = "0"
    out = tmp_path / "off.json"
    runs = {"off": d.run(*script("plain_loop.py", "--steps", "20", "--result", str(out)),
                         name="off")}
    job = finished(d, runs)["off"]
    assert json.loads(out.read_text())["steps"] == 20
    assert job["iterations"] == 0 and job["boundary_source"] == "none", job


def test_a_script_that_attaches_its_optimizer_is_counted_once(daemon_factory, tmp_path):
    d = daemon_factory("--devices", "cpu:1")
    out = tmp_path / "attached.json"
    runs = {"attached": d.run(*script("attached.py", "--steps", "30", "--result", str(out)),
                              name="attached")}
    assert finished(d, runs)["attached"]["iterations"] == 30


def test_detached_launch_loads_the_hook_too(daemon_factory, tmp_path):
    """`gandiva run --detach`: gandivad starts the job (launch, as the scheduler does)."""
    d = daemon_factory("--devices", "cpu:1")
    out = tmp_path / "detached.json"
    r = d.cli("run", "--detach", "--name", "detached", "--",
              *script("plain_loop.py", "--steps", "15", "--result", str(out)))
    assert r.returncode == 0
    job = d.wait_for(lambda: (j := d.jobs().get("detached")) and j["state"] == "exited" and j,
                     120, "the detached job")
    assert job["iterations"] == 15, job
