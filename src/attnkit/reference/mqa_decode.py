"""fp64 oracle for mqa_decode: small-head MQA decode over packed FP8 / NVFP4 KV records.

Records (byte-exact; ``attnkit.contract`` names the sizes):
- fp8, 528 bytes: bytes 0-511 the 512 latent values as e4m3; bytes 512-527 sixteen UE8M0 scales,
  scale i covering dims 32i..32i+31; value = e4m3 * 2^(byte - 127).
- nvfp4, 288 bytes: bytes 0-255 hold 512 e2m1 values two per byte, the even dim in the low nibble;
  bytes 256-287 thirty-two e4m3 scales, scale i covering dims 16i..16i+15; value = e2m1 * scale.
The last 64 dims are RoPE dims, stored already rotated.

Attention per token t and live head h: q's last 64 dims are rotated at positions[t] (pairs
(x[2i], x[2i+1]), cos/sin from ``cos_sin[pos]`` = 32 cos then 32 sin); s = scale * q_rot . kv over
every valid slot of both lists; the sink adds exp(sink[h] - m) to the denominator (a virtual key of
value zero); o = sum p kv over all 512 dims; then o's last 64 dims are rotated back.
LSE includes the sink: log(sum exp(s) + exp(sink)); with no valid slot the output is 0 and the
LSE is the sink's logit (-inf when the sink is -inf).

Encoders (the writer's rounding rule, which the kernels' writer must reproduce bit for bit):
- fp8: per 32-dim block, the scale is the smallest power of two 2^e with amax / 2^e <= 448
  (e clamped to [-127, 127]; a zero block gets e = -127), values rounded to nearest even e4m3.
- nvfp4: per 16-dim block, the scale is the smallest e4m3 value >= amax / 6 (448 at most; a zero
  block gets scale 0), values x / scale rounded to nearest even e2m1, saturating at +-6.
- A NaN value (the writer's checks refuse one; with validate=False it is stored as NaN): fp8, the e4m3 NaN code
  with its sign, left out of its block's amax; nvfp4, code 0 and its block's scale the e4m3 NaN code 0x7F (e2m1
  has no NaN), so the block decodes as NaN.
"""

from __future__ import annotations

import torch

from ..contract import (E2M1_MAX, E4M3_MAX, FP8_BLOCK, FP8_RECORD_BYTES, MQA_DIM, MQA_ROPE_DIM, NVFP4_BLOCK,
                        NVFP4_RECORD_BYTES, UE8M0_BIAS, EMPTY_SLOT)
from .common import F64, masked_attention

# ---------------------------------------------------------------- scalar codecs (tables from bits)


def _e4m3_table() -> torch.Tensor:
    """fp64 value of each e4m3fn byte (OCP FP8: bias 7, no inf, 0x7F / 0xFF are NaN)."""
    vals = []
    for b in range(256):
        sign = -1.0 if b & 0x80 else 1.0
        e = (b >> 3) & 0xF
        m = b & 0x7
        if e == 0xF and m == 0x7:
            vals.append(float("nan"))
        elif e == 0:
            vals.append(sign * (m / 8.0) * 2.0 ** -6)
        else:
            vals.append(sign * (1.0 + m / 8.0) * 2.0 ** (e - 7))
    return torch.tensor(vals, dtype=F64)


E4M3_VALUES = _e4m3_table()
E2M1_VALUES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                            -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=F64)


def decode_e4m3(b: torch.Tensor) -> torch.Tensor:
    return E4M3_VALUES.to(b.device)[b.long()]


def decode_e2m1(nib: torch.Tensor) -> torch.Tensor:
    return E2M1_VALUES.to(nib.device)[nib.long()]


def decode_ue8m0(b: torch.Tensor) -> torch.Tensor:
    e = b.to(F64) - UE8M0_BIAS
    return torch.where(b == 255, torch.full_like(e, float("nan")), torch.exp2(e))


def _round_to_table(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Index of the nearest finite non-negative table value to |x| (ties to the even code)."""
    pos = table[: len(table) // 2]  # non-negative codes, increasing
    finite = torch.isfinite(pos)
    pos = torch.where(finite, pos, torch.full_like(pos, float("inf")))
    ax = x.abs().unsqueeze(-1)
    dist = (ax - pos.to(x.device)).abs()
    best = dist.min(dim=-1, keepdim=True).values
    ties = dist == best
    codes = torch.arange(len(pos), device=x.device)
    even = ties & (codes % 2 == 0)
    # prefer an even code among the ties, else the lowest tied code
    pick = torch.where(even.any(-1), (even.long() * 1000 - codes).argmax(-1), ties.long().argmax(-1))
    return pick


def encode_e4m3(x: torch.Tensor) -> torch.Tensor:
    """Round to nearest even e4m3fn, saturating at +-448; returns uint8 codes. NaN is the NaN code 0x7F, its
    sign kept."""
    x = x.to(F64)
    nan = torch.isnan(x)
    code = torch.where(nan, 0x7F, _round_to_table(torch.where(nan, 0.0, x).clamp(-E4M3_MAX, E4M3_MAX), E4M3_VALUES))
    sign = (torch.signbit(x)).to(torch.long) << 7
    return (code | sign).to(torch.uint8)


def encode_e2m1(x: torch.Tensor) -> torch.Tensor:
    """Round to nearest even e2m1, saturating at +-6; returns codes 0..15 (uint8)."""
    x = x.to(F64).clamp(-E2M1_MAX, E2M1_MAX)
    code = _round_to_table(x, E2M1_VALUES)
    sign = (torch.signbit(x)).to(torch.long) << 3
    return (code | sign).to(torch.uint8)


# ---------------------------------------------------------------- records


def decode_fp8_record(rec: torch.Tensor) -> torch.Tensor:
    """[..., >=528] uint8 -> [..., 512] fp64."""
    vals = decode_e4m3(rec[..., :MQA_DIM])
    scales = decode_ue8m0(rec[..., MQA_DIM:FP8_RECORD_BYTES]).repeat_interleave(FP8_BLOCK, dim=-1)
    return vals * scales


def decode_nvfp4_record(rec: torch.Tensor) -> torch.Tensor:
    """[..., >=288] uint8 -> [..., 512] fp64."""
    packed = rec[..., : MQA_DIM // 2].long()
    lo = decode_e2m1(packed & 0xF)
    hi = decode_e2m1(packed >> 4)
    vals = torch.stack([lo, hi], dim=-1).flatten(-2)
    scales = decode_e4m3(rec[..., MQA_DIM // 2:NVFP4_RECORD_BYTES]).repeat_interleave(NVFP4_BLOCK, dim=-1)
    return vals * scales


def pow2_block_exponent(amax: torch.Tensor, vmax: float = E4M3_MAX) -> torch.Tensor:
    """The UE8M0 rule: the smallest e (fp64) with amax / 2^e <= vmax, clamped to [-127, 127]; -127 for a
    zero block."""
    amax = amax.to(F64)
    e = torch.ceil(torch.log2(torch.where(amax > 0, amax / vmax, torch.ones_like(amax))))
    # log2 rounding guard: make sure 2^e is the smallest power of two with amax / 2^e <= vmax
    e = torch.where(amax / torch.exp2(e - 1) <= vmax, e - 1, e)
    return torch.where(amax > 0, e, torch.full_like(e, -127.0)).clamp(-127, 127)


def encode_fp8_record(x: torch.Tensor) -> torch.Tensor:
    """[..., 512] float -> [..., 528] uint8 (the writer's rounding rule, see module doc; a NaN value is the NaN
    code and does not count in its block's amax)."""
    xb = x.to(F64).reshape(*x.shape[:-1], MQA_DIM // FP8_BLOCK, FP8_BLOCK)
    e = pow2_block_exponent(torch.where(torch.isnan(xb), 0.0, xb.abs()).amax(-1))
    codes = encode_e4m3(xb / torch.exp2(e).unsqueeze(-1)).reshape(*x.shape[:-1], MQA_DIM)
    return torch.cat([codes, (e + UE8M0_BIAS).to(torch.uint8)], dim=-1)


def _smallest_e4m3_at_least(v: torch.Tensor) -> torch.Tensor:
    pos = E4M3_VALUES[:127].to(v.device)  # finite non-negative codes 0x00..0x7E, increasing
    idx = torch.searchsorted(pos, v.contiguous(), right=False).clamp(max=126)
    return idx.to(torch.uint8)


def encode_nvfp4_record(x: torch.Tensor) -> torch.Tensor:
    """[..., 512] float -> [..., 288] uint8 (the writer's rounding rule, see module doc; a NaN value is code 0
    and its block's scale the e4m3 NaN code 0x7F, so the whole block decodes as NaN: e2m1 has no NaN)."""
    xb = x.to(F64).reshape(*x.shape[:-1], MQA_DIM // NVFP4_BLOCK, NVFP4_BLOCK)
    nan = torch.isnan(xb)
    xb = torch.where(nan, 0.0, xb)
    amax = xb.abs().amax(-1)
    scode = _smallest_e4m3_at_least(amax / E2M1_MAX)
    sval = decode_e4m3(scode)
    q = torch.where(sval.unsqueeze(-1) > 0, xb / torch.where(sval > 0, sval, torch.ones_like(sval)).unsqueeze(-1),
                    torch.zeros_like(xb))
    codes = encode_e2m1(q).reshape(*x.shape[:-1], MQA_DIM // 2, 2).long()
    packed = (codes[..., 0] | (codes[..., 1] << 4)).to(torch.uint8)
    return torch.cat([packed, torch.where(nan.any(-1), 0x7F, scode).to(torch.uint8)], dim=-1)


RECORD_FORMATS = {
    "fp8": (FP8_RECORD_BYTES, encode_fp8_record, decode_fp8_record),
    "nvfp4": (NVFP4_RECORD_BYTES, encode_nvfp4_record, decode_nvfp4_record),
}


# ---------------------------------------------------------------- RoPE


def rope_rotate(x: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor, inverse: bool = False):
    """Rotate the last 64 dims of x [T, ..., 512] at positions [T] (fp64 result)."""
    x = x.to(F64).clone()
    cs = cos_sin.to(F64)[positions.long()]  # [T, 64]
    half = MQA_ROPE_DIM // 2
    cos, sin = cs[:, :half], cs[:, half:]
    if inverse:
        sin = -sin
    shape = [x.shape[0]] + [1] * (x.dim() - 2) + [half]
    cos, sin = cos.view(shape), sin.view(shape)
    r = x[..., MQA_DIM - MQA_ROPE_DIM:]
    a, b = r[..., 0::2], r[..., 1::2]
    ra = a * cos - b * sin
    rb = a * sin + b * cos
    x[..., MQA_DIM - MQA_ROPE_DIM:] = torch.stack([ra, rb], dim=-1).flatten(-2)
    return x


def rope_rotate_fp32(x: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor) -> torch.Tensor:
    """The writer's rotation, in fp32 with each product and the difference / sum rounded separately
    (no fused multiply-add): x'[2i] = x[2i] c - x[2i+1] s, x'[2i+1] = x[2i] s + x[2i+1] c."""
    x = x.to(torch.float32).clone()
    cs = cos_sin.to(torch.float32)[positions.long()]
    half = MQA_ROPE_DIM // 2
    cos, sin = cs[:, :half], cs[:, half:]
    r = x[..., MQA_DIM - MQA_ROPE_DIM:]
    a, b = r[..., 0::2], r[..., 1::2]
    ra = (a * cos) - (b * sin)
    rb = (a * sin) + (b * cos)
    x[..., MQA_DIM - MQA_ROPE_DIM:] = torch.stack([ra, rb], dim=-1).flatten(-2)
    return x


def mqa_write_ref(latent: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor, fmt: str) -> torch.Tensor:
    """bf16 latents [n, 512] -> records [n, record_bytes]: RoPE dims rotated in fp32 (the writer's
    definition, see rope_rotate_fp32), then quantized by the rounding rule of the module doc."""
    size, enc, _ = RECORD_FORMATS[fmt]
    return enc(rope_rotate_fp32(latent, positions, cos_sin))


def gather_records(cache: torch.Tensor, slots: torch.Tensor, fmt: str) -> torch.Tensor:
    """cache [num_pages, page_size, stride] uint8, slots [...] (may hold -1) -> fp64 [..., 512]."""
    size, _, dec = RECORD_FORMATS[fmt]
    flat = cache.reshape(-1, cache.shape[-1])
    safe = slots.long().clamp(min=0)
    return dec(flat[safe][..., :size])


def mqa_decode_ref(q, swa_cache, comp_cache, swa_idx, comp_idx, positions, cos_sin, sink, num_heads,
                   softmax_scale, comp_format="fp8"):
    """q [T, H_pad, 512]; returns (out [T, H, 512] fp64, lse [T, H] fp64)."""
    T = q.shape[0]
    H = int(num_heads)
    qr = rope_rotate(q[:, :H].to(F64), positions, cos_sin)  # [T, H, 512]
    kv_w = gather_records(swa_cache, swa_idx, "fp8")  # [T, W, 512]
    kv_c = gather_records(comp_cache, comp_idx, comp_format)  # [T, K, 512]
    kv = torch.cat([kv_w, kv_c], dim=1)
    valid = torch.cat([swa_idx != EMPTY_SLOT, comp_idx != EMPTY_SLOT], dim=1)  # [T, N]
    s = torch.einsum("thd,tnd->thn", qr, kv) * float(softmax_scale)
    sink_l = sink.to(F64).view(1, H).expand(T, H)
    out, lse = masked_attention(s, valid.unsqueeze(1).expand_as(s), kv.unsqueeze(1), extra_logit=sink_l)
    out = rope_rotate(out, positions, cos_sin, inverse=True)
    return out, lse
