"""mqa_decode record writer.

Computes   record(slot_i) = quantize(rotate(latent_i, pos_i)) for fp8 (528 bytes) or nvfp4 (288 bytes)
           records; the layouts and the rounding rule are attnkit.reference.mqa_decode's.
Contract   latent [n, 512] bf16; positions [n] int; cos_sin [max_pos, 64] fp32 (32 cos, 32 sin); slots [n]
           int (page * page_size + offset; -1 skips the row); cache [num_pages, page_size, stride] uint8.
Numerics   RoPE in fp32 with every product and sum rounded separately (the launch turns fp fusion off,
           so the bytes match the reference's fp32 rotation); fp8: the block scale is the smallest power
           of two keeping amax within 448, found from the bits (no log2), values scaled exactly and
           rounded to nearest even on the e4m3 grid; nvfp4: the smallest e4m3 scale s with 6 s >= amax,
           values quantized by exact comparisons with the e2m1 decision points times s (ties to even).
           A NaN value (only with validate=False; the checks refuse it): fp8, the e4m3 NaN code with its sign, left
           out of its block's amax; nvfp4, code 0 and its 16-value block's scale the e4m3 NaN code 0x7F, so the record
           decodes as NaN where the latent was (fp8) or across its block (nvfp4), never as a finite value.
Dispatch   attnkit.mqa_decode.interface.mqa_write_records, one program per latent row.
Oracle     attnkit.reference.mqa_decode.mqa_write_ref; tests/test_mqa_writer.py (byte-exact).
"""

import triton
import triton.language as tl

from .._triton.fp8 import e4m3_nan_code, round_e4m3
from .._triton.pdl import pdl_entry, pdl_release, pdl_wait
from .._triton.pow2 import frexp_exp, ldexp
from .._triton.rounding import bf16_to_f32, is_nan
from .._triton.timer import spin_ns


@triton.jit
def _e2m1_code(x, s):
    """e2m1 code (0..15) of x / s by exact comparisons (s > 0, s * t exact for the decision points t)."""
    ax = tl.abs(x)
    # decision points between codes k and k + 1; a tie goes to the even code (>= where k + 1 is even)
    code = (ax > 0.25 * s).to(tl.int32)
    code += (ax >= 0.75 * s).to(tl.int32)
    code += (ax > 1.25 * s).to(tl.int32)
    code += (ax >= 1.75 * s).to(tl.int32)
    code += (ax > 2.5 * s).to(tl.int32)
    code += (ax >= 3.5 * s).to(tl.int32)
    code += (ax > 5.0 * s).to(tl.int32)
    sign = (x.to(tl.int32, bitcast=True) < 0).to(tl.int32) * 8
    return code + sign


@triton.jit
def mqa_write_kernel(LAT, POS, COS_SIN, SLOTS, CACHE, stride_lat, stride_rec,
                     NVFP4: tl.constexpr, ROPE_OFF: tl.constexpr, PDL: tl.constexpr = False,
                     LOADS_FIRST: tl.constexpr = False, RELEASE_EARLY: tl.constexpr = False,
                     DIAG_DELAY_NS: tl.constexpr = 0):
    """One latent row per program. LOADS_FIRST: the slot, the position and the latent loaded together (the row
    always exists), cos / sin as soon as the position arrives, the stores masked by the slot instead of the whole
    row branching on it: two dependent round trips (position, then cos / sin) where there were three (slot, then
    position and latent, then cos / sin). The same bytes. RELEASE_EARLY (with PDL): the next grid released before
    this one waits for the grid before it, not after (the option writer_release_early: a step's attention then
    launches while the previous kernel still runs; its contract in mqa_decode_step). DIAG_DELAY_NS (diagnostics,
    GPU only): every program spins that long on the global timer before its loads and stores, so a reader that does
    not wait for this grid reads the records it has not yet written (the stress check's slow writer)."""
    if RELEASE_EARLY:
        pdl_release(PDL)
        pdl_wait(PDL)
    else:
        pdl_entry(PDL)
    i = tl.program_id(0)
    if DIAG_DELAY_NS > 0:
        i += (spin_ns(DIAG_DELAY_NS) < 0).to(tl.int32)  # 0: the row's loads and stores depend on the spin
    if LOADS_FIRST:
        _write_row(LAT, POS, COS_SIN, CACHE, stride_lat, stride_rec, i, tl.load(SLOTS + i).to(tl.int64), NVFP4,
                   ROPE_OFF, True)
    else:
        slot = tl.load(SLOTS + i).to(tl.int64)
        if slot >= 0:
            _write_row(LAT, POS, COS_SIN, CACHE, stride_lat, stride_rec, i, slot, NVFP4, ROPE_OFF, False)


@triton.jit
def _write_row(LAT, POS, COS_SIN, CACHE, stride_lat, stride_rec, i, slot, NVFP4: tl.constexpr, ROPE_OFF: tl.constexpr,
               MASKED: tl.constexpr):
    """Row i's record at slot (MASKED: slot may be -1, and then nothing is stored and no cos / sin is read)."""
    live = slot >= 0  # (MASKED only)
    pos = tl.load(POS + i).to(tl.int64)
    p = tl.arange(0, 256)  # pair index: dims 2p (a) and 2p + 1 (b)
    base = LAT + i.to(tl.int64) * stride_lat
    a = bf16_to_f32(tl.load(base + 2 * p))
    b = bf16_to_f32(tl.load(base + 2 * p + 1))
    if ROPE_OFF:  # the deliberately wrong variant of the power check
        rope = p < 0
    else:
        rope = p >= 224  # the last 64 dims = pairs 224..255
    j = tl.where(rope, p - 224, 0)
    if MASKED:  # a skipped row's position may be anything (it is not validated): its cos / sin are not read
        rope_ld = rope & live
    else:
        rope_ld = rope
    c = tl.load(COS_SIN + pos * 64 + j, mask=rope_ld, other=1.0)
    s = tl.load(COS_SIN + pos * 64 + 32 + j, mask=rope_ld, other=0.0)
    ac = a * c
    bs = b * s
    as_ = a * s
    bc = b * c
    ra = tl.where(rope, ac - bs, a)
    rb = tl.where(rope, as_ + bc, b)
    if MASKED:
        rec = CACHE + tl.where(live, slot, 0) * stride_rec
        st = live  # the stores' mask
    else:
        rec = CACHE + slot * stride_rec
        st = None
    if NVFP4:
        a2 = tl.reshape(ra, (32, 8))
        b2 = tl.reshape(rb, (32, 8))
        # a NaN value: its code is 0 and its block's scale the e4m3 NaN code, so the block decodes as NaN (e2m1 has
        # no NaN); the block's other codes are those without it
        na = is_nan(a2)
        nb = is_nan(b2)
        a2 = tl.where(na, 0.0, a2)
        b2 = tl.where(nb, 0.0, b2)
        block_nan = tl.max((na | nb).to(tl.int32), 1) > 0  # [32]
        amax = tl.maximum(tl.max(tl.abs(a2), 1), tl.max(tl.abs(b2), 1))  # [32] blocks of 16 dims
        r = tl.minimum(amax / 6.0, 448.0)
        sc = round_e4m3(r)
        step_e = tl.where(sc > 0, tl.maximum(frexp_exp(sc), -6) - 3, -9)  # e4m3 grid step at sc
        step = ldexp(tl.full(sc.shape, 1.0, tl.float32), step_e)
        sc = tl.where((sc * 6.0 < amax) & (sc < 448.0), sc + step, sc)  # smallest grid value with 6 s >= amax
        sc_ok = sc > 0
        ssafe = tl.where(sc_ok, sc, 1.0)
        ca = tl.where(sc_ok[:, None], _e2m1_code(a2, ssafe[:, None]), 0)
        cb = tl.where(sc_ok[:, None], _e2m1_code(b2, ssafe[:, None]), 0)
        byte = tl.reshape(ca | (cb << 4), (256,))
        tl.store(rec + p, byte.to(tl.uint8), mask=st)
        sbyte = tl.where(block_nan, 0x7F, sc.to(tl.float8e4nv).to(tl.uint8, bitcast=True))
        tl.store(rec + 256 + tl.arange(0, 32), sbyte.to(tl.uint8), mask=st)
    else:
        qa, qb, e = quant_fp8_pairs(ra, rb)
        tl.store(rec + 2 * p, qa, mask=st)
        tl.store(rec + 2 * p + 1, qb, mask=st)
        tl.store(rec + 512 + tl.arange(0, 16), (e + 127).to(tl.uint8), mask=st)


@triton.jit
def quant_fp8_pairs(ra, rb):
    """512 values given as even dims ra [256] and odd dims rb [256] (fp32) -> e4m3 codes of both [256]
    (uint8) and the 16 block exponents e (int32): the scale of a 32-dim block is the smallest power of two
    2^e keeping its amax within 448 (e in [-127, 127], -127 for a zero block), values rounded to nearest
    even on the e4m3 grid. A NaN value is the e4m3 NaN code (0x7F, its sign kept) and does not count in its
    block's amax, so the block's other values keep their codes (on a GPU a min / max drops a NaN operand: it
    would otherwise come out as a finite code, silently)."""
    a2 = tl.reshape(ra, (16, 16))
    b2 = tl.reshape(rb, (16, 16))
    na = is_nan(a2)
    nb = is_nan(b2)
    amax = tl.maximum(tl.max(tl.where(na, 0.0, tl.abs(a2)), 1),
                      tl.max(tl.where(nb, 0.0, tl.abs(b2)), 1))  # [16] blocks of 32 dims, NaN left out
    ea = frexp_exp(amax)
    mant = ldexp(amax, -ea)  # in [1, 2)
    e = tl.where(mant <= 1.75, ea - 8, ea - 7)  # smallest 2^e with amax <= 448 * 2^e (448 = 1.75 * 2^8)
    e = tl.where(amax > 0, e, -127)
    e = tl.minimum(tl.maximum(e, -127), 127)
    va = tl.minimum(tl.maximum(ldexp(a2, -e[:, None]), -448.0), 448.0)
    vb = tl.minimum(tl.maximum(ldexp(b2, -e[:, None]), -448.0), 448.0)
    qa = round_e4m3(va).to(tl.float8e4nv).to(tl.uint8, bitcast=True)
    qb = round_e4m3(vb).to(tl.float8e4nv).to(tl.uint8, bitcast=True)
    qa = tl.reshape(tl.where(na, e4m3_nan_code(a2), qa), (256,))
    qb = tl.reshape(tl.where(nb, e4m3_nan_code(b2), qb), (256,))
    return qa, qb, e
