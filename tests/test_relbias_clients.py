"""Real clients no one here wrote: Hugging Face T5's decoder self-attention (its own bucketed
relative_attention_bias, no softmax scaling), expanded into a per-distance table."""

import pytest
import torch

from attnkit.relbias import relbias_attention
from attnkit.testing import compare

transformers = pytest.importorskip("transformers", reason="the client check needs transformers (pip install '.[test]')")
from transformers import T5Config  # noqa: E402
from transformers.models.t5.modeling_t5 import T5Attention  # noqa: E402


def _t5_table(layer, E):
    """table[h, d] = the layer's bias at distance d (key d positions behind the query)."""
    d = torch.arange(E)
    buckets = layer._relative_position_bucket(-d, bidirectional=False, num_buckets=layer.relative_attention_num_buckets,
                                              max_distance=layer.relative_attention_max_distance)
    return layer.relative_attention_bias.weight[buckets].T.float().contiguous()  # [H, E]


def _layer_out(layer, hidden, L):
    mask = torch.zeros(1, 1, L, L, dtype=hidden.dtype)
    mask = mask.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), torch.finfo(hidden.dtype).min)
    return layer(hidden, mask=mask)[0][0]


@pytest.mark.parametrize("L", [1, 37, 203])
def test_t5_decoder_self_attention(L, device):
    torch.manual_seed(0)
    cfg = T5Config(d_model=128, d_kv=64, num_heads=4, is_decoder=True, relative_attention_num_buckets=32,
                   relative_attention_max_distance=128, dropout_rate=0.0)
    layer = T5Attention(cfg, has_relative_attention_bias=True).eval()
    with torch.no_grad():
        layer.relative_attention_bias.weight.normal_(0, 1.0)
        hidden = torch.randn(1, L, cfg.d_model)
        ref = _layer_out(layer.double(), hidden.double(), L)  # the layer itself, in fp64
        base = _layer_out(layer.bfloat16(), hidden.bfloat16(), L).double()  # the layer itself, in bf16
        layer = layer.float()
        H, dk = cfg.num_heads, cfg.d_kv
        q = layer.q(hidden[0]).view(L, H, dk).bfloat16().to(device)
        k = layer.k(hidden[0]).view(L, H, dk).bfloat16().to(device)
        v = layer.v(hidden[0]).view(L, H, dk).bfloat16().to(device)
        # beyond max_distance T5's bucket saturates: "clamp" with an extent past the saturation point
        table = _t5_table(layer, 2 * cfg.relative_attention_max_distance).to(device)
        cu = torch.tensor([0, L], dtype=torch.int32, device=device)
        o, _ = relbias_attention(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, table=table, beyond="clamp",
                                 softmax_scale=1.0)
        out = layer.double().o(o.double().cpu().reshape(L, H * dk))
    c = compare(out, ref, base, out_dtype=torch.bfloat16)
    assert c.ok, c.reason
