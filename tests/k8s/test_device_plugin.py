"""gandiva-k8s-device-plugin driven over its real Unix sockets by a stand-in for
kubelet (kubelet_standin.py; no Kubernetes runs here): registration,
ListAndWatch and its update when a device is marked unhealthy, a preferred
allocation by gandivad's load, Allocate's CDI devices and environment, and a
job started as that answer describes that joins the real gandivad: in a runc
container (tests/pyhelpers/containers.py) made from the CDI spec's edits, or,
where runc cannot run, with the spec's mounts made in a mount namespace of its
own. Either way the build tree is out of the job's sight."""

import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import BUILD, GANDIVA, HERE, PLUGIN, PROTO, daemon_factory, wait_for  # noqa: F401
from cdi_apply import edits_for

pytest.importorskip("grpc", reason="needs python3-grpcio")
if not os.path.exists(PLUGIN):
    pytest.skip("the device plugin is not built (no gRPC at configure time)",
                allow_module_level=True)
if not shutil.which("protoc") or not shutil.which("unshare"):
    pytest.skip("needs protoc (protobuf-compiler) and unshare", allow_module_level=True)

from kubelet_standin import KubeletStandIn  # noqa: E402
import sys  # noqa: E402
sys.path.insert(0, os.path.join(HERE, "..", "pyhelpers"))
import containers  # noqa: E402

SHARES = 3
# The pod's checkpoint directory (the example Job's /checkpoints; under /run
# here, where the mount-namespace fallback can make mount points).
CKPT = "/run/ckpt"


def health_of(response):
    return {d.ID: d.health for d in response.devices}


def next_list(stream, predicate, timeout=10):
    """The next ListAndWatch response that satisfies predicate."""
    deadline = time.monotonic() + timeout
    for response in stream:
        if predicate(health_of(response)):
            return health_of(response)
        assert time.monotonic() < deadline, f"no such update: last {health_of(response)}"
    raise AssertionError("ListAndWatch ended")


@pytest.fixture
def node(daemon_factory, tmp_path):  # noqa: F811
    d = daemon_factory("--devices", "cpu:2")
    plugin_dir = tmp_path / "device-plugins"
    health = tmp_path / "health"
    plugin_dir.mkdir()
    health.mkdir()
    kubelet = KubeletStandIn(plugin_dir, PROTO)
    log = open(tmp_path / "plugin.log", "w")
    plugin = subprocess.Popen(
        [PLUGIN, "--kubelet-dir", str(plugin_dir), "--endpoint", d.endpoint, "--shares",
         str(SHARES), "--health-dir", str(health), "--poll-ms", "100"],
        stdout=log, stderr=subprocess.STDOUT)
    restarted = [None]  # the stand-in a test started in kubelet's place, if any
    yield d, kubelet, plugin, health, restarted
    plugin.send_signal(signal.SIGTERM)
    plugin.wait(timeout=10)
    for k in (kubelet, restarted[0]):
        if k:
            k.stop()
    log.close()


def test_kubelet_standin_drives_the_plugin(node, tmp_path, monkeypatch):
    d, kubelet, plugin, health, restarted = node
    reg = kubelet.next_registration(timeout=10)
    assert (reg.version, reg.endpoint, reg.resource_name) == ("v1beta1", "gandiva.sock",
                                                              "gandiva.io/gpu")
    assert reg.options.get_preferred_allocation_available
    kubelet.connect(reg.endpoint)
    options = kubelet.options()
    assert options.get_preferred_allocation_available and not options.pre_start_required

    stream = kubelet.list_and_watch()
    shares = next_list(stream, lambda h: True)
    assert shares == {f"cpu{i}-s{k}": "Healthy" for i in range(2) for k in range(SHARES)}

    # Marked unhealthy (what a GPU health watcher would write): an update at once.
    (health / "cpu1").write_text("test: marked by the kubelet stand-in\n")
    h = next_list(stream, lambda h: h["cpu1-s0"] == "Unhealthy")
    assert all(h[f"cpu1-s{k}"] == "Unhealthy" for k in range(SHARES))
    assert all(h[f"cpu0-s{k}"] == "Healthy" for k in range(SHARES))
    # Unhealthy shares are not preferred.
    assert kubelet.preferred(shares, 1)[0].startswith("cpu0-")
    (health / "cpu1").unlink()
    next_list(stream, lambda h: all(v == "Healthy" for v in h.values()))

    # A job on cpu0 (gandivad's figures): the next share goes to cpu1, and a
    # container's two shares stay on one device.
    busy = d.run("sleep", "60", name="busy", device="cpu0")
    d.wait_for(lambda: d.jobs().get("busy", {}).get("pid"), what="the busy job started")
    # The plugin reads gandivad every 100 ms: until it has seen the job, cpu0
    # and cpu1 tie and cpu0 (first by name) would be preferred.
    chosen = wait_for(lambda: [s for s in kubelet.preferred(shares, 2) if s.startswith("cpu1-")],
                      what="a preferred allocation on cpu1")
    assert len(chosen) == 2  # both shares on cpu1, none on cpu0

    reply = kubelet.allocate(chosen[:1], chosen)
    one, [container] = reply.container_responses[0], reply.container_responses[1:]
    assert dict(one.envs) == {"GANDIVA_DEVICES": "cpu1", "GANDIVA_SHARES": "1"}
    assert [c.name for c in container.cdi_devices] == ["gandiva.io/gpu=cpu1"]
    assert dict(container.envs) == {"GANDIVA_DEVICES": "cpu1", "GANDIVA_SHARES": "2"}
    import grpc
    with pytest.raises(grpc.RpcError) as split:
        kubelet.allocate(["cpu0-s0", "cpu1-s0"])
    assert split.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    # The container Allocate describes: the CDI spec's edits for its devices,
    # and, as the example Job has, a checkpoint directory for a preemption.
    spec_path = tmp_path / "gandiva.json"
    subprocess.run([GANDIVA, "cdi", "generate", "--endpoint", d.endpoint, "--output",
                    str(spec_path)], check=True, capture_output=True, timeout=30)
    env, mounts, nodes = edits_for(json.loads(spec_path.read_text()),
                                   [c.name for c in container.cdi_devices])
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "OMP_NUM_THREADS": "1",
           "GANDIVA_CHECKPOINT_ON_TERM": CKPT, **dict(container.envs), **env}
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir(mode=0o700)
    mounts = mounts + [{"hostPath": str(ckpt), "containerPath": CKPT, "options": ["rw"]}]
    pods = Pods(tmp_path, env, mounts, monkeypatch)

    # As the example Job's command: its shares are its weight.
    def command(name, *restore):
        return ["/opt/gandiva/bin/gandiva", "run", "--device", env["GANDIVA_DEVICES"], "--weight",
                env["GANDIVA_SHARES"], "--name", name, *restore, "--", "/usr/bin/python3", "-c",
                JOB]

    try:
        first = pods.start("pod-job", command("pod-job"))
        j = d.wait_for(lambda: (d.jobs().get("pod-job") or {}).get("iterations", 0) > 5 and
                       d.jobs()["pod-job"], what="the pod's job counted iterations")
        assert j["device"] == "cpu1" and j["weight"] == 2
        printed = first.output()
        assert printed.startswith("package /opt/gandiva/python/gandiva/"), printed
        if pods.in_container:
            # Its control block is a file in gandivad's blocks directory, which
            # the spec mounted (GANDIVA_BLOCKS_DIR), not in the host's /dev/shm.
            assert env["GANDIVA_BLOCKS_DIR"] == "/run/gandiva-blocks"
            import gandiva
            assert os.listdir(gandiva.Client(d.endpoint).hello()["blocks_dir"])

        # Preempted, as kubelet does it: SIGTERM to the container's first
        # process (`gandiva run`, which hands it to the job). The job saves its
        # state at its next boundary and ends.
        first.terminate()
        assert first.wait(timeout=30) != 0
        assert (ckpt / "state.gdck").exists()
        # The pod again, as the example Job's command restarts it (--restore).
        second = pods.start("pod-job-2", command("pod-job-2", "--restore", CKPT))
        d.wait_for(lambda: "start " in second.output(), what="the restarted job's first boundary")
        resumed_at = int(second.output().split("start ")[1].split()[0])
        assert resumed_at > 5, second.output()  # the saved step, not 0
        assert d.wait_for(lambda: (d.jobs().get("pod-job-2") or {}).get("iterations", 0) > 0,
                          what="the restarted job counted iterations")
    finally:
        pods.stop_all()
        busy.terminate()
        busy.wait(timeout=10)

    # kubelet restarts: it clears its directory (the plugin's socket with it)
    # and serves a new kubelet.sock; the plugin serves and registers again.
    stream.cancel()
    kubelet.stop()
    plugin_dir = tmp_path / "device-plugins"
    for name in os.listdir(plugin_dir):
        os.unlink(plugin_dir / name)
    kubelet = restarted[0] = KubeletStandIn(plugin_dir, PROTO)
    reg = kubelet.next_registration(timeout=10)
    assert (reg.endpoint, reg.resource_name) == ("gandiva.sock", "gandiva.io/gpu")
    kubelet.connect(reg.endpoint)
    stream = kubelet.list_and_watch()
    assert len(next_list(stream, lambda h: True)) == 2 * SHARES

    # gandivad gone: every share unhealthy (a job started now would run without it).
    d.stop()
    next_list(stream, lambda h: all(v == "Unhealthy" for v in h.values()))
    stream.cancel()


# The pod's training job: gandiva's package as the container sees it, one
# boundary per step, its step counter as its checkpointed state (restored at
# its first boundary when started with --restore).
JOB = """
import time
import gandiva
step = [0]
gandiva.register_state("step", lambda: step[0].to_bytes(8, "little"),
                       lambda b: step.__setitem__(0, int.from_bytes(b, "little")))
print("package", gandiva.__file__, flush=True)
gandiva.step()
print("start", step[0], flush=True)
while True:
    time.sleep(0.01)
    step[0] += 1
    gandiva.step()
"""


class Pods:
    """The pods' containers: runc containers (tests/pyhelpers/containers.py)
    with the spec's mounts, without the host's /opt and /work, so that what
    the job has of gandiva comes through the spec; or, where runc cannot run,
    mount namespaces (start_in_mount_namespace)."""

    def __init__(self, tmp_path, env, mounts, monkeypatch):
        self.tmp, self.env, self.mounts = tmp_path, env, mounts
        self.in_container = containers.runtime_problem() is None
        if self.in_container:
            hidden = ("/opt", "/work", containers.CHECKOUT, containers.BUILD_TREE)
            monkeypatch.setattr(containers, "HOST_DIRS", tuple(
                d for d in containers.HOST_DIRS if d not in hidden))
        self.pods = []

    def start(self, name, cmd):
        pod = Pod(self.tmp / f"{name}.stdout")
        err = open(self.tmp / f"{name}.stderr", "w")
        if self.in_container:
            c = containers.Container(
                cmd, mounts=[(m["hostPath"], m["containerPath"], "rw" in m.get("options", []))
                             for m in self.mounts],
                env=self.env, name=name, stdout=open(pod.out, "w"), stderr=err)
            pod.terminate, pod.wait, pod.stop = (lambda: c.kill("TERM")), c.wait, c.remove
        else:
            p = start_in_mount_namespace(self.env, self.mounts, cmd, self.tmp / name,
                                         open(pod.out, "w"), err)
            pod.terminate, pod.wait = p.terminate, p.wait

            def stop():
                if p.poll() is None:
                    p.kill()
                p.wait(timeout=10)
            pod.stop = stop
        self.pods.append(pod)
        return pod

    def stop_all(self):
        for pod in self.pods:
            pod.stop()


class Pod:
    def __init__(self, out):
        self.out = out

    def output(self):
        return self.out.read_text()


def start_in_mount_namespace(env, mounts, cmd, work, stdout, stderr):
    """cmd in a mount namespace of its own where the spec's mounts are made
    (over fresh tmpfs on /opt and /run) and the build tree is hidden, so that
    the job reaches gandiva only through what the CDI spec brings. The rest of
    the host's files stand in for the image. Not a container: same pid, IPC
    and network namespaces, no cgroup of its own."""
    lines = ["set -e", "mount -t tmpfs -o mode=0755 gd-opt /opt",
             "mount -t tmpfs -o mode=0755 gd-run /run"]
    for m in mounts:
        c = m["containerPath"]
        assert c.startswith("/opt/") or c.startswith("/run/"), c
        if os.path.isdir(m["hostPath"]):
            lines.append(f"mkdir -p '{c}'")
        else:
            lines.append(f"mkdir -p '{os.path.dirname(c)}' && touch '{c}'")
        lines.append(f"mount --bind '{m['hostPath']}' '{c}'")
        if "ro" in m.get("options", []):
            lines.append(f"mount -o remount,bind,ro '{c}'")
    lines.append(f"mount -t tmpfs -o mode=0755 gd-hide '{os.path.realpath(BUILD)}'")
    lines.append('exec "$@"')
    script = f"{work}.sh"
    with open(script, "w") as f:
        f.write("\n".join(lines) + "\n")
    return subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", script,
                             *cmd], env=env, stdout=stdout, stderr=stderr)
