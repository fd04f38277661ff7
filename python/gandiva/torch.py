"""PyTorch integration: mark an iteration boundary after every optimizer step.

    model = ...
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    gandiva.torch.attach(optimizer)

Before a boundary where the controller will park the job and swap its device
memory out, attach() releases torch's cached free blocks (torch.cuda.empty_cache)
so that only live tensors are swapped (docs/shim.md, "Moving only what is live").

torch >= 2.0 has optimizer step hooks; older versions (Debian's 1.13) do not, so
there `optimizer.step` is wrapped. Both give the same boundaries.

Checkpointable training: wrap the DataLoader, register everything that has a
state_dict() (model, optimizer, LR scheduler, GradScaler, EMA, the wrapped
loader), then attach; the loop stays an ordinary epoch loop:

    loader = gandiva.torch.resumable(DataLoader(ds, batch_size=32, shuffle=True,
                                                num_workers=2))
    gandiva.torch.register(model, optimizer, scheduler, loader)
    gandiva.torch.attach(loader)      # a restoring process loads everything here
    for epoch in loader.epochs(num_epochs):
        for x, y in loader:           # resumes at the batch after the checkpoint
            ...; optimizer.step(); ...
        scheduler.step()

An attached loader marks the boundary before it hands out each batch, when the
loop's body for the previous one is over (scheduler, EMA and scaler updates
after optimizer.step() included); an attached optimizer marks it right after
optimizer.step(), so a loop that does more after the step attaches the loader.

Loops driven by a counter instead can use the one the state keeps:

    state = gandiva.torch.register(model, optimizer, generators=[gen],
                                   extra={"losses": []})
    gandiva.torch.attach(optimizer)
    while state.iteration < iterations:
        ...; state.extra["losses"].append(loss.item()); optimizer.step()
"""

import collections
import functools
import io
import os
import pickle
import random
import struct
import sys
import warnings

import torch

from . import _gandiva
from ._resumable import ResumableLoader, resumable  # noqa: F401 (part of this module's API)


class Attachment:
    """What attach() returns; remove() detaches the boundary from the optimizer."""

    def __init__(self, remover):
        self._remover = remover

    def remove(self):
        if self._remover:
            self._remover()
            self._remover = None


def _release_cached_memory_if_swapping():
    """Before a boundary where the job will park and swap its device memory out:
    give PyTorch's cached free blocks back to the driver (torch.cuda.empty_cache),
    so that the shim copies only live tensors (on the H100 a job with ~1.1 GiB of
    live tensors swapped 3.6 GiB). Done here, before the boundary, with every
    thread still running: inside the park, a thread gated in the middle of an
    allocation may hold the allocator's lock. Costs one atomic read otherwise."""
    if _gandiva.swap_out_pending() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _boundary():
    _release_cached_memory_if_swapping()
    _gandiva.boundary()


def _count_and_mark(optimizer):
    # The iteration is complete once the step is taken: count it before the
    # boundary so that a checkpoint taken there records it.
    state = getattr(optimizer, "_gandiva_state", None)
    if state is not None:
        state.iteration += 1
    _boundary()


def _post_step_hook(optimizer, args, kwargs):
    _count_and_mark(optimizer)


def _attach_loader(loader):
    if loader._boundary is not None:
        raise RuntimeError("gandiva.torch.attach: this loader is attached already")
    if loader._gandiva_state is not None:
        _leave_raw_device_memory_out()  # CUDA may have started since register()
    _boundary()
    loader._boundary = _boundary

    def remove():
        loader._boundary = None

    return Attachment(remove)


def attach(optimizer):
    """Marks a gandiva boundary after every optimizer.step(), and one now: the
    job may be parked here before its first iteration if its device is busy.

    Given a resumable() loader instead, marks one now and then one before each
    batch it hands out after the first of an epoch's iteration (the previous
    batch's whole loop body done)."""
    if isinstance(optimizer, ResumableLoader):
        return _attach_loader(optimizer)
    if getattr(optimizer, "_gandiva_attached", False):
        raise RuntimeError("gandiva.torch.attach: this optimizer is attached already")
    state = getattr(optimizer, "_gandiva_state", None)
    if state is not None and any(isinstance(o, ResumableLoader) for o in state.objects):
        raise RuntimeError("gandiva.torch.attach: a resumable loader is registered: attach the "
                           "loader, not the optimizer, so that checkpoints fall between batches "
                           "(after what the loop does after optimizer.step())")
    optimizer._gandiva_attached = True
    if getattr(optimizer, "_gandiva_state", None) is not None:
        _leave_raw_device_memory_out()  # CUDA may have started since register()
    _boundary()

    register = getattr(optimizer, "register_step_post_hook", None)
    if register is not None:
        handle = register(_post_step_hook)

        def remove():
            handle.remove()
            optimizer._gandiva_attached = False

        return Attachment(remove)

    original = optimizer.step

    @functools.wraps(original)
    def step(*args, **kwargs):
        result = original(*args, **kwargs)
        _count_and_mark(optimizer)
        return result

    optimizer.step = step

    def remove():
        optimizer.step = original
        optimizer._gandiva_attached = False

    return Attachment(remove)


def _is_stateful(obj):
    return callable(getattr(obj, "state_dict", None)) and callable(
        getattr(obj, "load_state_dict", None))


def _describe(obj):
    return type(obj).__module__ + "." + type(obj).__qualname__


_warned_unpickling = False


def _say_it_unpickles(why):
    """Unpickling runs whatever code the checkpoint names: say so, once per
    process, on stderr and as a RuntimeWarning. The C++ side restores only a
    file this user (or root) owns and no one else may write; its CRCs catch
    damage, not a forgery."""
    global _warned_unpickling
    if _warned_unpickling:
        return
    _warned_unpickling = True
    message = ("gandiva.torch: restoring this checkpoint unpickles it (" + why + "): "
               "it runs whatever code the file names, so restore only checkpoints you wrote")
    print(message, file=sys.stderr, flush=True)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def _torch_load(buf):
    """The state, loaded with weights_only where this torch has it and the state
    allows (tensors, ints, strings, lists, tuples, dicts); else unpickled in
    full, saying so. torch < 2.0 cannot load floats weights-only (an
    optimizer's lr), objects in `extra` need pickle anyway."""
    try:
        return torch.load(buf, map_location="cpu", weights_only=True)
    except TypeError:  # no weights_only in this torch
        buf.seek(0)
        _say_it_unpickles("this torch has no weights_only loading")
        return torch.load(buf, map_location="cpu")
    except pickle.UnpicklingError as e:
        buf.seek(0)
        why = str(e).rsplit("WeightsUnpickler error:", 1)[-1].strip() or "not weights only"
        if why == "Unsupported operand 71":  # pickle's BINFLOAT
            why = "floats, which this torch's weights_only cannot load (before torch 2.0)"
        _say_it_unpickles("it holds more than weights_only loads: " + why)
        return torch.load(buf, map_location="cpu", weights_only=False)


def _numpy_state_to_save(state):
    """numpy's RNG state ("MT19937", keys, pos, has_gauss, cached_gaussian) in
    what weights_only loads: the keys as an int64 tensor (not a numpy array),
    the cached gaussian as a float64 tensor (torch < 2.0 loads no float)."""
    kind, keys, pos, has_gauss, cached = state
    return (kind, torch.from_numpy(keys.astype("int64")), pos, has_gauss,
            torch.tensor(cached, dtype=torch.float64))


def _numpy_state_to_set(state, numpy):
    """The state numpy.random.set_state takes, from either form (checkpoints
    saved before held numpy's own)."""
    kind, keys, pos, has_gauss, cached = state
    if isinstance(keys, torch.Tensor):
        keys = keys.numpy().astype(numpy.uint32)
    if isinstance(cached, torch.Tensor):
        cached = cached.item()
    return (kind, keys, pos, has_gauss, cached)


class TrainingState:
    """The state gandiva.torch.register() checkpoints: the state_dict() of the
    model, the optimizer and every other registered object (LR schedulers,
    GradScaler, EMA weights, a ResumableLoader, ...), torch's global RNG state
    (and CUDA's, once initialised), Python's `random` state, numpy's global RNG
    state if numpy is imported, the given torch.Generator states, `iteration`
    and `extra`. The whole is one torch.save, so non-tensor entries (ints,
    floats, lists, nested dicts) come back exactly as they were.

    `iteration` counts completed optimizer steps (attach() increments it
    after each step, before the boundary). `extra` is a dict for whatever else
    must survive (a loss history, a data position); it is pickled, and on
    restore updated in place, so read it through `state.extra[...]` after the
    first boundary rather than keeping references to its old values."""

    def __init__(self, name, model, optimizer, generators, extra, objects=()):
        self.name = name
        self.model = model
        self.optimizer = optimizer
        self.objects = tuple(objects)
        self.generators = tuple(generators)
        self.iteration = 0
        self.extra = {} if extra is None else extra
        self.restored = False

    def state_dict(self):
        d = {
            "format": 1,
            "iteration": self.iteration,
            "extra": self.extra,
            "torch_rng": torch.get_rng_state(),
            "python_random": random.getstate(),
            "generators": [g.get_state() for g in self.generators],
            # Each with its type, so that a process registering other objects is told which.
            "objects": [(_describe(o), o.state_dict()) for o in self.objects],
        }
        if self.model is not None:
            d["model"] = self.model.state_dict()
        if self.optimizer is not None:
            d["optimizer"] = self.optimizer.state_dict()
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            d["numpy_random"] = _numpy_state_to_save(numpy.random.get_state())
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            d["cuda_rng"] = torch.cuda.get_rng_state_all()
        return d

    def load_state_dict(self, d):
        if len(d["generators"]) != len(self.generators):
            raise ValueError(f"checkpoint has {len(d['generators'])} generators, "
                             f"this process registered {len(self.generators)}")
        if (self.model is None) != ("model" not in d):
            raise ValueError("checkpoint and process disagree on whether a model is registered")
        if (self.optimizer is None) != ("optimizer" not in d):
            raise ValueError("checkpoint and process disagree on whether an optimizer is registered")
        saved = d.get("objects", [])
        if [t for t, _ in saved] != [_describe(o) for o in self.objects]:
            raise ValueError(f"checkpoint has objects {[t for t, _ in saved]}, this process "
                             f"registered {[_describe(o) for o in self.objects]}")
        if self.model is not None:
            self.model.load_state_dict(d["model"])
        if self.optimizer is not None:
            self.optimizer.load_state_dict(d["optimizer"])
        for obj, (_, state) in zip(self.objects, saved):
            obj.load_state_dict(state)
        torch.set_rng_state(d["torch_rng"])
        random.setstate(d["python_random"])
        for g, s in zip(self.generators, d["generators"]):
            g.set_state(s)
        if "numpy_random" in d:
            import numpy  # saved with numpy imported: restore it the same way
            numpy.random.set_state(_numpy_state_to_set(d["numpy_random"], numpy))
        if "cuda_rng" in d and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(d["cuda_rng"])
        self.iteration = d["iteration"]
        self.extra.clear()
        self.extra.update(d["extra"])
        self.restored = True

    # The section: an 8-byte tag, the length of the model's tensors, their
    # bytes as they lie in memory (each padded to 64 bytes), then one
    # torch.save of everything else, which also holds each tensor's name,
    # dtype, shape and offset and the state_dict's _metadata. The model's
    # bytes are written straight from its tensors, with no pickling and no
    # copy (a torch.save of the state_dict took ~0.6 s per GiB here), and
    # they keep their offsets at every step whatever else grows (the loss
    # history, RNG states), so a migration sends none of the chunks the
    # destination's fresh copy holds already: frozen layers, embeddings
    # (docs/migration.md). A model with other kinds of entries (quantized or
    # sparse tensors, extra state) goes into the torch.save instead. A section
    # that is one torch.save (a zip file), as written before, still loads.
    _LAYOUT = b"GDTORCH3"
    _ALIGN = 64

    @staticmethod
    def _raw_tensors(model_state):
        """(name, tensor) pairs of dense, strided tensors, each contiguous on
        the host, or None if the state_dict holds anything else."""
        out = []
        for name, value in model_state.items():
            if (not isinstance(value, torch.Tensor) or value.layout != torch.strided
                    or value.is_quantized or value.is_meta):
                return None
            out.append((name, value.detach().cpu().contiguous()))
        return out

    def _save(self):
        d = self.state_dict()
        model = d.pop("model", None)
        raw = self._raw_tensors(model) if model is not None else None
        pieces, layout, offset = [], [], 0
        if model is not None and raw is None:
            d["model"] = model
        elif raw is not None:
            for name, t in raw:
                n = t.numel() * t.element_size()
                layout.append((name, str(t.dtype).removeprefix("torch."), tuple(t.shape), offset, n))
                if n:
                    pieces.append(t.view(-1).view(torch.uint8).numpy())
                pad = -n % self._ALIGN
                if pad:
                    pieces.append(bytes(pad))
                offset += n + pad
            d["model_layout"] = layout
            d["model_metadata"] = getattr(model, "_metadata", None)
        rest = io.BytesIO()
        torch.save(d, rest)
        # Written in order, each from where it lies (the runtime releases the GIL).
        return [self._LAYOUT + struct.pack("<Q", offset), *pieces, rest.getbuffer()]

    def _load(self, data):
        view = memoryview(data)
        if bytes(view[:8]) != self._LAYOUT:
            self.load_state_dict(_torch_load(io.BytesIO(data)))
            return
        if len(view) < 16:
            raise ValueError("truncated gandiva.torch section")
        raw_len = struct.unpack_from("<Q", view, 8)[0]
        if raw_len > len(view) - 16:
            raise ValueError(f"gandiva.torch section says its model takes {raw_len} bytes, "
                             f"it holds {len(view) - 16}")
        d = _torch_load(io.BytesIO(view[16 + raw_len:]))
        layout = d.pop("model_layout", None)
        metadata = d.pop("model_metadata", None)
        if layout is not None:
            model = collections.OrderedDict()
            with warnings.catch_warnings():  # read-only bytes: the tensors are only read from
                warnings.simplefilter("ignore", UserWarning)
                for name, dtype, shape, offset, n in layout:
                    dt = getattr(torch, dtype)
                    if offset + n > raw_len:
                        raise ValueError(f"gandiva.torch section: tensor {name} lies past the model's bytes")
                    flat = (torch.frombuffer(view, dtype=dt, count=n // torch.tensor([], dtype=dt).element_size(),
                                             offset=16 + offset) if n else torch.empty(0, dtype=dt))
                    model[name] = flat.view(shape)
            if metadata is not None:
                model._metadata = metadata
            d["model"] = model
        self.load_state_dict(d)

    def step(self):
        """Counts a completed iteration and marks a boundary: for loops that do
        not attach() an optimizer."""
        self.iteration += 1
        _boundary()

    def unregister(self):
        _gandiva.unregister_state(self.name)
        if self.optimizer is not None and getattr(self.optimizer, "_gandiva_state", None) is self:
            self.optimizer._gandiva_state = None
        for obj in self.objects:
            if getattr(obj, "_gandiva_state", None) is self:
                obj._gandiva_state = None


# The CUDA shim's raw device-memory section (shim/memory/device_checkpoint.cc).
_SHIM_DEVICE_SECTION = "cuda.device_memory"


def _leave_raw_device_memory_out():
    """The registered state carries the model and optimizer (torch.save copies
    their tensors to the host), so the shim's raw copy of every device
    allocation is not needed, and it cannot be restored anyway: PyTorch's
    caching allocator grows during training, and a restoring process matches
    allocations at its first boundary (the shim refuses such a checkpoint).
    Unregister it if the shim registered it already (CUDA initialised), and
    tell a shim that registers it later not to."""
    os.environ["GANDIVA_SHIM_CHECKPOINT"] = "0"
    try:
        _gandiva.unregister_state(_SHIM_DEVICE_SECTION)
    except KeyError:
        pass


def register(model=None, optimizer=None, *objects, generators=(), extra=None, name="torch"):
    """Registers a training job's state as the checkpoint section `name` and
    returns the TrainingState. `objects`: anything else with state_dict() and
    load_state_dict() (an LR scheduler, a GradScaler, an EMA model, a
    gandiva.torch.resumable() loader, your own holder), loaded in the order
    given, after the model and the optimizer. Call it before attach()
    (of the optimizer or the loader): a process started with
    GANDIVA_RESTORE=DIR loads the checkpoint at attach()'s first boundary, and everything (model, optimizer,
    objects, RNGs, iteration, extra) is restored in place there."""
    if optimizer is not None and getattr(optimizer, "_gandiva_attached", False):
        raise RuntimeError("gandiva.torch.register: call it before attach(optimizer), "
                           "whose first boundary is where a restoring process loads its state")
    for position, obj in enumerate((model, optimizer) + objects, start=1):
        if obj is not None and not _is_stateful(obj):
            raise TypeError(f"gandiva.torch.register: argument {position} ({_describe(obj)}) "
                            "has no state_dict()/load_state_dict(); keep plain values in "
                            "extra={...} instead")
        if isinstance(obj, ResumableLoader) and obj._boundary is not None:
            raise RuntimeError("gandiva.torch.register: call it before attach(loader), "
                               "whose first boundary is where a restoring process loads")
    state = TrainingState(name, model, optimizer, generators, extra, objects)
    _gandiva.register_state(name, state._save, state._load)
    _leave_raw_device_memory_out()
    if optimizer is not None:
        optimizer._gandiva_state = state
    for obj in objects:
        if isinstance(obj, ResumableLoader):
            obj._gandiva_state = state  # counts state.iteration as it hands out batches
    return state
