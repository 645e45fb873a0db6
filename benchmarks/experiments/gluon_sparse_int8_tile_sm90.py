"""How many instructions would the sparse_int8 prefill tile cost with explicit layouts?

Compiles, on any machine (no GPU), a Gluon sketch of the swap-AB candidate loop at D = 256 (one warpgroup, 64
candidates per tile, 16 head rows): the gathered int8 key rows written to shared memory as they are and multiplied
there by warpgroup integer MMAs against the query's four int8 digits (kept in shared memory), the softmax down the
columns, the value rows converted to bf16 once into shared memory and multiplied against the split probability
tile. Prints its loop's SASS census beside the Triton rule kernel's (compile_check's variant), per 64 candidates.
A sketch for counting only: no masks beyond the index, no budget fallback, no exponent scaling, never launched.
Run: ``python benchmarks/experiments/gluon_sparse_int8_tile_sm90.py`` (TRITON_INTERPRET unset).
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
def tile_loop_sketch(KC, VC, IDX, QD, OUT, n_tiles, stride_kc, R: gl.constexpr, BN: gl.constexpr,
                     D: gl.constexpr):
    ld: gl.constexpr = gl.BlockedLayout([1, 16], [2, 16], [4, 1], [1, 0])  # [BN, D] int8 rows, 16 bytes a thread
    k_sl: gl.constexpr = gl.NVMMASharedLayout(128, 8, rank=2)
    v_sl: gl.constexpr = gl.NVMMASharedLayout(128, 16, rank=2)
    q_sl: gl.constexpr = gl.NVMMASharedLayout(128, 8, rank=2)
    p_sl: gl.constexpr = gl.NVMMASharedLayout(32, 16, rank=2)
    s_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, R, 32])
    o_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, R, 16])
    q_ld: gl.constexpr = gl.BlockedLayout([1, 16], [2, 16], [4, 1], [1, 0])  # [R, D] int8 digits

    hq = gl.arange(0, R, layout=gl.SliceLayout(1, q_ld))
    dq = gl.arange(0, D, layout=gl.SliceLayout(0, q_ld))
    q0 = gl.allocate_shared_memory(gl.int8, [R, D], q_sl, value=gl.load(QD + hq[:, None] * D + dq[None, :]))
    q1 = gl.allocate_shared_memory(gl.int8, [R, D], q_sl, value=gl.load(QD + R * D + hq[:, None] * D + dq[None, :]))
    q2 = gl.allocate_shared_memory(gl.int8, [R, D], q_sl, value=gl.load(QD + 2 * R * D + hq[:, None] * D + dq[None, :]))
    q3 = gl.allocate_shared_memory(gl.int8, [R, D], q_sl, value=gl.load(QD + 3 * R * D + hq[:, None] * D + dq[None, :]))
    k_smem = gl.allocate_shared_memory(gl.int8, [BN, D], k_sl)
    v_smem = gl.allocate_shared_memory(gl.bfloat16, [BN, D], v_sl)
    p_smem = gl.allocate_shared_memory(gl.bfloat16, [BN, R], p_sl)
    p2_smem = gl.allocate_shared_memory(gl.bfloat16, [BN, R], p_sl)

    m_i = gl.full([R], float("-inf"), gl.float32, layout=gl.SliceLayout(0, s_l))
    l_i = gl.zeros([R], gl.float32, layout=gl.SliceLayout(0, s_l))
    acc = gl.zeros([D, R], gl.float32, layout=o_l)
    rows = gl.arange(0, BN, layout=gl.SliceLayout(1, ld))
    d = gl.arange(0, D, layout=gl.SliceLayout(0, ld))
    for t in range(n_tiles):
        idx = gl.load(IDX + t * BN + rows)
        ok = idx >= 0
        off = gl.where(ok, idx, 0).to(gl.int64) * stride_kc
        k = gl.load(KC + off[:, None] + d[None, :], mask=ok[:, None], other=0)
        v = gl.load(VC + off[:, None] + d[None, :], mask=ok[:, None], other=0)
        k_smem.store(k)
        v_smem.store(v.to(gl.float32).to(gl.bfloat16))
        fence_async_shared()
        gl.thread_barrier()
        zero = gl.zeros([BN, R], gl.int32, layout=s_l)
        s = warpgroup_mma(k_smem, q0.permute((1, 0)), zero).to(gl.float32) * 0.015625
        s += warpgroup_mma(k_smem, q1.permute((1, 0)), zero).to(gl.float32) * 0.0001220703125
        s += warpgroup_mma(k_smem, q2.permute((1, 0)), zero).to(gl.float32) * 9.5367431640625e-07
        s += warpgroup_mma(k_smem, q3.permute((1, 0)), zero).to(gl.float32) * 7.450580596923828e-09
        m_new = gl.maximum(m_i, gl.max(s, 0))
        p = gl.exp2(s - m_new[None, :])
        alpha = gl.exp2(m_i - m_new)
        l_i = l_i * alpha + gl.sum(p, 0)
        acc = acc * gl.convert_layout(alpha, gl.SliceLayout(0, o_l))[None, :]
        p_hi = p.to(gl.bfloat16)
        p_smem.store(p_hi)
        p2_smem.store((p - p_hi.to(gl.float32)).to(gl.bfloat16))
        fence_async_shared()
        gl.thread_barrier()
        acc = warpgroup_mma(v_smem.permute((1, 0)), p_smem, acc)
        acc = warpgroup_mma(v_smem.permute((1, 0)), p2_smem, acc)
        m_i = m_new
        gl.thread_barrier()
    do = gl.arange(0, D, layout=gl.SliceLayout(1, o_l))
    ho = gl.arange(0, R, layout=gl.SliceLayout(0, o_l))
    gl.store(OUT + do[:, None] * R + ho[None, :], acc / gl.convert_layout(l_i, gl.SliceLayout(0, o_l))[None, :])


def main():
    sys.path.insert(0, "src")
    from attnkit.testing import compile_check as cc
    sig = {"KC": "*i8", "VC": "*i8", "IDX": "*i32", "QD": "*i8", "OUT": "*fp32", "n_tiles": "i32", "stride_kc": "i32",
           "R": "constexpr", "BN": "constexpr", "D": "constexpr"}
    k = triton.compile(GluonASTSource(fn=tile_loop_sketch, signature=sig, constexprs={"R": 16, "BN": 64, "D": 256},
                                      attrs={(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]],
                                             (6,): [["tt.divisibility", 16]]}),
                       target=TARGET, options=dict(num_warps=4))
    print("gluon sketch, 4 warps, 64 candidates per tile:", cc.resource_usage(k.asm["cubin"]), "shared",
          k.metadata.shared)
    for lp in cc.sass_loops(k.asm["cubin"]):
        print(f"  loop: {lp['instructions']} instructions per warp = {lp['instructions'] * 4} per 64 candidates;",
              ", ".join(f"{o} {n}" for o, n in lp["top"]))
    name = "sparse_int8 D256 direct1 i8 bn64 w4 s2 swap_ab qk_int8"
    kt, options = cc.compile_named(name)
    lp = cc.sass_loops(kt.asm["cubin"])[0]
    print(f"triton rule kernel ({name}), integer-score loop: {lp['instructions']} instructions per warp = "
          f"{lp['instructions'] * options['num_warps']} per 64 candidates;",
          ", ".join(f"{o} {n}" for o, n in lp["top"]))

if __name__ == "__main__":
    main()
