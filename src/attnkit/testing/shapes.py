"""One registry of named shape families, shared by tests, gates and benchmarks.

A *shape family* is a named group of cases (``relbias-decode``, ``sparse_int8-edge`` ...). Each case
names the tiers it runs in: ``smoke`` (small enough for Triton's interpreter on a CPU) and ``full``
(the GPU). Test ids read like ``relbias-decode-b3-k203``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SMOKE = "smoke"
FULL = "full"
BENCH = "bench"  # the shapes `attnkit bench` times; every one of them is also gated at FULL
TIERS = (SMOKE, FULL, BENCH)


@dataclass(frozen=True)
class Case:
    family: str  # relbias | sparse_int8 | mqa_decode | merge
    group: str  # shape family name, e.g. "relbias-decode"
    name: str  # unique within the group
    params: dict = field(default_factory=dict, hash=False, compare=False)
    tiers: tuple = (SMOKE, FULL)

    @property
    def id(self) -> str:
        return f"{self.group}-{self.name}"

    def __getitem__(self, k: str) -> Any:
        return self.params[k]

    def get(self, k: str, default=None):
        return self.params.get(k, default)


_REGISTRY: dict[str, list[Case]] = {}


def register(case: Case) -> Case:
    group = _REGISTRY.setdefault(case.group, [])
    if any(c.name == case.name for c in group):
        raise ValueError(f"duplicate case {case.id}")
    group.append(case)
    return case


def groups(family: str | None = None) -> list[str]:
    return [g for g, cs in _REGISTRY.items() if family is None or cs[0].family == family]


def cases(family: str | None = None, tier: str = SMOKE, group: str | None = None) -> list[Case]:
    out = []
    for g, cs in _REGISTRY.items():
        if group is not None and g != group:
            continue
        out.extend(c for c in cs if (family is None or c.family == family) and tier in c.tiers)
    return out


def get(case_id: str) -> Case:
    for cs in _REGISTRY.values():
        for c in cs:
            if c.id == case_id:
                return c
    raise KeyError(case_id)


# ------------------------------------------------------------------------------------------- relbias
# params: seqlens_q, seqlens_k (lists), Hq, Hkv, D, E, window, beyond, dtype, kv ("bf16"|"fp8"),
# block_size (None = contiguous varlen, else paged with a shuffled block table).


def _rb(group, name, sq, sk, Hq=4, Hkv=2, D=64, E=64, window=None, beyond="zero", kv="bf16", block_size=None,
        tiers=(SMOKE, FULL), dtype="bf16"):
    register(Case("relbias", group, name, dict(seqlens_q=list(sq), seqlens_k=list(sk), Hq=Hq, Hkv=Hkv, D=D, E=E,
                                               window=window, beyond=beyond, kv=kv, block_size=block_size,
                                               dtype=dtype), tiers))


# full prefill (seqlen_q == seqlen_k)
_rb("relbias-prefill", "s1", [1], [1])
_rb("relbias-prefill", "s113", [113], [113], E=48)
_rb("relbias-prefill", "s203-w64", [203], [203], window=64, E=96, tiers=(FULL,))
_rb("relbias-prefill", "s1023", [1023], [1023], Hq=8, Hkv=2, D=128, E=512, tiers=(FULL,))
_rb("relbias-prefill", "s2048-w1024", [2048], [2048], Hq=16, Hkv=2, D=128, E=8192, window=1024, tiers=(FULL,))
# chunked prefill (seqlen_q < seqlen_k)
_rb("relbias-chunked", "q37-k203", [37], [203], E=96)
_rb("relbias-chunked", "q113-k1023-w256", [113], [1023], Hq=8, Hkv=2, D=128, E=300, window=256, tiers=(FULL,))
# decode (1 token) and speculative verify (2..32 tokens)
_rb("relbias-decode", "b3-k203", [1, 1, 1], [203, 1, 77], E=100)
_rb("relbias-decode", "b2-clamp-window-tail", [1, 3], [150, 90], E=8, window=64, beyond="clamp")
_rb("relbias-decode", "b2-e1-gqa4", [2, 1], [70, 33], Hq=8, Hkv=2, E=1)
_rb("relbias-decode", "b4-k4096", [1] * 4, [4096, 1023, 113, 2048], Hq=32, Hkv=4, D=128, E=8192, tiers=(FULL,))
_rb("relbias-verify", "t4-k203", [4], [203], E=150, window=100)
_rb("relbias-verify", "t16-k1023", [16, 2], [1023, 300], Hq=16, Hkv=2, D=128, E=512, tiers=(FULL,))
# more tokens x heads than one decode tile's 128 rows: several token blocks per KV head
_rb("relbias-verify", "t24-g16-blocks-w64", [24, 5], [300, 41], Hq=16, Hkv=1, E=100, window=64)
_rb("relbias-verify", "t32-g8-blocks-clamp", [32, 1], [500, 40], Hq=16, Hkv=2, E=40, beyond="clamp")
_rb("relbias-verify", "t32-k4096-paged", [32, 17], [4096, 2000], Hq=32, Hkv=4, D=128, E=1024, block_size=64,
    tiers=(FULL,))
# varlen batches with mixed and off-grid lengths
_rb("relbias-varlen", "mixed3", [1, 37, 20], [1, 113, 20], E=64)
_rb("relbias-varlen", "mixed5", [113, 1, 203, 64, 1023], [113, 300, 203, 128, 1023], Hq=8, Hkv=1, D=128, E=700,
    tiers=(FULL,))
# paged caches (shuffled block tables), several block sizes, a single page
_rb("relbias-paged", "bs16-decode", [1, 1], [203, 37], block_size=16, E=128)
_rb("relbias-paged", "bs16-one-page", [3], [9], block_size=16, E=8)
_rb("relbias-paged", "bs32-window", [1, 4], [700, 300], block_size=32, window=100, E=256)
_rb("relbias-paged", "bs64-chunked", [20, 1], [300, 64], block_size=64, Hq=8, Hkv=2, D=128, E=256, tiers=(FULL,))
_rb("relbias-paged", "bs256-decode", [1] * 3, [1023, 513, 1], block_size=256, Hq=8, Hkv=2, D=128, E=4096,
    tiers=(FULL,))
# windows: W=1, W longer than the sequence; extents: E=1, E shorter than W, E longer than the sequence
_rb("relbias-window", "w1", [37], [37], window=1, E=16)
_rb("relbias-window", "w-longer-than-seq", [20], [50], window=1000, E=64)
_rb("relbias-extent", "e1", [30], [30], E=1)
_rb("relbias-extent", "e-lt-window-clamp", [40], [90], E=8, window=32, beyond="clamp")
_rb("relbias-extent", "e-gt-seq", [25], [25], E=4096)
# GQA ratios 1..16 and each head dim
_rb("relbias-gqa", "g1", [9], [40], Hq=2, Hkv=2)
_rb("relbias-gqa", "g3-decode", [1, 2], [150, 40], Hq=6, Hkv=2, E=70)
_rb("relbias-gqa", "g16", [9], [40], Hq=16, Hkv=1, D=64, tiers=(FULL,))
_rb("relbias-gqa", "g8-d256", [5], [70], Hq=8, Hkv=1, D=256, tiers=(FULL,))
_rb("relbias-headdim", "d128", [17], [33], D=128)
_rb("relbias-headdim", "d256", [9], [33], Hq=2, Hkv=1, D=256, tiers=(FULL,))
# fp8 KV
_rb("relbias-fp8", "decode-b2", [1, 1], [70, 200], kv="fp8", E=64)
_rb("relbias-fp8", "verify-window-clamp", [3, 1], [90, 150], kv="fp8", E=50, window=40, beyond="clamp")
_rb("relbias-fp8", "decode-fp16-gqa16", [1, 1], [300, 129], Hq=16, Hkv=1, D=128, E=200, kv="fp8", dtype="fp16",
    tiers=(FULL,))
_rb("relbias-fp8", "verify-t32-g8-blocks-clamp", [32, 2], [700, 40], Hq=16, Hkv=2, D=128, E=100, kv="fp8",
    beyond="clamp", tiers=(FULL,))
_rb("relbias-fp8", "paged-bs16-w1", [1, 2, 1], [77, 300, 16], Hq=8, Hkv=1, E=64, window=1, kv="fp8", block_size=16,
    tiers=(FULL,))
_rb("relbias-fp8", "decode-k4096-e1", [1, 1], [4096, 2050], Hq=8, Hkv=2, D=128, E=1, kv="fp8", tiers=(FULL,))
_rb("relbias-fp8", "paged-verify", [8, 1], [1023, 257], kv="fp8", block_size=64, Hq=16, Hkv=2, D=128, E=8192,
    tiers=(FULL,))
# deep decode: 64K keys, only the newest inside the extent
_rb("relbias-deep", "decode-64k", [1, 1], [65536, 65000], Hq=16, Hkv=2, D=128, E=8192, tiers=(FULL,))
_rb("relbias-deep", "fp8-decode-b1-64k", [1], [65536], Hq=64, Hkv=8, D=128, E=8192, kv="fp8", tiers=(FULL,))

# model shapes of the performance targets (Hq=64, Hkv=8, D=128, E=8192, beyond="zero", bf16):
# benchmarked, and gated at FULL so the parity gate covers the very shapes that are timed.
_M = dict(Hq=64, Hkv=8, D=128, E=8192, tiers=(FULL, BENCH))
_rb("relbias-model", "prefill-8k-global", [8192], [8192], **_M)
_rb("relbias-model", "prefill-8k-w1024", [8192], [8192], window=1024, **_M)
_rb("relbias-model", "decode-b1-64k", [1], [65536], **_M)
_rb("relbias-model", "decode-b32-64k", [1] * 32, [65536] * 32, **_M)
_rb("relbias-model", "decode-b32-8k", [1] * 32, [8192] * 32, **_M)
_rb("relbias-model", "verify32-64k", [32], [65536], **_M)
_rb("relbias-model", "verify32-8k", [32], [8192], **_M)
_rb("relbias-model", "varlen-mixed", [4096, 2048, 1023, 1024, 513, 203, 113, 1],
    [4096, 2048, 1023, 1024, 513, 203, 113, 1], **_M)
_rb("relbias-model", "paged-decode-b32-8k-bs16", [1] * 32, [8192] * 32, block_size=16, **_M)
_rb("relbias-model", "paged-decode-b32-8k-bs64", [1] * 32, [8192] * 32, block_size=64, **_M)
_rb("relbias-model", "fp8-decode-b32-8k", [1] * 32, [8192] * 32, kv="fp8", **_M)

# shapes the rules were not timed on (D 64 and 256 prefill, 33-64 and 128-token chunks): the `relbias-tune` sweep
# times them, and the full tier gates them like the benchmarked ones
_T = dict(Hkv=8, E=8192, tiers=(FULL,))
_rb("relbias-tune", "prefill-8k-d64", [8192], [8192], Hq=64, D=64, **_T)
_rb("relbias-tune", "prefill-4k-d256", [4096], [4096], Hq=32, D=256, **_T)
_rb("relbias-tune", "chunk48-b8-8k", [48] * 8, [8192] * 8, Hq=64, D=128, **_T)
_rb("relbias-tune", "chunk128-b8-8k", [128] * 8, [8192] * 8, Hq=64, D=128, **_T)
# verify shapes beside the model's (its b1 x 32 tokens x 8K): the verify one-wave rule (relbias.config)
_rb("relbias-tune", "verify32-b4-8k", [32] * 4, [8192] * 4, Hq=64, D=128, **_T)
_rb("relbias-tune", "verify16-16k", [16], [16384], Hq=64, D=128, **_T)
_rb("relbias-tune", "verify32-b2-4k", [32] * 2, [4096] * 2, Hq=64, D=128, **_T)

# ----------------------------------------------------------------------------------------- sparse_int8
# params: T, Hq, Hkv, D, C, N, invalid (fraction of -1 entries), layout ("shared"|"per_head"),
# strided (cache is a slice of a larger cache), dup (allow duplicates), splits (forced split count)


def _si(group, name, T, Hq, Hkv, D, C, N, invalid=0.1, layout="shared", strided=False, splits=None,
        tiers=(SMOKE, FULL), **extra):
    register(Case("sparse_int8", group, name, dict(T=T, Hq=Hq, Hkv=Hkv, D=D, C=C, N=N, invalid=invalid, layout=layout,
                                                   strided=strided, splits=splits, **extra), tiers))


_si("sparse_int8-decode", "r1-g4-n65", 1, 4, 1, 64, 300, 65)
_si("sparse_int8-decode", "r3-g6-n509-perhead", 3, 12, 2, 64, 1000, 509, layout="per_head")
_si("sparse_int8-decode", "r8-g12-n2112", 8, 24, 2, 128, 4096, 2112, tiers=(FULL,))
_si("sparse_int8-decode", "r16-g16-n8192-strided", 16, 16, 1, 256, 16384, 8192, strided=True, tiers=(FULL,))
_si("sparse_int8-prefill", "r128-g1-n64", 128, 2, 2, 64, 500, 64, tiers=(FULL,))
_si("sparse_int8-prefill", "r20-g4-n63", 20, 4, 1, 64, 200, 63)
_si("sparse_int8-prefill", "r140-g4-n20-direct", 140, 4, 1, 64, 100, 20)  # rows enough for the direct path
_si("sparse_int8-prefill", "r128-g12-n2048", 128, 24, 2, 256, 8192, 2048, tiers=(FULL,))
_si("sparse_int8-edge", "n0", 3, 4, 1, 64, 50, 0)
_si("sparse_int8-edge", "all-invalid-rows", 4, 4, 2, 64, 50, 17, invalid=1.0)
_si("sparse_int8-edge", "n1-strided", 2, 4, 1, 64, 50, 1, strided=True)
_si("sparse_int8-edge", "value-scale-2p20", 2, 4, 1, 64, 80, 65, vs_exp=20)
_si("sparse_int8-edge", "value-scale-2m135-negative-key-scales", 3, 4, 2, 64, 80, 70, vs_exp=-135, ks_sign=True)
_si("sparse_int8-edge", "bf16-cache", 3, 8, 2, 64, 120, 70, cache_dtype="bf16")
_si("sparse_int8-edge", "big-cache", 2, 2, 1, 64, (1 << 20) + 3, 64, tiers=(FULL,))
# ONNX Runtime's model shapes (24 query heads, 2 KV heads, D = 256, 2048 candidates, scale 1/16, queries of
# standard deviation 1.4, int8 codes of standard deviation 40, scales up to 0.285): benchmarked and gated.
_MS = dict(scale=1 / 16, model=True, invalid=0.0, tiers=(FULL, BENCH))
for _t in (1, 2, 3, 4, 8, 16):  # 3 and 16: the split rule's untimed row counts (decode is 1 to 16 rows)
    _si("sparse_int8-model", f"decode-r{_t}-c32k", _t, 24, 2, 256, 32768, 2048, **_MS)
_si("sparse_int8-model", "decode-r1-c8k", 1, 24, 2, 256, 8192, 2048, **_MS)
for _t in (128, 2048, 8192):
    _si("sparse_int8-model", f"prefill-r{_t}-c8k", _t, 24, 2, 256, 8192, 2048, **_MS)
# adversarial inputs (the cliff check): queries 8x larger; value scales 2^16 .. 2^60 with wide logit spreads
_si("sparse_int8-model", "decode-r8-q8x", 8, 24, 2, 256, 32768, 2048, q_mult=8.0, **_MS)
_si("sparse_int8-model", "prefill-r2048-q8x", 2048, 24, 2, 256, 8192, 2048, q_mult=8.0, **_MS)
_si("sparse_int8-model", "decode-r8-vscale2p60", 8, 24, 2, 256, 32768, 2048, q_mult=2.0, vs_exp=60, **_MS)
_si("sparse_int8-model", "prefill-r2048-vscale2p16", 2048, 24, 2, 256, 8192, 2048, q_mult=2.0, vs_exp=16, **_MS)

# the specified gate matrix: heads per KV head x candidates x rows, with invalid entries, both index layouts, a
# strided cache and the three head dims in rotation (full tier; forced split counts come from the
# sparse_int8/triton_split1 gate, which runs every case with one tile per split)
_MX_N = (0, 1, 63, 64, 65, 509, 2048, 2112, 8192)
_i = 0
for _g in (1, 4, 6, 12, 16):
    for _n in _MX_N:
        for _t in (1, 3, 8, 128):
            _hkv = 2 if _i % 3 == 1 else 1
            _si("sparse_int8-matrix", f"g{_g}-n{_n}-r{_t}", _t, _g * _hkv, _hkv, (64, 128, 256)[_i % 3],
                max(64, 2 * _n + 7), _n, invalid=(0.1, 0.4, 0.0)[_i % 3],
                layout="per_head" if _i % 4 == 1 else "shared", strided=_i % 5 == 2, tiers=(FULL,))
            _i += 1
# two of them in CI's smoke tier (small enough for the interpreter)
_si("sparse_int8-matrix", "smoke-g6-n65-r3", 3, 12, 2, 64, 200, 65, invalid=0.3, layout="per_head")
_si("sparse_int8-matrix", "smoke-g16-n63-r1-strided", 1, 16, 1, 64, 150, 63, strided=True)

# ------------------------------------------------------------------------------------------ mqa_decode
# params: T, H, H_pad, fmt ("fp8"|"nvfp4"), page_size, W, K, partial (fraction of -1 slots)


def _mq(group, name, T, H, H_pad, fmt, page_size, W=128, K=512, partial=0.0, tiers=(SMOKE, FULL)):
    register(Case("mqa_decode", group, name, dict(T=T, H=H, H_pad=H_pad, fmt=fmt, page_size=page_size, W=W, K=K,
                                                  partial=partial), tiers))


_mq("mqa_decode-small", "t1-h16-fp8", 1, 16, 64, "fp8", 64, W=16, K=32, partial=0.25)
_mq("mqa_decode-small", "t2-h32-nvfp4", 2, 32, 64, "nvfp4", 64, W=16, K=48)
_mq("mqa_decode-model", "t1-h16-fp8", 1, 16, 64, "fp8", 64, tiers=(FULL,))
_mq("mqa_decode-model", "t5-h32-nvfp4-partial", 5, 32, 64, "nvfp4", 128, partial=0.3, tiers=(FULL,))
_mq("mqa_decode-model", "t16-h64-fp8", 16, 64, 64, "fp8", 128, tiers=(FULL,))

# the benchmarked decode steps (W = 128, K = 512): every H x T x format, gated at the full tier too
for _fmt in ("fp8", "nvfp4"):
    for _h in (16, 32, 64):
        for _t in (1, 2, 4, 8, 16, 32, 64):
            _mq("mqa_decode-step", f"h{_h}-t{_t}-{_fmt}", _t, _h, 64, _fmt, 64, tiers=(FULL, BENCH))
    for _h in (16, 32):  # token counts between the benchmarked ones, where the swap-AB tile rules change (sweeps)
        for _t in (10, 12, 20, 22, 24, 26):
            _mq("mqa_decode-step", f"h{_h}-t{_t}-{_fmt}", _t, _h, 64, _fmt, 64, tiers=(FULL,))

# the specified gate matrix: H x T x format x page size x partial / full lists, H_pad 64 and 128 (full tier)
for _fmt in ("fp8", "nvfp4"):
    for _h in (16, 32, 64):
        for _t in (1, 2, 5, 16):
            for _ps in (64, 128):
                for _part in (0.0, 0.3):
                    _mq("mqa_decode-matrix", f"h{_h}-t{_t}-{_fmt}-p{_ps}-{'partial' if _part else 'full'}", _t, _h,
                        128 if _ps == 128 else 64, _fmt, _ps, partial=_part, tiers=(FULL,))

# -------------------------------------------------------------------------------- merge (shared split-K)
# params: S (splits), rows, D, empty (fraction of empty splits), all_empty_rows


def _mg(name, S, rows, D, empty=0.0, all_empty_rows=0, tiers=(SMOKE, FULL)):
    register(Case("merge", "merge-splitk", name, dict(S=S, rows=rows, D=D, empty=empty, all_empty_rows=all_empty_rows),
                  tiers))


_mg("s1-r3-d64", 1, 3, 64)
_mg("s4-r17-d128-empty", 4, 17, 128, empty=0.3, all_empty_rows=2)
_mg("s7-r5-d256", 7, 5, 256, empty=0.2)
_mg("s32-r512-d512", 32, 512, 512, empty=0.1, all_empty_rows=3, tiers=(FULL,))
