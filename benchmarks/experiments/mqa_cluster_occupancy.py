"""How many thread-block clusters of the mqa_decode Gluon swap-AB kernel fit on this GPU at once
(cuOccupancyMaxActiveClusters with the compiled kernel's real block size and shared memory), for the cluster
merge's plans: the rule's 64-slot tiles in clusters of 16 (1-4 tokens) and of 10 (gluon_cluster_exact), and the
wide tiles' clusters of 5 (12-20 tokens by the rule; 22-26 tokens in sweep mqa-gluon-wide-cutoff). A step of T
tokens launches T clusters: past this count they run in more than one wave.

    python benchmarks/experiments/mqa_cluster_occupancy.py OUT.json

Runs: benchmarks/experiments/mqa-cluster-occupancy-h200-7dfeeac.json (H200); at 58f9ec6 on an H100 80GB HBM3,
benchmarks/experiments/mqa-cluster-occupancy-h100-58f9ec6.json: the same counts (7 clusters of 16 or of 10, 22 of 5).
"""

from __future__ import annotations

import ctypes
import json
import sys

import torch

from attnkit.bench.harness import require_cuda
from attnkit.gate.specs import mqa_headpad_call
from attnkit.mqa_decode import interface
from attnkit.testing import shapes
from attnkit.testing.inputs import make_inputs


class _Dim(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class _Attr(ctypes.Structure):  # CUlaunchAttribute: id, 4 bytes of padding, a 64-byte value union
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("dim", _Dim), ("rest", ctypes.c_char * 52)]


class _Config(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("gx", ctypes.c_uint), ("gy", ctypes.c_uint), ("gz", ctypes.c_uint), ("bx", ctypes.c_uint),
                ("by", ctypes.c_uint), ("bz", ctypes.c_uint), ("smem", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(_Attr)), ("nattrs", ctypes.c_uint)]


def max_active_clusters(compiled, ctas: int) -> int:
    cuda = ctypes.CDLL("libcuda.so.1")
    if getattr(compiled, "function", None) is None:
        compiled._init_handles()
    fn = ctypes.c_void_p(compiled.function)
    shared = compiled.metadata.shared
    assert cuda.cuFuncSetAttribute(fn, 8, shared) == 0  # MAX_DYNAMIC_SHARED_SIZE_BYTES
    assert cuda.cuFuncSetAttribute(fn, 14, 1) == 0  # NON_PORTABLE_CLUSTER_SIZE_ALLOWED
    attr = _Attr(id=4, dim=_Dim(ctas, 1, 1))  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    cfg = _Config(gx=ctas, gy=1, gz=1, bx=compiled.metadata.num_warps * 32, by=1, bz=1, smem=shared,
                  stream=None, attrs=ctypes.pointer(attr), nattrs=1)
    n = ctypes.c_int(-1)
    rc = cuda.cuOccupancyMaxActiveClusters(ctypes.byref(n), fn, ctypes.byref(cfg))
    assert rc == 0, rc
    return n.value


def main(out_path: str) -> None:
    require_cuda()
    seen = []
    orig = interface._cluster_prepare  # run once per compiled cluster kernel, before its first launch

    def spy(compiled, ctas):
        orig(compiled, ctas)
        seen.append((compiled, ctas))

    interface._cluster_prepare = spy
    rows = []
    plans = (("clusters of 16", 1, dict(gluon_cluster_exact=False)), ("exact (10)", 1, dict(gluon_cluster_exact=True)),
             ("wide, clusters of 5", 24, dict(gluon_wide=True)))
    for fmt in ("fp8", "nvfp4"):
        for H in (16, 32):
            for what, T, kw in plans:
                inp = make_inputs(shapes.get(f"mqa_decode-step-h{H}-t{T}-{fmt}"), "cuda", 0)
                seen.clear()
                mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_cluster=True, **kw)
                torch.cuda.synchronize()
                if not seen:
                    raise RuntimeError(f"{what} at {H} heads {fmt}: no cluster kernel was prepared (the plan did "
                                       "not launch clusters, or its kernel was prepared before)")
                compiled, ctas = seen[-1]
                rows.append(dict(format=fmt, heads=H, plan=what, ctas=ctas, warps=compiled.metadata.num_warps,
                                 shared_bytes=compiled.metadata.shared, n_regs=compiled.n_regs,
                                 max_active_clusters=max_active_clusters(compiled, ctas)))
                print(rows[-1], flush=True)
    interface._cluster_prepare = orig
    env = dict(gpu=torch.cuda.get_device_name(), sm_count=torch.cuda.get_device_properties(0).multi_processor_count,
               torch=torch.__version__)
    json.dump(dict(env=env, rows=rows), open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
