"""gandivad's Prometheus endpoint (--metrics): a real scrape while two real
training jobs share a device, checked by `promtool check metrics` (Debian's
prometheus package), with values that move as the jobs do; bad requests get
an HTTP error and the daemon goes on."""

import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import PYTHON, wait_for
from nodes import free_port
from sched_cluster import SCHED_JOB


def scrape(port, path="/metrics"):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return r.read().decode()


def scrape_once_up(port):
    """A scrape, or None while the endpoint is not listening yet: gandivad opens it
    once its node has started (the job table read back first), after its API socket."""
    try:
        return scrape(port)
    except (urllib.error.URLError, ConnectionError):
        return None


def samples(text, name):
    """{labels: value} of one metric family."""
    out = {}
    for m in re.finditer(rf"^{name}\{{([^}}]*)\}} (\S+)$", text, re.M):
        out[m.group(1)] = float(m.group(2))
    return out


def test_a_scrape_passes_promtool_and_follows_the_jobs(daemon_factory):
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: scripts/install_deps.sh installs Debian's prometheus"
    port = free_port()
    d = daemon_factory("--devices", "cpu:1", "--slice-ms", "50", "--metrics", f"127.0.0.1:{port}")
    # m0 runs in a Kubernetes pod (as the pod spec hands its names down; one
    # with a quote, which the exposition format escapes); m1 in none.
    pod = {"GANDIVA_POD_NAMESPACE": "team-a", "GANDIVA_POD_NAME": 'train"0',
           "GANDIVA_CONTAINER_NAME": "trainer"}
    d.env.update(pod)
    jobs = [d.run(PYTHON, SCHED_JOB, "--steps", "400", "--step-ms", "5", name="m0")]
    for k in pod:
        del d.env[k]
    jobs.append(d.run(PYTHON, SCHED_JOB, "--steps", "400", "--step-ms", "5", name="m1"))
    try:
        first = wait_for(lambda: (t := scrape_once_up(port)) and len(
            [v for v in samples(t, "gandiva_job_iterations_total").values() if v > 5]) == 2 and t,
            60, "both jobs iterating")
        check = subprocess.run([promtool, "check", "metrics"], input=first, capture_output=True,
                               text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        # Both counters move on (each job gets its turns: within a second on a quiet
        # machine, later on a busy one).
        before = samples(first, "gandiva_job_iterations_total")

        def both_moved_on():
            t = scrape(port)
            after = samples(t, "gandiva_job_iterations_total")
            return set(after) == set(before) and all(after[k] > before[k] for k in before) and t
        second = wait_for(both_moved_on, 60, "both jobs' iteration counters to move on")
        after = samples(second, "gandiva_job_iterations_total")
        assert all('device="cpu0"' in k and 'node="' in k for k in after)
        in_pod = [k for k in after if 'name="m0"' in k]
        assert len(in_pod) == 1 and in_pod[0].endswith(
            ',namespace="team-a",pod="train\\"0",container="trainer"'), after
        assert not any("pod=" in k for k in after if 'name="m1"' in k), after
        m0 = next(j for j in d.cli_json("ps") if j["name"] == "m0")
        assert (m0["pod_namespace"], m0["pod"], m0["container"]) == ("team-a", 'train"0', "trainer")
        switches = samples(second, "gandiva_device_switches_total")
        assert list(switches.values())[0] > 0, "two jobs on one device take turns"
        states = samples(second, "gandiva_job_state")
        assert len(states) == 2 and all(v == 1 for v in states.values())
        # Bad requests: an HTTP error, and the endpoint still serves.
        with pytest.raises(urllib.error.HTTPError) as e:
            scrape(port, "/nope")
        assert e.value.code == 404
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"BREW /pot HTCPCP/1.0\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.0 400")
        silent = socket.create_connection(("127.0.0.1", port), timeout=5)  # sends nothing
        t0 = time.monotonic()
        assert "gandiva_job_iterations_total" in scrape(port)
        assert time.monotonic() - t0 < 5, "a silent client holds the endpoint only briefly"
        silent.close()
    finally:
        for j in jobs:
            j.wait(timeout=120)
    # Ended jobs' series end with them.
    assert samples(scrape(port), "gandiva_job_iterations_total") == {}


def test_a_bad_metrics_address_is_refused(daemon_factory, tmp_path):
    from conftest import GANDIVAD
    r = subprocess.run([GANDIVAD, "--devices", "cpu:1", "--endpoint", f"ipc://{tmp_path}/x.sock",
                        "--metrics", "nowhere"], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "--metrics takes" in r.stderr + r.stdout
