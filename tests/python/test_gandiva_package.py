"""The `gandiva` Python package on its own: no daemon needed except where started."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

BUILD = os.environ.get("GANDIVA_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
PYDIR = os.path.join(BUILD, "python")
sys.path.insert(0, PYDIR)

import gandiva  # noqa: E402
import gandiva.torch  # noqa: E402


def run_python(code, **env):
    e = dict(os.environ, PYTHONPATH=PYDIR, **env)
    e.pop("GANDIVA_CONTROL_BLOCK", None)
    return subprocess.run(["/usr/bin/python3", "-c", textwrap.dedent(code)], env=e,
                          capture_output=True, text=True, timeout=120)


def test_importing_changes_nothing():
    r = run_python("import gandiva, gandiva.torch; print('ok')")
    assert r.returncode == 0
    assert r.stdout == "ok\n"
    assert r.stderr == ""


def test_unmanaged_steps_are_measured_and_said_once():
    r = run_python("""
        import time, gandiva
        for _ in range(6):
            gandiva.step(); time.sleep(0.01)
        s = gandiva.stats()
        assert not gandiva.managed() and gandiva.job_id() == 0
        assert s["iterations"] == 5, s
        assert 9 <= s["mean_ms"] < 100, s
        assert s["parks"] == 0
    """)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("running unmanaged") == 1


def test_iteration_context_manager_marks_a_boundary_per_block():
    r = run_python("""
        import gandiva
        for _ in range(4):
            with gandiva.iteration():
                pass
        assert gandiva.stats()["iterations"] == 3
    """)
    assert r.returncode == 0, r.stderr


def test_attach_wraps_step_on_torch_without_step_hooks():
    # Debian's torch 1.13 has no register_step_post_hook: attach wraps step.
    r = run_python("""
        import torch, gandiva, gandiva.torch
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        if hasattr(opt, "register_step_post_hook"):
            del type(opt).register_step_post_hook  # force the wrapping path
        handle = gandiva.torch.attach(opt)   # boundary 0
        for _ in range(5):
            opt.zero_grad(); model(torch.ones(2, 4)).sum().backward(); opt.step()
        assert gandiva.stats()["iterations"] == 5, gandiva.stats()
        handle.remove()
        opt.step()
        assert gandiva.stats()["iterations"] == 5
    """)
    assert r.returncode == 0, r.stderr


class HookedSGD(torch.optim.SGD):
    """Stands in for torch >= 2.0's optimizer step hooks (not in Debian's torch 1.13):
    same method name and hook signature, called after each step."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._post_hooks = {}

    def register_step_post_hook(self, hook):
        key = len(self._post_hooks)
        self._post_hooks[key] = hook

        class Handle:
            def remove(_self):
                self._post_hooks.pop(key, None)

        return Handle()

    def step(self, *args, **kwargs):
        result = super().step(*args, **kwargs)
        for hook in list(self._post_hooks.values()):
            hook(self, args, kwargs)
        return result


def test_attach_uses_step_hooks_where_torch_has_them():
    before = gandiva.stats()["iterations"]
    model = torch.nn.Linear(4, 1)
    opt = HookedSGD(model.parameters(), lr=0.1)
    handle = gandiva.torch.attach(opt)
    assert len(opt._post_hooks) == 1
    assert "step" not in vars(opt), "step must not be wrapped when hooks exist"
    for _ in range(3):
        opt.step()
    # attach marks boundary 0 (no iteration measured before the first boundary of the process).
    assert gandiva.stats()["iterations"] - before in (3, 4)
    handle.remove()
    assert opt._post_hooks == {}
    gandiva.torch.attach(opt)
    with pytest.raises(RuntimeError):
        gandiva.torch.attach(opt)  # twice on one optimizer would mark two boundaries per step


def test_register_leaves_the_shims_raw_device_memory_out():
    # Under the CUDA shim, the section "cuda.device_memory" (a raw copy of every device
    # allocation) is registered at CUDA start-up. A registered torch job carries its
    # tensors itself, and PyTorch's growing caching allocator makes the raw copy
    # unrestorable (the shim refuses it), so register() and attach() take it out.
    r = run_python("""
        import os, torch, gandiva, gandiva.torch
        gandiva.register_state("cuda.device_memory", lambda: b"", lambda d: None)
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        gandiva.torch.register(model, opt)
        print(os.environ.get("GANDIVA_SHIM_CHECKPOINT"))
        gandiva.register_state("cuda.device_memory", lambda: b"", lambda d: None)  # CUDA later
        gandiva.torch.attach(opt)
        try:
            gandiva.unregister_state("cuda.device_memory")
            print("still registered")
        except KeyError:
            print("left out")
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "left", "out"]


def test_client_without_daemon_raises_unavailable(tmp_path):
    client = gandiva.Client(f"ipc://{tmp_path}/none.sock", timeout_ms=500)
    with pytest.raises(gandiva.GandivaError) as e:
        client.jobs()
    assert e.value.code == "unavailable"
    assert "no gandivad running" in str(e.value)


def test_client_rejects_unknown_request_types_locally(tmp_path):
    client = gandiva.Client(f"ipc://{tmp_path}/none.sock", timeout_ms=500)
    with pytest.raises(gandiva.GandivaError) as e:
        client.call("explode")
    assert e.value.code == "invalid_argument"


def test_client_checkpoint_and_migrate_report_daemon_errors(tmp_path):
    """Against a real daemon: an unknown job and an unknown peer are clear errors."""
    import subprocess
    import time
    gandivad = os.path.join(BUILD, "node", "gandivad")
    endpoint = f"ipc://{tmp_path}/gd.sock"
    daemon = subprocess.Popen([gandivad, "--devices", "cpu:1", "--endpoint", endpoint],
                              stderr=subprocess.DEVNULL)
    try:
        while not (tmp_path / "gd.sock").exists():
            assert daemon.poll() is None
            time.sleep(0.02)
        client = gandiva.Client(endpoint)
        with pytest.raises(gandiva.GandivaError) as e:
            client.checkpoint(42, str(tmp_path / "ckpt"))
        assert e.value.code == "not_found" and "no job 42" in e.value.message
        with pytest.raises(gandiva.GandivaError) as e:
            client.migrate(42, "nowhere")
        assert e.value.code == "not_found"
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


def test_python_enums_are_the_schemas():
    """gandiva.protocol's enums list exactly the values of messages.def, in order."""
    schema = gandiva._gandiva.schema_enums()
    assert set(gandiva.protocol.ENUMS) == set(schema)
    for name, cls in gandiva.protocol.ENUMS.items():
        assert [m.value for m in cls] == schema[name], name
    assert gandiva.protocol.JobState.RUNNING == "running"
    assert f"{gandiva.protocol.SwapState.SWAPPED_OUT}" == str(gandiva.protocol.SwapState.SWAPPED_OUT) == "swapped_out"
    assert "done" in {gandiva.protocol.OperationState.DONE}
    assert gandiva.protocol.JobState("migrated").ended
    assert not gandiva.protocol.JobState.SUSPENDED.ended
    assert gandiva.protocol.PROTOCOL_VERSION == 1


def test_validate_reply_says_what_is_wrong():
    from gandiva.protocol import ReplyError, validate_reply, validate_reply_frame
    validate_reply("suspend", {"state": "suspending"})
    validate_reply("kill", {})
    with pytest.raises(ReplyError, match="'paused' is not a job_state"):
        validate_reply("suspend", {"state": "paused"})
    with pytest.raises(ReplyError, match="missing field 'state'"):
        validate_reply("resume", {})
    with pytest.raises(ReplyError, match="unknown field 'extra'"):
        validate_reply("kill", {"extra": 1})
    validate_reply("kill", {"extra": 1}, allow_unknown=True)
    with pytest.raises(ReplyError, match="bytes: must be uint, not string"):
        validate_reply("migrate_commit", {"bytes": "12"})
    with pytest.raises(ReplyError, match="unknown request type"):
        validate_reply("explode", {})
    validate_reply_frame("migrate_commit", '{"v":1,"ok":true,"bytes":12}')
    validate_reply_frame("migrate_commit", '{"v":1,"ok":false,"error":{"code":"internal","message":"x"}}')
    with pytest.raises(ReplyError, match="'v' must be 1"):
        validate_reply_frame("migrate_commit", '{"v":7,"ok":true,"bytes":12}')


def test_register_buffer_saves_and_restores_the_memory_itself(tmp_path):
    """A bytearray and a NumPy array registered as buffers: a checkpoint holds
    their bytes, a process started with GANDIVA_RESTORE finds them back in its
    own buffers at its first boundary."""
    ckpt = tmp_path / "ckpt"
    r = run_python(f"""
        import numpy, gandiva
        raw = bytearray(range(256)) * 4096
        weights = numpy.arange(300000, dtype=numpy.float32)
        gandiva.register_buffer("raw", raw)
        gandiva.register_buffer("weights", weights)
        try:
            raw.extend(b"x")
        except BufferError:
            print("pinned")
        for bad in (b"read-only bytes", bytearray()):
            try:
                gandiva.register_buffer("bad", bad)
            except (TypeError, BufferError, ValueError) as e:
                print(type(e).__name__)
        try:
            gandiva.register_buffer("raw", bytearray(1))
        except KeyError:
            print("taken")
        print(gandiva.checkpoint({str(ckpt)!r}))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:4] == ["pinned", "BufferError", "ValueError", "taken"], r.stdout
    r = run_python("""
        import hashlib, numpy, gandiva
        raw = bytearray(256 * 4096)
        weights = numpy.zeros(300000, dtype=numpy.float32)
        gandiva.register_buffer("raw", raw)
        gandiva.register_buffer("weights", weights)
        gandiva.step()
        print(raw == bytearray(range(256)) * 4096,
              bool((weights == numpy.arange(300000, dtype=numpy.float32)).all()))
    """, GANDIVA_RESTORE=str(ckpt))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True"], (r.stdout, r.stderr)
