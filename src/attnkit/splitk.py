"""Host side of the shared split-K merge: validation and launch. Kernel: attnkit._triton.merge_kernel."""

from __future__ import annotations

import torch
import triton

from ._runtime import check_device, forward_only, on_device_of, pdl_launch, require
from .options import IntOption, Switch

MERGE_BLOCK_D = IntOption("merge_block_d", "ATTNKIT_MERGE_BLOCK_D", None, 16, 256,
                          "output dims per merge program (16 to 256, a power of two); default: the rule "
                          "(merge_block_d_rule)")

PDL = Switch("pdl", "ATTNKIT_PDL", None,
             "programmatic dependent launch for the kernels of a decode step (attention, split-K merge, record "
             "writer): each waits for the previous kernel at entry, then lets the next one launch, so launches "
             "overlap the previous kernel's tail; CUDA sm_90+ only. Default: the rule (pdl_rule)")


HEADPAD_PDL_MAX_TOKENS = 2  # mqa_decode head-padded attention: pdl up to this many tokens (pdl_rule)


def pdl_rule(family: str, kernel: str | None = None, tokens: int | None = None) -> bool:
    """Where programmatic dependent launch is on by default (on a GPU that runs it). H200 evidence, every setting
    alternating in one run (`benchmarks/sweeps/h200-cc494b2/sweep-pdl-*.json`):
    - mqa_decode, a whole step (record writer, attention, merge), swap-AB: faster on all 20 cases (fp8 / nvfp4,
      16 / 32 heads, 1 to 64 tokens), by 0.3 to 1.9 us (h16 t1 fp8: 11.1 -> 10.3 us; h16 t16 fp8 18.6 -> 17.8).
      Head-padded: mixed (4 of 20 slower, up to 0.9 us), so off. The writer: on (its wait costs nothing and it
      was on in the winning setting). Re-timed in whole steps at 0787b50 (`benchmarks/sweeps/h200-0787b50/
      sweep-mqa-pdl-early.json`): head-padded with pdl 18 of 20 faster (0.905-1.030), and with the query prepared
      before the wait (mqa_decode's pdl_early_inputs) all 20 (0.882-0.994). As attention alone (each call after the
      previous call's merge) at 4da1389 (`benchmarks/sweeps/h200-4da1389/sweep-mqa-headpad-pdl.json`, paired
      pdl / rule): 1 token 0.956-0.964 and 2 tokens 0.950-0.984 on all 8 cases (16 / 32 heads, fp8 / nvfp4; h16 t1
      fp8 21.9 -> 21.1 us), 4 tokens 1.015-1.085, 8 tokens 1.008-1.056, 16 tokens 0.979-1.034: so head-padded is
      on up to HEADPAD_PDL_MAX_TOKENS tokens (the bench's step providers pass pdl and pdl_early_inputs explicitly).
    - sparse_int8 decode: slower at 1, 2 and 8 rows (8.5 -> 9.2, 11.2 -> 12.0, 18.3 -> 18.7 us), faster at 4 only
      (13.7 -> 13.4): off.
    - relbias decode and verify: within 1 % either way: off."""
    if family != "mqa_decode":
        return False
    if kernel == "headpad":
        return tokens is not None and tokens <= HEADPAD_PDL_MAX_TOKENS
    return kernel in ("swapab", "writer")

# Merge rule, H200 evidence (`benchmarks/sweeps/h200-67ecdb2/sweep-sparse_int8-merge.json` and
# `sweep-relbias-merge.json`, medians in us, every setting alternating in one run): with few rows one program
# per row leaves most SMs idle, and 64 dims per program spreads them out.
#   sparse_int8 decode, 24 heads x D 256, rows 1 / 2 / 4 / 8 (R = 24 / 48 / 96 / 192):
#     one program per row: 11.1 / 11.6 / 16.8 / 23.1     64 dims: 8.9 / 11.0 / 16.7 / 23.7
#   relbias decode b1 x 64K (R = 64, D 128): 95.6 one per row, 94.0 at 64 dims; b32 x 8K (R = 2048): 263.2 / 261.4
MERGE_FEW_ROWS, MERGE_FEW_ROWS_BLOCK_D = 64, 64


def merge_block_d_rule(rows: int, head_dim: int) -> int:
    """Output dims per merge program: 64 up to MERGE_FEW_ROWS rows, else the whole row (at most 256)."""
    full = min(256, triton.next_power_of_2(head_dim))
    return min(MERGE_FEW_ROWS_BLOCK_D, full) if rows <= MERGE_FEW_ROWS else full


def _validate(m, l, acc, out_dtype):
    for n, t in (("m", m), ("l", l), ("acc", acc)):
        require(isinstance(t, torch.Tensor), n, "must be a tensor")
        require(t.dtype == torch.float32, n, f"must be float32, got {t.dtype}")
        check_device(n, t)
    forward_only(m=m, l=l, acc=acc)
    require(m.dim() == 2, "m", f"must be [S, R], got {tuple(m.shape)}")
    require(l.shape == m.shape, "l", f"must match m's shape {tuple(m.shape)}, got {tuple(l.shape)}")
    require(acc.dim() == 3 and acc.shape[:2] == m.shape, "acc", f"must be [S, R, D] with [S, R] = {tuple(m.shape)}, "
            f"got {tuple(acc.shape)}")
    require(m.shape[0] >= 1, "m", "needs at least one split")
    require(acc.stride(-1) == 1, "acc", "last dimension must be contiguous")
    require(m.stride() == l.stride(), "l", "must have m's strides")
    require(l.device == m.device, "l", f"must be on m's device {m.device}, got {l.device}")
    require(acc.device == m.device, "acc", f"must be on m's device {m.device}, got {acc.device}")
    require(out_dtype in (torch.float32, torch.bfloat16, torch.float16), "out_dtype",
            f"must be float32, bfloat16 or float16, got {out_dtype}")


@on_device_of("m")
def merge_partials_into(m, l, acc, out, lse, *, row_exp=None, block_d=None, pdl: bool = False,
                        _lose_split: bool = False, _block_s: int | None = None) -> None:
    """Merge un-normalized split-K partials into caller buffers (CUDA-graph safe: no allocation).

    row_exp: optional int32 [R]; the partials' m are then in a scaled domain, true max = m * 2^row_exp.
    block_d (else ``ATTNKIT_MERGE_BLOCK_D``): output dims per program.
    pdl: launched as a programmatic dependent of the kernel that wrote the partials (the caller resolved the
    option: attnkit._runtime.resolve_pdl).
    """
    _validate(m, l, acc, out.dtype)
    if row_exp is not None:
        require(row_exp.dtype == torch.int32 and row_exp.shape == m.shape[1:] and row_exp.is_contiguous(), "row_exp",
                f"must be a contiguous int32 [{m.shape[1]}]")
    for n, t in (("out", out), ("lse", lse), ("row_exp", row_exp)):
        if t is not None:
            require(t.device == m.device, n, f"must be on m's device {m.device}, got {t.device}")
    S, R, D = acc.shape
    require(out.shape == (R, D) and out.stride(-1) == 1, "out", f"must be [{R}, {D}] with a contiguous last dim")
    require(lse.shape == (R,) and lse.dtype == torch.float32 and lse.is_contiguous(), "lse",
            f"must be a contiguous float32 [{R}]")
    launch = merge_launch(S, R, D, row_exp is not None, block_d, pdl, _lose_split, _block_s)
    if R == 0 or D == 0:
        lse.fill_(float("-inf")) if D == 0 and R else None
        return
    launch(m, l, acc, out, lse, row_exp if row_exp is not None else lse, *merge_ints(launch, m, acc, out))


def merge_launch(S: int, R: int, D: int, has_e: bool, block_d=None, pdl: bool = False, _lose_split: bool = False,
                 _block_s: int | None = None):
    """The merge's launch for S splits of [R, D] partials (options resolved, grid and constexprs fixed), called
    as ``launch(m, l, acc, out, lse, row_exp_or_lse, *merge_ints(launch, m, acc, out))``; None where there is
    nothing to launch (R or D zero). Ops keep it per argument layout (attnkit._callcache)."""
    bd_opt = MERGE_BLOCK_D.resolve(block_d)
    require(bd_opt is None or bd_opt & (bd_opt - 1) == 0, "merge_block_d", f"must be a power of two, got {bd_opt}")
    if R == 0 or D == 0:
        return None
    block_d = min(bd_opt, triton.next_power_of_2(D)) if bd_opt else merge_block_d_rule(R, D)
    block_s = _block_s or min(triton.next_power_of_2(S), max(1, 8192 // block_d))  # a [BLOCK_S, BLOCK_D] tile: <= 32 KB
    from ._callcache import Launch
    from ._triton.merge_kernel import merge_partials_kernel
    launch = Launch(merge_partials_kernel, (R, triton.cdiv(D, block_d)),
                    dict(BLOCK_D=block_d, BLOCK_S=block_s, HAS_E=has_e, PDL=pdl, **pdl_launch(pdl)))
    # _lose_split merges one split fewer: the deliberately broken variant the power check must catch
    launch.extra = S - 1 if (_lose_split and S > 1) else S, D
    return launch


def merge_ints(launch, m, acc, out) -> tuple:
    """The merge kernel's integer arguments after its six tensors."""
    return (*launch.extra, m.stride(0), m.stride(1), acc.stride(0), acc.stride(1), out.stride(0))


@on_device_of("m")
def merge_partials(m, l, acc, out_dtype=torch.float32, *, _lose_split: bool = False):
    """Returns (out [R, D] in out_dtype, lse [R] fp32). See attnkit.contract for the partials."""
    _validate(m, l, acc, out_dtype)
    S, R, D = acc.shape
    out = torch.empty((R, D), dtype=out_dtype, device=acc.device)
    lse = torch.empty((R,), dtype=torch.float32, device=acc.device)
    merge_partials_into(m, l, acc, out, lse, _lose_split=_lose_split)
    return out, lse
