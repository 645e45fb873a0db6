"""The paged KV writer against its oracle, byte for byte."""

import pytest
import torch

from attnkit.reference.relbias import write_kv_ref
from attnkit.relbias import relbias_write_kv
from attnkit.testing.inputs import cu_seqlens, fp8_e4m3_quantize, paged_cache


def _setup(device, fp8, block=16, old=(37, 0, 16), new=(1, 5, 20), seed=0):
    g = torch.Generator().manual_seed(seed)
    Hkv, D = 2, 64
    k_old = torch.randn(sum(old), Hkv, D, generator=g).bfloat16()
    v_old = torch.randn(sum(old), Hkv, D, generator=g).bfloat16()
    total = [o + n for o, n in zip(old, new)]
    # a cache big enough for old + new tokens: build it for the final lengths, then keep only the old tokens
    k_full = torch.randn(sum(total), Hkv, D, generator=g).bfloat16()
    kc, vc, bt, _ = paged_cache(k_full, k_full.clone(), total, block, g)
    k_scale = v_scale = None
    if fp8:
        kc, vc = kc.float().nan_to_num(0).to(torch.float8_e4m3fn), vc.float().nan_to_num(0).to(torch.float8_e4m3fn)
        k_scale, v_scale = torch.tensor([0.01, 0.02]), torch.tensor([0.03, 0.005])
    k_new = (torch.randn(sum(new), Hkv, D, generator=g) * 3).bfloat16()
    v_new = (torch.randn(sum(new), Hkv, D, generator=g) * 3).bfloat16()
    k_new[0, 0, 0] = 100.0  # saturates to 448 in fp8 (100 / 0.01 > 448)
    to = lambda t: None if t is None else t.to(device)  # noqa: E731
    return dict(k_new=to(k_new), v_new=to(v_new), cu_seqlens_new=cu_seqlens(new).to(device), k_cache=to(kc),
                v_cache=to(vc), block_table=to(bt), seqused_k=torch.tensor(old, dtype=torch.int32, device=device),
                k_scale=to(k_scale), v_scale=to(v_scale))


def _bytes(t):
    return t.view(torch.uint8) if t.dtype == torch.float8_e4m3fn else t.view(torch.int16)


@pytest.mark.parametrize("fp8", [False, True])
@pytest.mark.parametrize("block", [16, 64])
def test_writer_matches_oracle_byte_for_byte(fp8, block, device):
    a = _setup(device, fp8, block)
    ref_k, ref_v = write_kv_ref(**{n: (t.cpu() if isinstance(t, torch.Tensor) else t) for n, t in a.items()})
    relbias_write_kv(**a)
    assert torch.equal(_bytes(a["k_cache"].cpu()), _bytes(ref_k))
    assert torch.equal(_bytes(a["v_cache"].cpu()), _bytes(ref_v))


def test_fp8_writer_keeps_nan_as_the_nan_code(device):
    """With the value checks off (validate=False; on, a non-finite k_new or v_new is refused), an fp8 cache stores a
    NaN as torch's cast does, the NaN code with its sign, and an infinity as +-448: byte for byte the oracle's. Before,
    the clamp turned a NaN into a finite code (0x7C in the interpreter; on a GPU, whose min / max return the other
    operand of a NaN, -448)."""
    a = _setup(device, True)
    for t in (a["k_new"], a["v_new"]):
        t[0, 0, :4] = torch.tensor([float("nan"), -float("nan"), float("inf"), -float("inf")])
    t = a["k_new"]
    t[-1, -1, -1] = -float("nan")
    ref_k, ref_v = write_kv_ref(**{n: (t.cpu() if isinstance(t, torch.Tensor) else t) for n, t in a.items()})
    assert (torch.isnan(ref_k.float()).sum(), torch.isnan(ref_v.float()).sum()) == (3, 2)
    relbias_write_kv(**a, validate=False)
    assert torch.equal(_bytes(a["k_cache"].cpu()), _bytes(ref_k))
    assert torch.equal(_bytes(a["v_cache"].cpu()), _bytes(ref_v))
    with pytest.raises(ValueError, match="k_new"):
        relbias_write_kv(**a)


def test_writer_off_by_one_is_caught(device):
    a = _setup(device, False)
    ref_k, _ = write_kv_ref(**{n: (t.cpu() if isinstance(t, torch.Tensor) else t) for n, t in a.items()})
    relbias_write_kv(**a, _off_by_one=True)
    assert not torch.equal(_bytes(a["k_cache"].cpu()), _bytes(ref_k))


def test_writer_rejects_bad_input(device):
    a = _setup(device, True)
    with pytest.raises(ValueError, match="k_scale"):
        relbias_write_kv(**dict(a, k_scale=None))
    b = _setup(device, False)
    with pytest.raises(ValueError, match="block_table"):
        relbias_write_kv(**dict(b, seqused_k=b["seqused_k"] + 1000))
    with pytest.raises(ValueError, match="cu_seqlens_new"):
        relbias_write_kv(**dict(b, cu_seqlens_new=torch.tensor([0, 3, 2, 26], dtype=torch.int32, device=device)))


def test_writer_custom_op(device):
    import attnkit.ops  # noqa: F401
    from attnkit.testing.opcheck import check_custom_op
    # a bf16 cache: opcheck's schema checker cannot compare fp8 tensors on a CPU (the fp8 path is
    # byte-checked above)
    a = _setup(device, False)
    args = [a["k_new"], a["v_new"], a["cu_seqlens_new"], a["k_cache"], a["v_cache"], a["block_table"], a["seqused_k"],
            a["k_scale"], a["v_scale"]]
    assert check_custom_op(torch.ops.attnkit.relbias_write_kv, args, mutated=(3, 4))["opcheck"]
