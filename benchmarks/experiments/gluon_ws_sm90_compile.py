"""Does this Triton compile warp-specialized kernels for sm_90, with plain Triton and with Gluon?

Compiles, on any machine (no GPU: Triton lowers to PTX and its bundled ptxas assembles a cubin), an attention-like
loop with ``tl.range(warp_specialize=True)`` and a two-partition Gluon kernel (``gl.warp_specialize``), and prints
whether each carries a ``ttg.warp_specialize`` region in its TTGIR and ``setmaxnreg`` in its PTX.
Run: ``python benchmarks/experiments/gluon_ws_sm90_compile.py`` (TRITON_INTERPRET unset).
"""

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource

TARGET = GPUTarget("cuda", 90, 32)


@triton.jit
def loop_kernel(Q, K, V, OUT, n_rows, stride, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                WS: tl.constexpr):
    kd = tl.make_tensor_descriptor(K, shape=[n_rows, D], strides=[stride, 1], block_shape=[BN, D])
    vd = tl.make_tensor_descriptor(V, shape=[n_rows, D], strides=[stride, 1], block_shape=[BN, D])
    q = tl.load(Q + tl.arange(0, BM)[:, None] * D + tl.arange(0, D)[None, :])
    m_i = tl.full([BM], -float("inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    for n0 in tl.range(0, n_rows, BN, warp_specialize=WS):
        s = tl.dot(q, kd.load([n0, 0]).T)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(tl.bfloat16), vd.load([n0, 0]), acc * alpha[:, None])
        m_i = m_new
    tl.store(OUT + tl.arange(0, BM)[:, None] * D + tl.arange(0, D)[None, :], acc / l_i[:, None])


@gluon.jit
def _worker(X, BLOCK: gl.constexpr):
    offs = gl.arange(0, BLOCK, layout=gl.BlockedLayout([1], [32], [1], [0]))
    gl.store(X + offs, offs.to(gl.float32))


@gluon.jit
def _default(Y, BLOCK: gl.constexpr):
    offs = gl.arange(0, BLOCK, layout=gl.BlockedLayout([1], [32], [4], [0]))
    gl.store(Y + offs, offs.to(gl.float32) * 2)


@gluon.jit
def ws_kernel(X, Y, BLOCK: gl.constexpr):
    gl.warp_specialize([(_default, (Y, BLOCK)), (_worker, (X, BLOCK))], [1], [24])


def main():
    sig = {"Q": "*bf16", "K": "*bf16", "V": "*bf16", "OUT": "*fp32", "n_rows": "i32", "stride": "i32",
           "D": "constexpr", "BM": "constexpr", "BN": "constexpr", "WS": "constexpr"}
    for ws in (False, True):
        k = triton.compile(ASTSource(fn=loop_kernel, signature=sig, constexprs=dict(D=128, BM=128, BN=64, WS=ws)),
                           target=TARGET, options=dict(num_warps=8, num_stages=2))
        print(f"triton {triton.__version__} tl.range(warp_specialize={ws}): ttg.warp_specialize in TTGIR: "
              f"{'ttg.warp_specialize' in k.asm['ttgir']}, setmaxnreg in PTX: {'setmaxnreg' in k.asm['ptx']}")
    k = triton.compile(GluonASTSource(fn=ws_kernel, signature={"X": "*fp32", "Y": "*fp32", "BLOCK": "constexpr"},
                                      constexprs={"BLOCK": 128}), target=TARGET, options=dict(num_warps=4))
    print(f"triton {triton.__version__} gluon warp_specialize: ttg.warp_specialize in TTGIR: "
          f"{'ttg.warp_specialize' in k.asm['ttgir']}, setmaxnreg in PTX: {'setmaxnreg' in k.asm['ptx']}")


if __name__ == "__main__":
    main()
