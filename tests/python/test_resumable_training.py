"""Training loops as people write them: gandiva.torch.register() with any
object that has state_dict()/load_state_dict(), and gandiva.torch.resumable()
DataLoaders, checked against an ordinary epoch loop (examples/pytorch/
resumable_training.py: shuffling 2-worker DataLoader, StepLR, GradScaler,
dropout, EMA) restored from a checkpoint in a new process."""

import json
import math
import os
import pickle
import struct
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
BUILD = os.environ.get("GANDIVA_BUILD_DIR", os.path.join(ROOT, "build"))
PYDIR = os.path.join(BUILD, "python")
EXAMPLE = os.path.join(ROOT, "examples", "pytorch", "resumable_training.py")
sys.path.insert(0, PYDIR)

import gandiva  # noqa: E402
import gandiva.torch  # noqa: E402

# 600 samples in batches of 16: 38 batches an epoch, the last one of 8.
BATCHES_PER_EPOCH = 38


class Holder:
    """A user's own state: nothing but state_dict()/load_state_dict(), non-tensor values."""

    def __init__(self):
        self.value = {}

    def state_dict(self):
        return self.value

    def load_state_dict(self, d):
        self.value = d


def bits(obj):
    """A structure's exact value: floats by their bit patterns (nan included)."""
    if isinstance(obj, float):
        return ("f", struct.pack("<d", obj))
    if isinstance(obj, dict):
        return {k: bits(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [bits(v) for v in obj])
    if isinstance(obj, torch.Tensor):
        return ("t", obj.dtype, tuple(obj.shape), obj.numpy().tobytes())
    return obj


@pytest.fixture
def registered():
    states = []
    yield states
    for s in states:
        s.unregister()


def test_register_round_trips_any_state_dict_object_bitwise(registered):
    torch.manual_seed(1)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.1)
    scaler = torch.cuda.amp.GradScaler(enabled=False)
    ema = torch.optim.swa_utils.AveragedModel(model)
    holder = Holder()
    holder.value = {"step": 7, "lr": 0.1 + 0.2, "nan": math.nan, "tiny": 5e-324,
                    "history": [1, 2.5, [3, {"deep": -0.0}]], "name": "run-1"}
    for _ in range(4):
        opt.zero_grad()
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
        sched.step()
        ema.update_parameters(model)
    state = gandiva.torch.register(model, opt, sched, scaler, ema, holder, name="objects")
    registered.append(state)
    saved = b"".join(bytes(p) for p in state._save())  # the buffers, as written in order
    before = [bits(o.state_dict()) for o in (model, opt, sched, ema, holder)]

    # Everything changes, then the checkpoint's bytes are loaded back in place.
    for _ in range(3):
        opt.step()
        sched.step()
        ema.update_parameters(model)
    with torch.no_grad():
        model.weight.add_(1.0)
    holder.value = {"step": 0}
    state._load(saved)
    after = [bits(o.state_dict()) for o in (model, opt, sched, ema, holder)]
    assert after == before
    assert sched.get_last_lr() == pytest.approx([0.001])  # the scheduler's own state, reloaded
    assert pickle.dumps(holder.value["history"]) == pickle.dumps([1, 2.5, [3, {"deep": -0.0}]])


def test_register_rejects_objects_without_state_dict(registered):
    with pytest.raises(TypeError, match=r"argument 3 \(builtins.int\) has no state_dict"):
        gandiva.torch.register(None, None, 5, name="bad")
    assert "bad" not in gandiva._gandiva.registered_states()


def test_a_checkpoint_of_other_objects_is_refused_saying_which(registered):
    sched_owner = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    a = gandiva.torch.register(None, None, Holder(), name="a")
    registered.append(a)
    saved = b"".join(bytes(p) for p in a._save())
    b = gandiva.torch.register(None, None, torch.optim.lr_scheduler.StepLR(sched_owner, 2),
                               name="b")
    registered.append(b)
    with pytest.raises(ValueError, match="checkpoint has objects .*Holder.*this process "
                                         "registered .*StepLR"):
        b._load(saved)


def test_checkpoint_with_nothing_registered_says_what_to_register(tmp_path):
    assert gandiva._gandiva.registered_states() == []
    with pytest.raises(gandiva.GandivaError) as e:
        gandiva.checkpoint(tmp_path / "ckpt")
    assert e.value.code == "failed_precondition"
    assert e.value.message.startswith("this process registered no state: call "
                                      "gandiva.torch.register(model, optimizer, ...)")
    assert not (tmp_path / "ckpt" / "state.gdck").exists()


def make_loader(workers=0, samples=50, batch=8, shuffle=True):
    data = TensorDataset(torch.arange(samples))
    return DataLoader(data, batch_size=batch, shuffle=shuffle, num_workers=workers)


def take(loader, epochs, stop_at=None):
    """The batches an epoch loop sees, as lists; stops (like a killed job) at
    (epoch, position) after that batch's body."""
    seen = []
    for epoch in loader.epochs(epochs):
        for (batch,) in loader:
            seen.append((epoch, batch.tolist()))
            if stop_at == (epoch, loader.position):
                return seen
    return seen


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("stop_at", [(1, 3), (1, 7), (0, 1)], ids=["mid", "epoch-end", "first"])
def test_resumed_loader_continues_at_the_next_batch(workers, stop_at):
    torch.manual_seed(5)
    reference = take(gandiva.torch.resumable(make_loader(workers)), 3)
    assert len(reference) == 3 * 7
    assert reference[0][1] != list(range(8)), "shuffled"
    assert reference[:7] != reference[7:14], "a new order every epoch"

    torch.manual_seed(5)
    first = gandiva.torch.resumable(make_loader(workers))
    before = take(first, 3, stop_at=stop_at)
    saved = pickle.dumps((first.state_dict(), torch.get_rng_state()))

    torch.randn(100)  # a new process: whatever happened before the restore...
    torch.manual_seed(5)
    second = gandiva.torch.resumable(make_loader(workers))
    loader_state, rng = pickle.loads(saved)
    second.load_state_dict(loader_state)
    torch.set_rng_state(rng)
    assert (second.epoch, second.position) == stop_at
    after = take(second, 3)
    assert before + after == reference


def test_resumed_epoch_loads_only_the_batches_left():
    loaded = []

    class Recording(TensorDataset):
        def __getitem__(self, i):
            loaded.append(i)
            return super().__getitem__(i)

    def loader():
        return gandiva.torch.resumable(DataLoader(Recording(torch.arange(40)), batch_size=4,
                                                  shuffle=True))

    torch.manual_seed(0)
    first = loader()
    take(first, 1, stop_at=(0, 6))
    state = first.state_dict()
    loaded.clear()
    torch.manual_seed(0)
    second = loader()
    second.load_state_dict(state)
    take(second, 1)
    assert len(loaded) == 40 - 6 * 4


def test_resumable_refuses_loaders_it_cannot_resume():
    data = TensorDataset(torch.arange(10))
    with pytest.raises(ValueError, match="batch_size set"):
        gandiva.torch.resumable(DataLoader(data, batch_size=None))
    loader = gandiva.torch.resumable(DataLoader(data, batch_size=2))
    with pytest.raises(ValueError, match="wrapped already"):
        gandiva.torch.resumable(loader.loader)


def test_attaching_the_optimizer_with_a_registered_loader_is_refused(registered):
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = gandiva.torch.resumable(make_loader())
    registered.append(gandiva.torch.register(model, opt, loader, name="loop"))
    with pytest.raises(RuntimeError, match="attach the loader"):
        gandiva.torch.attach(opt)


def test_an_attached_loader_marks_one_boundary_per_batch_and_counts_iterations():
    code = textwrap.dedent("""
        import torch, gandiva, gandiva.torch
        from torch.utils.data import DataLoader, TensorDataset
        loader = gandiva.torch.resumable(DataLoader(TensorDataset(torch.arange(50)),
                                                    batch_size=8, shuffle=True))
        state = gandiva.torch.register(None, None, loader)
        gandiva.torch.attach(loader)  # the first boundary
        seen = []
        for epoch in loader.epochs(2):
            for (batch,) in loader:
                seen.append(state.iteration)
        # A boundary after each batch's body: 14 measured iterations after the first.
        assert gandiva.stats()["iterations"] == 14, gandiva.stats()
        assert seen == list(range(1, 15)) and state.iteration == 14, seen
        assert (loader.epoch, loader.position) == (2, 0)
        try:
            gandiva.torch.attach(loader)
        except RuntimeError as e:
            assert "attached already" in str(e)
        else:
            raise AssertionError("attached twice")
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=PYDIR)
    env.pop("GANDIVA_CONTROL_BLOCK", None)
    r = subprocess.run(["/usr/bin/python3", "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr


# ---- the example, restored by a new process (GANDIVA_RESTORE), no daemon --------


def run_example(tmp_path, name, *args, restore=None):
    env = dict(os.environ, PYTHONPATH=PYDIR, OMP_NUM_THREADS="1")
    env.pop("GANDIVA_CONTROL_BLOCK", None)
    env.pop("GANDIVA_RESTORE", None)
    if restore:
        env["GANDIVA_RESTORE"] = str(restore)
    out = tmp_path / f"{name}.json"
    r = subprocess.run(["/usr/bin/python3", EXAMPLE, "--epochs", "3", "--result", str(out),
                        *map(str, args)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text()) if out.exists() else None


_references = {}


def reference_run(tmp_path, schedule):
    """An undisturbed run, once per schedule for the whole module."""
    if schedule not in _references:
        _references[schedule] = run_example(tmp_path, "reference", "--schedule", schedule)
    return _references[schedule]


@pytest.mark.whole_example
@pytest.mark.parametrize("schedule,at", [("epoch", 50), ("epoch", BATCHES_PER_EPOCH),
                                         ("step", 61)],
                         ids=["epoch-lr-mid-epoch", "epoch-lr-after-last-batch", "step-lr"])
def test_example_restored_from_a_checkpoint_trains_bitwise_the_same(tmp_path, schedule, at):
    reference = reference_run(tmp_path, schedule)
    ckpt = tmp_path / "ckpt"
    assert run_example(tmp_path, "killed", "--schedule", schedule, "--checkpoint-at", at,
                       "--checkpoint-dir", ckpt, "--exit-after-checkpoint") is None
    restored = run_example(tmp_path, "restored", "--schedule", schedule, restore=ckpt)
    assert restored["resumed_at"] == [at // BATCHES_PER_EPOCH if at % BATCHES_PER_EPOCH else
                                      at // BATCHES_PER_EPOCH - 1,
                                      at % BATCHES_PER_EPOCH or BATCHES_PER_EPOCH]
    assert len(restored["losses"]) == reference["iterations"] == 3 * BATCHES_PER_EPOCH
    assert restored["losses"] == reference["losses"], "loss history differs"
    assert restored["weights_sha256"] == reference["weights_sha256"]
    assert restored["lr"] == reference["lr"]
