"""The record writer kernel against the reference writer, byte for byte, on random latents and on the
edge values of both formats."""

import pytest
import torch

from attnkit.mqa_decode import mqa_write_records
from attnkit.reference.mqa_decode import RECORD_FORMATS, mqa_write_ref, rope_rotate
from attnkit.testing.inputs import rope_cos_sin


def _latents(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 512, generator=g) * torch.exp2(torch.randint(-20, 20, (n, 1), generator=g).float())
    x[0, :32] = 448.0  # fp8: amax exactly 448 -> scale 2^0
    x[0, 32] = 449.0  # amax just above 448 -> 2^1
    x[0, 64:96] = 0.0  # a block of zeros
    x[0, 96:128] = -0.0  # signed zeros
    x[0, 128:160] = 2.0 ** -130  # subnormal-range values
    x[1, :16] = torch.linspace(-6, 6, 16)  # nvfp4: amax 6 -> scale 1.0
    x[1, 16] = 6.0 * 448  # the largest nvfp4 scale
    x[1, 32] = 6.0 * 448 * 4  # beyond it: saturates
    x[1, 48:64] = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0] * 2)  # e2m1 ties at scale 1
    return x.to(torch.bfloat16)


@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
@pytest.mark.parametrize("loads_first", [False, True])
def test_writer_matches_reference_byte_for_byte(fmt, loads_first, device):
    """Both load orders (writer_loads_first): the reference's bytes at the written slots, every other byte untouched
    (with loads_first a skipped row's stores are masked, not branched around: a store left unmasked writes slot 0)."""
    n, ps = 12, 16
    lat = _latents(n, 0)
    pos = torch.tensor([0, 1, 5, 100, 4095, 17, 3, 8, 9, 10, 11, 2047])
    cs = rope_cos_sin(4096)
    size = RECORD_FORMATS[fmt][0]
    stride = (size + 15) // 16 * 16 + 16
    cache = torch.randint(0, 256, (3, ps, stride), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    before = cache.clone()
    slots = torch.tensor([5, 0, 47, 13, -1, 20, 21, 22, 30, 31, 40, 1])  # -1: skipped
    c = cache.to(device)
    mqa_write_records(lat.to(device), pos.to(device), cs.to(device), slots.to(device), c, fmt, loads_first=loads_first)
    got = c.cpu().view(-1, stride)
    ref = mqa_write_ref(lat, pos, cs, fmt)
    for i, sl in enumerate(slots.tolist()):
        if sl >= 0:
            assert torch.equal(got[sl, :size], ref[i]), (fmt, i, (got[sl, :size] != ref[i]).nonzero()[:5].tolist())
    written = set(s for s in slots.tolist() if s >= 0)
    untouched = [s for s in range(got.shape[0]) if s not in written]
    assert torch.equal(got[untouched], before.view(-1, stride)[untouched])  # other slots untouched
    assert torch.equal(got[:, size:], before.view(-1, stride)[:, size:])  # record padding untouched


def test_writer_rejects_bad_input(device):
    cs = rope_cos_sin(16).to(device)
    lat = torch.zeros(2, 512, dtype=torch.bfloat16, device=device)
    cache = torch.zeros(1, 16, 528, dtype=torch.uint8, device=device)
    pos = torch.tensor([0, 1], device=device)
    with pytest.raises(ValueError, match="slots"):
        mqa_write_records(lat, pos, cs, torch.tensor([0, 16], device=device), cache, "fp8")
    with pytest.raises(ValueError, match="slots"):
        mqa_write_records(lat, pos, cs, torch.tensor([3, 3], device=device), cache, "fp8")
    with pytest.raises(ValueError, match="positions"):
        mqa_write_records(lat, torch.tensor([0, 16], device=device), cs, torch.tensor([0, 1], device=device), cache, "fp8")
    with pytest.raises(ValueError, match="cache"):
        mqa_write_records(lat, pos, cs, torch.tensor([0, 1], device=device), cache[..., :520], "fp8")
    with pytest.raises(ValueError, match="fmt"):
        mqa_write_records(lat, pos, cs, torch.tensor([0, 1], device=device), cache, "fp4")
    for name in ("slots", "positions"):  # read at offset i: a strided view must be refused, not misread
        strided = torch.tensor([0, 9, 1, 9], device=device)[::2]
        args = dict(slots=torch.tensor([0, 1], device=device), positions=pos)
        args[name] = strided
        with pytest.raises(ValueError, match=f"{name}: must be a contiguous"):
            mqa_write_records(lat, args["positions"], cs, args["slots"], cache, "fp8")


def test_slow_writer_diagnostic(device):
    """_diag_delay_ns (the stress check's slow writer): a bad value is refused by name; where the global timer runs
    (a compiled GPU kernel) the delayed writer stores the same bytes, and in the interpreter it is refused."""
    lat = _latents(2, 5).to(device)
    cs = rope_cos_sin(64).to(device)
    pos = torch.tensor([7, 9], device=device)
    slots = torch.tensor([2, 5], device=device)
    a = torch.zeros(1, 16, 528, dtype=torch.uint8, device=device)
    for bad in (-1, 1.5, 10**8):
        with pytest.raises(ValueError, match="_diag_delay_ns"):
            mqa_write_records(lat, pos, cs, slots, a, "fp8", _diag_delay_ns=bad)
    mqa_write_records(lat, pos, cs, slots, a, "fp8")
    b = torch.zeros_like(a)
    from attnkit._runtime import interpreting
    if device == "cpu" or interpreting():
        with pytest.raises(ValueError, match="_diag_delay_ns: needs a compiled GPU kernel"):
            mqa_write_records(lat, pos, cs, slots, b, "fp8", _diag_delay_ns=1000)
        return
    mqa_write_records(lat, pos, cs, slots, b, "fp8", _diag_delay_ns=20000)
    assert torch.equal(a, b) and int(a.ne(0).sum()) > 0


@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
def test_writer_random_magnitudes_byte_exact(fmt, device):
    cs = rope_cos_sin(4096)
    stride = 528 if fmt == "fp8" else 288
    for seed in range(6):
        g = torch.Generator().manual_seed(100 + seed)
        n = 8
        lat = (torch.randn(n, 512, generator=g) * torch.exp2(torch.randint(-140, 120, (n, 1), generator=g).float()))
        lat = lat.to(torch.bfloat16)
        pos = torch.randint(0, 4096, (n,), generator=g)
        cache = torch.zeros(1, 16, stride, dtype=torch.uint8, device=device)
        mqa_write_records(lat.to(device), pos.to(device), cs.to(device), torch.arange(n, device=device), cache, fmt)
        assert torch.equal(cache[0, :n].cpu(), mqa_write_ref(lat, pos, cs, fmt))


def test_writer_rejects_non_finite_latents(device):
    lat = torch.zeros(1, 512, dtype=torch.bfloat16, device=device)
    lat[0, 3] = float("inf")
    with pytest.raises(ValueError, match="latent"):
        mqa_write_records(lat, torch.tensor([0], device=device), rope_cos_sin(4).to(device),
                          torch.tensor([0], device=device), torch.zeros(1, 16, 528, dtype=torch.uint8, device=device), "fp8")


def test_writer_loads_first_skipped_row_reads_no_cos_sin(device, monkeypatch):
    """writer_loads_first loads a row's position before knowing whether its slot is -1: a skipped row's position
    (not validated with validate=False) may lie past the cos / sin table, and its cos / sin are not read (masked by
    the slot); the written row's bytes as without the option. The option's grammar (ATTNKIT_MQA_WRITER_LOADS_FIRST)."""
    lat = _latents(2, 3).to(device)
    cs = rope_cos_sin(64).to(device)
    pos = torch.tensor([7, 1 << 40], device=device)  # row 1: skipped, its position far past the table
    slots = torch.tensor([2, -1], device=device)
    a = torch.zeros(1, 16, 528, dtype=torch.uint8, device=device)
    b = a.clone()
    mqa_write_records(lat, pos, cs, slots, a, "fp8", validate=False, loads_first=False)
    mqa_write_records(lat, pos, cs, slots, b, "fp8", validate=False, loads_first=True)
    assert torch.equal(a, b) and int(a[0, 2].ne(0).sum()) > 0
    monkeypatch.setenv("ATTNKIT_MQA_WRITER_LOADS_FIRST", "yes")
    with pytest.raises(ValueError, match="ATTNKIT_MQA_WRITER_LOADS_FIRST"):
        mqa_write_records(lat, pos, cs, slots, b, "fp8", validate=False)


@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
def test_writer_without_validation_keeps_nan_in_the_record(fmt, device):
    """validate=False (the checks refuse a NaN latent): a NaN is stored so that the record decodes as NaN, never as
    a finite value. fp8: the NaN code where the rotated latent is NaN, the block's other codes as without it; nvfp4
    (e2m1 has no NaN): the 16-value block's scale is the NaN code. Byte for byte against the oracle's encoder, and
    the decoded record NaN exactly there. Rows: a whole NaN row, NaNs of both signs beside finite values (one where
    the block's largest value would be), a NaN in the RoPE dims (its rotation pair becomes NaN too), a whole block."""
    n = 5
    lat = _latents(n, 7)
    lat[0] = float("nan")
    lat[1, 5] = float("nan")
    lat[1, 40] = -float("nan")
    lat[2, 17] = 1e30
    lat[2, 18] = float("nan")
    lat[3, 500] = -float("nan")
    lat[4, 64:96] = float("nan")
    pos = torch.tensor([3, 0, 9, 77, 1000])
    cs = rope_cos_sin(4096)
    size, _, decode = RECORD_FORMATS[fmt]
    cache = torch.zeros(1, 16, size, dtype=torch.uint8, device=device)
    mqa_write_records(lat.to(device), pos.to(device), cs.to(device), torch.arange(n, device=device), cache, fmt,
                      validate=False)
    got = cache[0, :n].cpu()
    ref = mqa_write_ref(lat, pos, cs, fmt)
    assert torch.equal(got, ref), (got != ref).nonzero()[:8].tolist()
    rotated_nan = torch.isnan(rope_rotate(lat, pos, cs))
    if fmt == "nvfp4":
        rotated_nan = rotated_nan.view(n, 32, 16).any(-1, keepdim=True).expand(n, 32, 16).reshape(n, 512)
    decoded = decode(got)
    assert (~rotated_nan[1:4]).any(-1).all() and torch.equal(torch.isnan(decoded), rotated_nan)
