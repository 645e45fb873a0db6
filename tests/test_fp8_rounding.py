"""The shared Triton e4m3 rounding against torch's cast (round to nearest even), ties included."""

import torch
import triton
import triton.language as tl

from attnkit._triton.fp8 import round_e4m3
from attnkit._triton.rounding import to_bf16


@triton.jit
def _round_kernel(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(X + offs, mask=m, other=0.0)
    tl.store(Y + offs, round_e4m3(x).to(Y.dtype.element_ty), mask=m)


def test_round_e4m3_matches_torch_cast(device):
    grid = torch.arange(0, 127, dtype=torch.uint8).view(torch.float8_e4m3fn).float()  # finite codes >= 0
    mids = (grid[1:] + grid[:-1]) / 2  # exact ties between neighbours
    g = torch.Generator().manual_seed(0)
    rnd = torch.rand(20000, generator=g) * 448
    tiny = torch.rand(2000, generator=g) * 2 ** -5
    x = torch.cat([grid, mids, rnd, tiny, torch.tensor([448.0, 2 ** -10, 0.0])])
    x = torch.cat([x, -x]).float().to(device)
    y = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=device)
    _round_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    assert torch.equal(y.view(torch.uint8).cpu(), x.to(torch.float8_e4m3fn).view(torch.uint8).cpu())


@triton.jit
def _bf16_kernel(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    tl.store(Y + offs, to_bf16(tl.load(X + offs, mask=m, other=0.0)), mask=m)


def test_round_bf16_matches_torch_cast(device):
    g = torch.Generator().manual_seed(1)
    x = torch.cat([torch.randn(50000, generator=g) * 10 ** torch.randint(-30, 30, (50000,), generator=g),
                   torch.tensor([0.0, -0.0, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 3.3895314e38, 1e-40, -1e-39])])
    x = x.float().to(device)
    y = torch.empty(x.shape, dtype=torch.bfloat16, device=device)
    _bf16_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    assert torch.equal(y.view(torch.int16).cpu(), x.to(torch.bfloat16).view(torch.int16).cpu())


def test_round_bf16_keeps_nan_and_infinity(device):
    """NaN stays NaN, whatever its payload and sign (the GPU's own NaN is 0x7FFFFFFF, where a carry out of the
    rounding add gave -0.0, and a NaN of payload 1 gave infinity); infinities and the largest finite values that round
    up to infinity are bits of torch's cast."""
    nan_bits = torch.tensor([0x7FFFFFFF, 0x7FC00000, 0x7F800001, 0x7FBFFFFF, -1, -0x400000, -0x7FFFFF],
                            dtype=torch.int32)
    edge = torch.tensor([float("inf"), float("-inf"), 3.4028235e38, -3.4028235e38, 3.3961775e38], dtype=torch.float32)
    x = torch.cat([nan_bits.view(torch.float32), edge]).to(device)
    y = torch.empty(x.shape, dtype=torch.bfloat16, device=device)
    _bf16_kernel[(1,)](x, y, x.numel(), BLOCK=16)
    y = y.cpu()
    n = nan_bits.numel()
    assert torch.isnan(y[:n]).all(), y[:n].view(torch.int16)
    assert torch.equal(torch.signbit(y[:n]), nan_bits < 0)
    assert torch.equal(y[n:].view(torch.int16), edge.to(torch.bfloat16).view(torch.int16))
