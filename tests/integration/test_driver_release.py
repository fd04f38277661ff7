"""gandivad --release driver: a parked GPU job that must leave the device's memory
gives it back through the CUDA driver's checkpoint API (the shim calls
cuCheckpointProcessLock + ...Checkpoint on its own process at the park, ...Restore +
...Unlock at the resume) instead of the shim's swap. Real driver-API programs under
the real shim, against the CPU stand-in for libcuda (a test double: there is no GPU
here), whose checkpoint API moves all of the process's device memory to host and
back at the same addresses."""

import subprocess
import time

from conftest import GANDIVAD
from standin_gpu import FATBIN as IMAGE, PROCADDR_APP as APP, SHIM, STANDIN_DIR, STANDIN_DRIVER, built

pytestmark = built(SHIM, STANDIN_DRIVER, APP, IMAGE)

MIB = 1 << 20


def run_pair(d):
    d.env["LD_LIBRARY_PATH"] = STANDIN_DIR
    d.env["GANDIVA_SHIM"] = SHIM
    procs = {n: d.run(APP, "--image", IMAGE, "--iterations", "300", "--buffers", "2",
                      "--buffer-bytes", str(24 * MIB), "--sleep-us", "1000", name=n)
             for n in ("a", "b")}
    released = {}
    deadline = time.monotonic() + 90
    while any(p.poll() is None for p in procs.values()):
        assert time.monotonic() < deadline, d.read_log()
        for j in d.cli_json("ps", "--all"):
            if j["swap_state"] == "swapped_out":
                released[j["name"]] = max(released.get(j["name"], 0), j["swapped_bytes"])
        time.sleep(0.02)
    errs = {}
    for n, p in procs.items():
        _, errs[n] = p.communicate(timeout=30)
        # The program re-reads every buffer at the end: exit 0 means no byte changed.
        assert p.returncode == 0, errs[n]
    return released, errs


def test_parked_jobs_release_device_memory_through_the_driver(daemon_factory):
    # Two jobs of ~48 MiB on a device of 80 MiB: never both resident.
    d = daemon_factory("--devices", "gpu:1", "--device-memory-mib", "80", "--slice-ms", "50",
                       "--release", "driver")
    released, errs = run_pair(d)
    assert released, d.read_log()
    # The driver moved all of the job's device memory, not only its VMM buffers.
    assert max(released.values()) >= 48 * MIB, released
    moved = [n for n, e in errs.items() if "the driver took" in e]
    assert moved, errs
    for n in moved:
        assert "the driver restored device memory" in errs[n], errs[n]
        assert "swapped out" not in errs[n], errs[n]  # the shim's own swap never ran
    jobs = d.jobs()
    assert all(jobs[n]["state"] == "exited" for n in ("a", "b")), jobs


def test_release_swap_is_the_default(daemon_factory):
    d = daemon_factory("--devices", "gpu:1", "--device-memory-mib", "80", "--slice-ms", "50")
    released, errs = run_pair(d)
    assert released, d.read_log()
    assert not any("the driver took" in e for e in errs.values()), errs


def test_an_unknown_release_mechanism_is_refused_at_start(tmp_path):
    r = subprocess.run([GANDIVAD, "--endpoint", f"ipc://{tmp_path}/gd.sock", "--devices", "gpu:1",
                        "--release", "criu"], capture_output=True, text=True, timeout=20)
    assert r.returncode != 0
    assert "--release must be swap or driver" in r.stdout + r.stderr
