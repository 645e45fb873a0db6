"""How many instructions would a swap-AB mqa_decode tile cost if each record value were decoded once?

Compiles, on any machine (no GPU), a Gluon sketch of the swap-AB tile loop for fp8 records: 64 slots per tile,
the record bytes loaded and decoded once per value in a blocked layout (128-dim chunks), the bf16 tile written to
shared memory, S^T = KV . Q^T and O^T += KV^T . P^T as warpgroup MMAs reading it there (one warpgroup, 16 heads).
Prints the loop's SASS census beside the Triton kernel's (compile_check's variant), per 64 slots and per warp.
A sketch for counting only: it skips the list logic, masks, RoPE, the sink and the exact decode of scale byte 0,
and it is never launched. Run: ``python benchmarks/experiments/gluon_mqa_decode_once_sm90.py`` (TRITON_INTERPRET
unset).
"""

import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, warpgroup_mma

TARGET = GPUTarget("cuda", 90, 32)


@gluon.jit
def tile_loop_sketch(CACHE, IDX, QT, OUT, n_tiles, stride_rec, sm_scale, H: gl.constexpr, BN: gl.constexpr,
                     DC: gl.constexpr):
    ld: gl.constexpr = gl.BlockedLayout([1, 16], [4, 8], [4, 1], [1, 0])  # [BN, DC] bytes, 16 per thread
    kv_sl: gl.constexpr = gl.NVMMASharedLayout(128, 16, rank=2)
    small_sl: gl.constexpr = gl.NVMMASharedLayout(32, 16, rank=2)
    s_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, H, 16])
    q_ld: gl.constexpr = gl.BlockedLayout([1, 8], [16, 2], [4, 1], [1, 0])  # [512, H]

    dq = gl.arange(0, 512, layout=gl.SliceLayout(1, q_ld))
    hq = gl.arange(0, H, layout=gl.SliceLayout(0, q_ld))
    q_smem = gl.allocate_shared_memory(gl.bfloat16, [512, H], small_sl,
                                       value=gl.load(QT + dq[:, None] * H + hq[None, :]))
    kv_smem = gl.allocate_shared_memory(gl.bfloat16, [BN, 512], kv_sl)
    p_smem = gl.allocate_shared_memory(gl.bfloat16, [BN, H], small_sl)

    m_i = gl.full([H], float("-inf"), gl.float32, layout=gl.SliceLayout(0, s_l))
    l_i = gl.zeros([H], gl.float32, layout=gl.SliceLayout(0, s_l))
    acc = gl.zeros([512, H], gl.float32, layout=s_l)
    rows = gl.arange(0, BN, layout=gl.SliceLayout(1, ld))
    for t in range(n_tiles):
        slot = gl.load(IDX + t * BN + rows).to(gl.int64)
        rec = CACHE + slot * stride_rec
        for c in gl.static_range(512 // DC):
            d = c * DC + gl.arange(0, DC, layout=gl.SliceLayout(0, ld))
            code = gl.load(rec[:, None] + d[None, :])
            sb = gl.load(rec[:, None] + 512 + (d // 32)[None, :]).to(gl.int32)  # the block's scale byte
            x = code.to(gl.float8e4nv, bitcast=True).to(gl.float32) * (sb << 23).to(gl.float32, bitcast=True)
            kv_smem.slice(c * DC, DC, dim=1).store(x.to(gl.bfloat16))
        fence_async_shared()
        gl.thread_barrier()
        s = warpgroup_mma(kv_smem, q_smem, gl.zeros([BN, H], gl.float32, layout=s_l)) * sm_scale
        m_new = gl.maximum(m_i, gl.max(s, 0))
        p = gl.exp2(s - m_new[None, :])
        alpha = gl.exp2(m_i - m_new)
        l_i = l_i * alpha + gl.sum(p, 0)
        acc = acc * alpha[None, :]
        p_smem.store(p.to(gl.bfloat16))
        fence_async_shared()
        gl.thread_barrier()
        acc = warpgroup_mma(kv_smem.permute((1, 0)), p_smem, acc)
        m_i = m_new
        gl.thread_barrier()
    do = gl.arange(0, 512, layout=gl.SliceLayout(1, s_l))
    ho = gl.arange(0, H, layout=gl.SliceLayout(0, s_l))
    gl.store(OUT + do[:, None] * H + ho[None, :], acc / l_i[None, :])


def main():
    sys.path.insert(0, "src")
    from attnkit.testing import compile_check as cc
    sig = {"CACHE": "*u8", "IDX": "*i32", "QT": "*bf16", "OUT": "*fp32", "n_tiles": "i32", "stride_rec": "i32",
           "sm_scale": "fp32", "H": "constexpr", "BN": "constexpr", "DC": "constexpr"}
    k = triton.compile(GluonASTSource(fn=tile_loop_sketch, signature=sig, constexprs={"H": 16, "BN": 64, "DC": 128},
                                      attrs={(0,): [["tt.divisibility", 16]], (5,): [["tt.divisibility", 16]]}),
                       target=TARGET, options=dict(num_warps=4))
    loops = cc.sass_loops(k.asm["cubin"])
    print("gluon sketch, 4 warps, 64 slots per tile:", cc.resource_usage(k.asm["cubin"]), "shared", k.metadata.shared)
    for lp in loops:
        print(f"  loop: {lp['instructions']} instructions per warp = {lp['instructions'] * 4} per 64 slots;",
              ", ".join(f"{o} {n}" for o, n in lp["top"]))
    name = "mqa_swapab H16 block_n32 warps8 nvfp40"
    kt, options = cc.compile_named(name)
    lp = cc.sass_loops(kt.asm["cubin"])[0]
    print(f"triton kernel ({name}): {lp['instructions']} instructions per warp per 32 slots = "
          f"{lp['instructions'] * options['num_warps'] * 2} per 64 slots;",
          ", ".join(f"{o} {n}" for o, n in lp["top"]))

if __name__ == "__main__":
    main()
