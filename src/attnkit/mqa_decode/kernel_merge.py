"""mqa_decode finishing kernel: the split partials and the attention sink merged, the output's RoPE dims
rotated back, bf16 output and LSE written (and the fp32 output, for the MXFP8 quantizer and the tests).

Computes   per row r = t * H + h: M = max(max_s m[s, r], sink[h]); den = sum_s l[s, r] e^(m[s, r] - M)
           + e^(sink[h] - M); o = sum_s acc[s, r] e^(m[s, r] - M) / den; then the pairs (2i, 2i + 1) of
           dims 448 .. 511 rotated by minus the token's angle; lse = M + log(den).
Contract   m, l [S, T * H], acc [S, T * H, 512] fp32 (head-major rows); sink [H] fp32; positions [T];
           cos_sin [max_pos, 64] fp32; out [T, H, 512] bf16; lse [T * H] fp32. Grid (T * H, 512 / BLOCK_D): a
           program merges BLOCK_D output dims of one row (BLOCK_D >= 64, so the RoPE dims 448 .. 511 lie in a row's
           last program, which also writes the LSE; every program of a row computes the same weights).
Numerics   fp32; one pass over the splits, BLOCK_S at a time in a fixed order (deterministic), rescaled
           online when S > BLOCK_S; bf16 rounding to
           nearest even (also in the interpreter).
Oracle     attnkit.reference.mqa_decode.mqa_decode_ref (its LSE includes the sink).
Early      EARLY: the inputs the attention kernel launched just before does not write (the sink, the token's position,
           its cos / sin) are read first, under PDL between the release of the next grid and the wait, so that their
           round trips overlap the partials' instead of following the merge loop (the same bits).
PERTURB    sink off (SINK_ON=False) and RoPE not undone (ROPE_UNDO=False): the gates' broken variants.
"""

import triton
import triton.language as tl

from .._triton.pdl import pdl_entry, pdl_release, pdl_wait
from .._triton.rounding import to_bf16


@triton.jit
def mqa_merge_kernel(M, L, ACC, SINK, POS, COS_SIN, OUT, LSE, O32, S, H, stride_ms, stride_as,
                     BLOCK_S: tl.constexpr, SINK_ON: tl.constexpr, ROPE_UNDO: tl.constexpr, WRITE_F32: tl.constexpr,
                     PDL: tl.constexpr = False, BLOCK_D: tl.constexpr = 512, EARLY: tl.constexpr = False):
    if not EARLY:
        pdl_entry(PDL)
    else:
        pdl_release(PDL)
    r = tl.program_id(0)
    c0 = tl.program_id(1) * BLOCK_D
    last = c0 + BLOCK_D == 512  # the row's last program: the RoPE dims and the LSE
    t = r // H
    h = r % H
    r64 = r.to(tl.int64)
    offs_s = tl.arange(0, BLOCK_S)
    d = c0 + tl.arange(0, BLOCK_D)
    p = tl.arange(0, 32)  # RoPE pair index: dims 448 + 2p, 449 + 2p
    if EARLY:
        if SINK_ON:
            sk = tl.load(SINK + h)
        if ROPE_UNDO:
            pos = tl.load(POS + t).to(tl.int64)
            c = tl.load(COS_SIN + pos * 64 + p, mask=last & (p >= 0), other=0.0)
            sn = tl.load(COS_SIN + pos * 64 + 32 + p, mask=last & (p >= 0), other=0.0)
        pdl_wait(PDL)
    # one pass, online over chunks of BLOCK_S splits (one chunk when S <= BLOCK_S: every load issued at once)
    big = tl.max(tl.full([BLOCK_S], float("-inf"), dtype=tl.float32), 0)
    if SINK_ON:
        if not EARLY:
            sk = tl.load(SINK + h)
        big = tl.maximum(big, sk)
    total = tl.sum(tl.zeros([BLOCK_S], dtype=tl.float32), 0)
    o = tl.zeros([BLOCK_D], dtype=tl.float32)
    oe = tl.zeros([32], dtype=tl.float32)
    oo = tl.zeros([32], dtype=tl.float32)
    for s0 in range(0, S, BLOCK_S):
        ss = (s0 + offs_s).to(tl.int64)
        sok = ss < S
        ms = tl.load(M + ss * stride_ms + r64, mask=sok, other=float("-inf"))
        ls = tl.load(L + ss * stride_ms + r64, mask=sok, other=0.0)
        base = ACC + ss[:, None] * stride_as + r64 * 512
        a = tl.load(base + d[None, :], mask=sok[:, None], other=0.0)
        ae = tl.load(base + 448 + 2 * p[None, :], mask=sok[:, None] & last, other=0.0)
        ao = tl.load(base + 449 + 2 * p[None, :], mask=sok[:, None] & last, other=0.0)
        new_big = tl.maximum(big, tl.max(ms, 0))
        nb_safe = tl.where(new_big == float("-inf"), 0.0, new_big)
        ob_safe = tl.where(big == float("-inf"), 0.0, big)
        scale_old = tl.where(big == float("-inf"), 0.0, tl.exp(ob_safe - nb_safe))
        w = tl.where(ms == float("-inf"), 0.0, tl.exp(ms - nb_safe))
        total = total * scale_old + tl.sum(ls * w, 0)
        o = o * scale_old + tl.sum(a * w[:, None], 0)
        oe = oe * scale_old + tl.sum(ae * w[:, None], 0)
        oo = oo * scale_old + tl.sum(ao * w[:, None], 0)
        big = new_big
    big_safe = tl.where(big == float("-inf"), 0.0, big)
    if SINK_ON:
        total += tl.where(sk == float("-inf"), 0.0, tl.exp(sk - big_safe))
    nonempty = total != 0  # NaN (a NaN record value) stays NaN: not the empty row
    den = tl.where(nonempty, total, 1.0)
    o = tl.where(nonempty, o / den, 0.0)
    oe = tl.where(nonempty, oe / den, 0.0)
    oo = tl.where(nonempty, oo / den, 0.0)
    if ROPE_UNDO:
        if not EARLY:
            pos = tl.load(POS + t).to(tl.int64)
            c = tl.load(COS_SIN + pos * 64 + p, mask=last & (p >= 0), other=0.0)
            sn = tl.load(COS_SIN + pos * 64 + 32 + p, mask=last & (p >= 0), other=0.0)
        oe, oo = oe * c + oo * sn, oo * c - oe * sn  # rotation by minus the angle
    dst = r64 * 512
    plain = d < 448
    tl.store(OUT + dst + d, to_bf16(o), mask=plain)
    rope = last & (p >= 0)
    tl.store(OUT + dst + 448 + 2 * p, to_bf16(oe), mask=rope)
    tl.store(OUT + dst + 449 + 2 * p, to_bf16(oo), mask=rope)
    if WRITE_F32:
        tl.store(O32 + dst + d, o, mask=plain)
        tl.store(O32 + dst + 448 + 2 * p, oe, mask=rope)
        tl.store(O32 + dst + 449 + 2 * p, oo, mask=rope)
    tl.store(LSE + r64, tl.where(nonempty, big_safe + tl.log(den), float("-inf")), mask=last)
