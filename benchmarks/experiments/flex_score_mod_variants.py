"""How much the FlexAttention peer's score_mod formulation costs, at relbias-model-prefill-8k-global.

Variants: the bias as one clamped gather (what the provider uses when every visible distance is
inside the extent), the same with the beyond-extent `where`, the table in bf16, and no bias.
Usage: python benchmarks/experiments/flex_score_mod_variants.py OUTDIR
"""

import json
import sys
from pathlib import Path

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from attnkit.bench.harness import require_cuda, summarize
from attnkit.testing import shapes
from attnkit.testing.inputs import make_inputs


def main(out):
    require_cuda()
    case = shapes.get("relbias-model-prefill-8k-global")
    inp = make_inputs(case, "cuda", 0)
    L, Hq, D = inp["q"].shape
    q = inp["q"].transpose(0, 1).unsqueeze(0)
    k = inp["k"].transpose(0, 1).unsqueeze(0)
    v = inp["v"].transpose(0, 1).unsqueeze(0)
    t32 = inp["table"].float()
    t16 = inp["table"].to(torch.bfloat16)
    E = t32.shape[1]
    bm = create_block_mask(lambda b, h, qi, ki: qi >= ki, 1, None, L, L, device="cuda")
    fx = torch.compile(flex_attention, dynamic=False)
    variants = {
        "clamp_gather_fp32": lambda s, b, h, qi, ki: s + t32[h, (qi - ki).clamp(0, E - 1)],
        "clamp_gather_where_fp32": lambda s, b, h, qi, ki: s + torch.where(
            qi - ki < E, t32[h, (qi - ki).clamp(0, E - 1)], 0.0),
        "clamp_gather_bf16": lambda s, b, h, qi, ki: s + t16[h, (qi - ki).clamp(0, E - 1)],
        "no_bias": None,
    }
    res = {}
    for name, sm in variants.items():
        def run(sm=sm):
            return fx(q, k, v, score_mod=sm, block_mask=bm, scale=inp["softmax_scale"], enable_gqa=True)
        run()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            run()
        xs = []
        for _ in range(15):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            g.replay()
            e.record()
            torch.cuda.synchronize()
            xs.append(s.elapsed_time(e) * 1e3)
        res[name] = summarize(xs)
        print(f"{name:26s} {res[name]['median']:9.1f} us", flush=True)
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "flex_score_mod_variants.json").write_text(json.dumps(
        {"case": case.id, "device": torch.cuda.get_device_name(), "torch": torch.__version__, "median_us": res},
        indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
