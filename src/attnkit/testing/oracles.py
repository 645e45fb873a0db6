"""Adapters from the input dictionaries of ``attnkit.testing.inputs`` to the fp64 oracles."""

from __future__ import annotations

from .. import reference as R


def relbias_oracle(inp: dict):
    kw = dict(window=inp["window"], beyond=inp["beyond"], softmax_scale=inp["softmax_scale"],
              k_scale=inp.get("k_scale"), v_scale=inp.get("v_scale"))
    if "k_cache" in inp:
        return R.relbias_attention_paged_ref(inp["q"], inp["k_cache"], inp["v_cache"], inp["block_table"],
                                             inp["seqused_k"], inp["cu_seqlens_q"], inp["table"], **kw)
    return R.relbias_attention_ref(inp["q"], inp["k"], inp["v"], inp["cu_seqlens_q"], inp["cu_seqlens_k"],
                                   inp["table"], **kw)


def sparse_int8_oracle(inp: dict):
    return R.sparse_int8_ref(inp["q"], inp["k_cache"], inp["v_cache"], inp["key_scale"], inp["value_scale"],
                             inp["indices"], scale=inp["scale"])


def mqa_decode_oracle(inp: dict):
    return R.mqa_decode_ref(inp["q"], inp["swa_cache"], inp["comp_cache"], inp["swa_idx"], inp["comp_idx"],
                            inp["positions"], inp["cos_sin"], inp["sink"], inp["num_heads"], inp["softmax_scale"],
                            comp_format=inp["comp_format"])


def merge_oracle(inp: dict):
    return R.merge_partials(inp["m"], inp["l"], inp["acc"])


ORACLES = {"relbias": relbias_oracle, "sparse_int8": sparse_int8_oracle, "mqa_decode": mqa_decode_oracle,
           "merge": merge_oracle}
