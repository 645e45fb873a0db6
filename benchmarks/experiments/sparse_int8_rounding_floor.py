"""The bf16 output-rounding floor of a sparse_int8 case: the relative RMS error of the exact (fp64) answer
rounded once to bf16, next to our kernel's error on the same inputs.

    TRITON_INTERPRET=1 python benchmarks/experiments/sparse_int8_rounding_floor.py sparse_int8-model-decode-r1-c8k

(on a GPU, drop TRITON_INTERPRET). Printed on a CPU in the interpreter: kernel 1.6335e-03, rounding alone 1.6333e-03.
"""

import sys

import torch

from attnkit.gate.specs import sparse_int8_kernel_call
from attnkit.testing import shapes
from attnkit.testing.inputs import make_inputs
from attnkit.testing.oracles import sparse_int8_oracle


def rel_rms(x, ref):
    return ((x - ref).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt()).item()


if __name__ == "__main__":
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    for cid in sys.argv[1:] or ["sparse_int8-model-decode-r1-c8k"]:
        inp = make_inputs(shapes.get(cid), dev, 0)
        out, _ = sparse_int8_kernel_call(inp)
        ref, _ = sparse_int8_oracle(inp)
        r = ref.double().cpu()
        print(f"{cid}: kernel rel_rms {rel_rms(out.double().cpu(), r):.4e}, "
              f"bf16 rounding of the exact answer alone {rel_rms(r.to(torch.bfloat16).double(), r):.4e}")
