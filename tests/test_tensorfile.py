"""The output-file format between evaluation children: round trips, the reused
staging buffer, and the refusals a hostile writer runs into."""

from __future__ import annotations

import json

import pytest
import torch

from cuda_agent.eval.channel.tensorfile import Staging, TensorFileError, load_tensors, save_tensors


def _tensors(seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randn(37, 53, generator=g),
        torch.randn(8, 6, generator=g, dtype=torch.float64).t(),  # not contiguous
        torch.randint(-5, 5, (11,), generator=g, dtype=torch.int32),
        torch.randn(3, 4, generator=g).to(torch.bfloat16),
        torch.empty(0, 7),
    ]


@pytest.mark.parametrize("staged", [False, True])
def test_round_trip_keeps_values_dtypes_and_shapes(tmp_path, staged):
    st = Staging() if staged else None
    src = _tensors(1)
    save_tensors(tmp_path / "a.bin", src, st)
    back = load_tensors(tmp_path / "a.bin", 1 << 20, st)
    assert len(back) == len(src)
    for a, b in zip(src, back, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a, b)


def test_staged_loads_are_independent_copies(tmp_path):
    """The staging buffer is overwritten by the next load: what a load returned must not change."""
    st = Staging()
    big, small = torch.arange(1000, dtype=torch.float32), torch.full((10,), -3.0)
    save_tensors(tmp_path / "big.bin", [big], st)
    save_tensors(tmp_path / "small.bin", [small], st)
    first = load_tensors(tmp_path / "big.bin", 1 << 20, st)[0]
    second = load_tensors(tmp_path / "small.bin", 1 << 20, st)[0]
    assert torch.equal(first, big) and torch.equal(second, small)
    # the buffer grew once to the larger size and was reused for the smaller one
    assert st.take(4).data_ptr() == st.take(4000).data_ptr()


def test_staging_pins_only_its_first_buffer(monkeypatch):
    """Pinning 128 MB costs ~57 ms on an H200 host: the shape probe's doubled output (a one-off,
    larger request) must get a pageable buffer, not a second pinned one; the first size stays pinned
    and reused."""
    made: list[tuple[int, bool]] = []

    def alloc(nbytes: int, pin: bool) -> torch.Tensor:
        made.append((nbytes, pin))
        return torch.empty(nbytes, dtype=torch.uint8)  # the CPU build cannot pin

    st = Staging(pin=True)
    monkeypatch.setattr(st, "_alloc", alloc)
    first = st.take(1000)
    assert st.take(800).data_ptr() == first.data_ptr()
    big = st.take(2000)
    assert st.take(1500).data_ptr() == big.data_ptr() != first.data_ptr()
    assert st.take(1000).data_ptr() == first.data_ptr()  # back to the pinned one at the usual size
    st.take(3000)
    assert made == [(1000, True), (2000, False), (3000, False)]


def test_staged_save_is_what_was_passed_not_the_buffer(tmp_path):
    st = Staging()
    a, b = torch.ones(64), torch.zeros(64) - 2
    save_tensors(tmp_path / "one.bin", [a, b], st)  # both pass through the same buffer
    got = load_tensors(tmp_path / "one.bin", 1 << 20)
    assert torch.equal(got[0], a) and torch.equal(got[1], b)


def _write(path, header: bytes, body: bytes) -> None:
    path.write_bytes(header + body)


@pytest.mark.parametrize("staged", [False, True])
def test_refuses_truncated_trailing_malformed_and_oversized(tmp_path, staged):
    st = Staging() if staged else None
    head = json.dumps({"tensors": [{"dtype": "float32", "shape": [4]}]}).encode() + b"\n"
    _write(tmp_path / "t.bin", head, b"\0" * 12)
    with pytest.raises(TensorFileError, match="truncated"):
        load_tensors(tmp_path / "t.bin", 1 << 20, st)
    _write(tmp_path / "x.bin", head, b"\0" * 20)
    with pytest.raises(TensorFileError, match="trailing"):
        load_tensors(tmp_path / "x.bin", 1 << 20, st)
    _write(tmp_path / "m.bin", b'{"tensors": [{"dtype": "object", "shape": [1]}]}\n', b"\0" * 8)
    with pytest.raises(TensorFileError, match="malformed"):
        load_tensors(tmp_path / "m.bin", 1 << 20, st)
    _write(tmp_path / "n.bin", b"no header at all", b"")
    with pytest.raises(TensorFileError, match="no header"):
        load_tensors(tmp_path / "n.bin", 1 << 20, st)
    _write(tmp_path / "o.bin", head, b"\0" * 16)
    with pytest.raises(TensorFileError, match="more than"):
        load_tensors(tmp_path / "o.bin", 8, st)
    assert torch.equal(load_tensors(tmp_path / "o.bin", 1 << 20, st)[0], torch.zeros(4))


@pytest.fixture
def split_reads(monkeypatch):
    """Make the threaded read path take small tensors, so the tests exercise it cheaply."""
    from cuda_agent.eval.channel import tensorfile

    monkeypatch.setattr(tensorfile, "PARALLEL_MIN", 4096)
    monkeypatch.setattr(tensorfile, "READERS", 4)
    return tensorfile


@pytest.mark.parametrize("staged", [False, True])
def test_split_reads_round_trip_several_large_tensors(tmp_path, split_reads, staged):
    g = torch.Generator().manual_seed(7)
    # sizes that do not divide evenly among the readers, a small one between two large ones
    src = [
        torch.randn(10_007, generator=g),
        torch.arange(5, dtype=torch.int64),
        torch.randn(333, 91, generator=g, dtype=torch.float64),
        torch.randn(0),
    ]
    st = Staging() if staged else None
    save_tensors(tmp_path / "s.bin", src, st)
    back = load_tensors(tmp_path / "s.bin", 1 << 24, st)
    assert [t.shape for t in back] == [t.shape for t in src]
    for a, b in zip(src, back, strict=True):
        assert torch.equal(a, b)


def test_split_reads_refuse_a_short_file(tmp_path, split_reads):
    """A header that promises more bytes than the file holds (or a file cut while it is read)
    fails with TensorFileError, not with zeros where the bytes were missing."""
    body = torch.randn(20_000).numpy().tobytes()
    header = json.dumps({"tensors": [{"dtype": "float32", "shape": [20_000]}]}).encode() + b"\n"
    path = tmp_path / "cut.bin"
    _write(path, header, body)
    with open(path, "rb") as f:
        f.readline()
        buf = torch.empty(len(body) + 4096, dtype=torch.uint8)  # asks for more than is there
        with pytest.raises(TensorFileError, match="truncated"):
            split_reads._read_into(f, buf)
