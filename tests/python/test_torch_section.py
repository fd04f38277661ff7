"""gandiva.torch's section layout (GDTORCH3): the model's tensors as they lie
in memory, then one torch.save of the rest. Every kind of entry comes back
bitwise; the model's bytes keep their offsets as the rest grows; a model with
entries that are not dense tensors falls back to torch.save; a section written
as one torch.save (before this layout) still loads; a damaged one is refused."""

import io
import os
import sys

import pytest
import torch

BUILD = os.environ.get("GANDIVA_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
sys.path.insert(0, os.path.join(BUILD, "python"))

import gandiva.torch  # noqa: E402


class Mixed(torch.nn.Module):
    """Entries of every common kind: float32, bfloat16 and float64 parameters,
    an int64 buffer, a 0-dim buffer, a bool buffer, an empty one, and a
    weight tied to another."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = torch.nn.Embedding(100, 12)
        self.head = torch.nn.Linear(12, 100, bias=False)
        self.head.weight = self.embed.weight  # tied
        self.norm = torch.nn.BatchNorm1d(12)  # running stats and num_batches_tracked (0-dim int64)
        self.bf16 = torch.nn.Parameter(torch.randn(7, 3).to(torch.bfloat16))
        self.f64 = torch.nn.Parameter(torch.randn(5, dtype=torch.float64))
        self.register_buffer("mask", torch.rand(9) > 0.5)
        self.register_buffer("nothing", torch.empty(0))
        self.register_buffer("counts", torch.randint(0, 1 << 40, (4,)))


def state_of(model, **extra):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return gandiva.torch.TrainingState("t", model, opt, [], dict(extra)), opt


def section(state):
    pieces = state._save()
    assert isinstance(pieces, list)
    return b"".join(bytes(p) for p in pieces)


def same_model(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for name in sa:
        assert sa[name].dtype == sb[name].dtype, name
        assert torch.equal(sa[name], sb[name]), name


def test_every_kind_of_entry_comes_back_bitwise():
    src = Mixed(1)
    src.norm(torch.randn(8, 12))  # running stats move, num_batches_tracked counts
    st, _ = state_of(src, losses=[1.5, 2.5])
    st.iteration = 17
    data = section(st)
    assert data[:8] == b"GDTORCH3"
    dst = Mixed(2)
    st2, _ = state_of(dst)
    st2._load(data)
    same_model(src, dst)
    assert dst.head.weight is dst.embed.weight, "still tied after the load"
    assert st2.iteration == 17 and st2.extra == {"losses": [1.5, 2.5]}


def test_the_models_bytes_keep_their_offsets_as_the_rest_grows():
    model = Mixed(3)
    st, _ = state_of(model, losses=[])
    before = section(st)
    st.extra["losses"].extend(range(1000))
    st.iteration = 123456789
    after = section(st)
    raw_len = int.from_bytes(before[8:16], "little")
    assert raw_len > 0 and after[:16 + raw_len] == before[:16 + raw_len]
    assert len(after) > len(before)


def test_a_model_with_other_entries_falls_back_to_torch_save():
    model = torch.nn.Linear(4, 4)
    model.register_buffer("sparse", torch.eye(4).to_sparse())
    st, _ = state_of(model)
    data = section(st)
    assert int.from_bytes(data[8:16], "little") == 0, "nothing written raw"
    dst = torch.nn.Linear(4, 4)
    dst.register_buffer("sparse", torch.zeros(4, 4).to_sparse())
    st2, _ = state_of(dst)
    st2._load(data)
    assert torch.equal(dst.sparse.to_dense(), torch.eye(4))
    assert torch.equal(dst.weight, model.weight)


def test_a_section_written_as_one_torch_save_still_loads():
    src = Mixed(4)
    st, _ = state_of(src, note="old")
    old = io.BytesIO()
    torch.save(st.state_dict(), old)
    dst = Mixed(5)
    st2, _ = state_of(dst)
    st2._load(old.getvalue())
    same_model(src, dst)
    assert st2.extra == {"note": "old"}


def test_a_damaged_section_is_refused():
    st, _ = state_of(Mixed(6))
    data = section(st)
    st2, _ = state_of(Mixed(7))
    with pytest.raises(ValueError, match="truncated"):
        st2._load(data[:12])
    too_long = data[:8] + (len(data)).to_bytes(8, "little") + data[16:]
    with pytest.raises(ValueError, match="model takes"):
        st2._load(too_long)


class Opaque:
    """Something weights_only cannot load: only a full unpickling brings it back."""

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, Opaque) and other.value == self.value


def unpickling_notes(monkeypatch):
    notes = []
    monkeypatch.setattr(gandiva.torch, "_warned_unpickling", False)
    original = gandiva.torch._say_it_unpickles
    monkeypatch.setattr(gandiva.torch, "_say_it_unpickles",
                        lambda why: (notes.append(why), original(why)))
    return notes


def test_a_state_of_tensors_and_ints_loads_weights_only_with_numpys_rng(monkeypatch):
    numpy = pytest.importorskip("numpy")
    notes = unpickling_notes(monkeypatch)
    numpy.random.seed(5)
    numpy.random.standard_normal()  # a cached gaussian too
    numpy.random.standard_normal()
    expected = numpy.random.get_state()
    src = Mixed(8)
    st = gandiva.torch.TrainingState("t", src, None, [], {"steps": [1, 2, 3]})
    data = section(st)
    numpy.random.seed(6)
    dst = Mixed(9)
    st2 = gandiva.torch.TrainingState("t", dst, None, [], {})
    st2._load(data)
    assert notes == [], "loaded weights_only: nothing unpickled"
    same_model(src, dst)
    got = numpy.random.get_state()
    assert got[0] == expected[0] and (got[1] == expected[1]).all() and got[2:] == expected[2:]
    assert st2.extra == {"steps": [1, 2, 3]}


def test_a_state_weights_only_cannot_load_is_unpickled_saying_so(monkeypatch, capsys):
    notes = unpickling_notes(monkeypatch)
    st, _ = state_of(Mixed(10), thing=Opaque(42))
    data = section(st)
    st2, _ = state_of(Mixed(11))
    with pytest.warns(RuntimeWarning, match="unpickles it"):
        st2._load(data)
    assert st2.extra == {"thing": Opaque(42)}
    assert len(notes) == 1 and "weights_only" in notes[0], notes
    assert "restore only checkpoints you wrote" in capsys.readouterr().err
