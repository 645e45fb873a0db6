"""The shared test machinery: shape registry, input builders, compare rule, poisoning."""

import math

import pytest
import torch

from attnkit.reference.relbias import gather_paged
from attnkit.testing import compare, poison_, shapes, unwritten
from attnkit.testing.compare import error_stats
from attnkit.testing.inputs import (cu_seqlens, fp8_e4m3_quantize, int8_per_channel_quantize, make_inputs,
                                    paged_cache, topk_indices, ue8m0_block_scales)


def test_registry_ids_unique_and_tiers_valid():
    ids = [c.id for c in shapes.cases(tier="smoke")] + [c.id for c in shapes.cases(tier="full")]
    all_cases = {c.id: c for t in shapes.TIERS for c in shapes.cases(tier=t)}
    assert len(set(c.id for c in shapes.cases(tier="full"))) == len(shapes.cases(tier="full"))
    for c in all_cases.values():
        assert set(c.tiers) <= set(shapes.TIERS)
    assert ids


def test_every_bench_case_is_gated_at_full():
    for c in shapes.cases(tier=shapes.BENCH):
        assert shapes.FULL in c.tiers, c.id


def test_registry_covers_the_named_edge_shapes():
    rb = {c.id: c for t in shapes.TIERS for c in shapes.cases("relbias", t)}
    assert any(c["seqlens_q"] == [1] and c["seqlens_k"] == [1] for c in rb.values())  # length 1
    assert any(113 in c["seqlens_k"] for c in rb.values()) and any(203 in c["seqlens_k"] for c in rb.values())
    assert any(1023 in c["seqlens_k"] for c in rb.values())
    assert any(c["window"] == 1 for c in rb.values())
    assert any(c["window"] and c["window"] > max(c["seqlens_k"]) for c in rb.values())
    assert any(c["E"] == 1 for c in rb.values())
    assert any(c["beyond"] == "clamp" for c in rb.values())
    assert {c["Hq"] // c["Hkv"] for c in rb.values()} >= {1, 2, 4, 8, 16}
    assert {c["D"] for c in rb.values()} >= {64, 128, 256}
    assert any(c["block_size"] and max(c["seqlens_k"]) <= c["block_size"] for c in rb.values())  # one page
    assert any(len(set(c["seqlens_k"])) > 1 for c in rb.values())  # mixed varlen
    si = [c for t in shapes.TIERS for c in shapes.cases("sparse_int8", t)]
    assert any(c["N"] == 0 for c in si) and any(c["invalid"] == 1.0 for c in si) and any(c["strided"] for c in si)
    assert any(c["C"] > 2 ** 20 for c in si)


def test_smoke_cases_are_small():
    for c in shapes.cases(tier="smoke"):
        inp = make_inputs(c, "cpu", 0)
        nbytes = sum(t.numel() * t.element_size() for t in inp.values() if isinstance(t, torch.Tensor))
        assert nbytes < 64 << 20, c.id


def test_inputs_are_seeded_and_never_zero():
    c = shapes.get("relbias-decode-b3-k203")
    a, b, d = make_inputs(c, "cpu", 1), make_inputs(c, "cpu", 1), make_inputs(c, "cpu", 2)
    assert torch.equal(a["q"], b["q"]) and not torch.equal(a["q"], d["q"])
    assert a["q"].abs().sum() > 0 and a["k"].abs().sum() > 0 and a["table"].abs().sum() > 0


def test_int8_quantizer_and_fp8_quantizer():
    x = torch.randn(2, 50, 8) * torch.tensor([1.0, 100.0]).view(2, 1, 1)
    codes, scale = int8_per_channel_quantize(x)
    assert codes.dtype == torch.int8 and codes.abs().max() <= 127
    assert ((codes.float() * scale.unsqueeze(1) - x).abs() <= scale.unsqueeze(1) / 2 + 1e-6).all()
    f8, s = fp8_e4m3_quantize(torch.randn(30, 2, 8) * 7)
    assert f8.dtype == torch.float8_e4m3fn and s.shape == (2,) and f8.float().abs().max() <= 448


def test_ue8m0_block_scales():
    x = torch.zeros(64)
    x[0], x[32] = 448.0, 449.0
    assert ue8m0_block_scales(x, 32).tolist() == [127, 128]


def test_topk_indices_range_and_invalid_fraction():
    g = torch.Generator().manual_seed(0)
    idx = topk_indices(50, 100, 37, g, invalid=0.3)
    assert idx.dtype == torch.int32 and idx.min() >= -1 and idx.max() < 37
    frac = (idx == -1).float().mean().item()
    assert 0.2 < frac < 0.4
    assert topk_indices(3, 5, 10, g, invalid=0.0, Hkv=2).shape == (3, 2, 5)


def test_paged_cache_round_trip_and_poisoned_slack():
    g = torch.Generator().manual_seed(0)
    lens = [37, 1, 16]
    k = torch.randn(sum(lens), 2, 8).to(torch.bfloat16)
    v = torch.randn(sum(lens), 2, 8).to(torch.bfloat16)
    kc, vc, table, used = paged_cache(k, v, lens, 16, g)
    k2, v2, cu = gather_paged(kc, vc, table, used)
    assert torch.equal(k2, k) and torch.equal(v2, v) and cu.tolist() == cu_seqlens(lens).tolist()
    assert torch.isnan(kc.float()).any()  # slack slots poisoned
    assert sorted(table[0, :3].tolist()) != [0, 1, 2] or sorted(table[:, 0].tolist()) != sorted(range(3))


def test_compare_rule_passes_and_fails():
    ref = torch.randn(100, dtype=torch.float64)
    base = (ref + 1e-3 * torch.randn(100, dtype=torch.float64)).to(torch.bfloat16)
    good = ref.to(torch.bfloat16)
    assert compare(good, ref, base).ok
    bad = good.clone()
    bad[3] += 1.0
    c = compare(bad, ref, base)
    assert not c.ok and "max-abs" in c.reason and c.worst_ratio > 1
    nan = good.clone()
    nan[0] = float("nan")
    assert not compare(nan, ref, base).ok


def test_compare_rule_checks_lse_and_empty_rows():
    ref = torch.randn(4, 3, dtype=torch.float64)
    lse_ref = torch.tensor([0.5, float("-inf"), 2.0, 1.0], dtype=torch.float64)
    lse_ok = lse_ref.float()
    assert compare(ref.float(), ref, ref.float(), lse=lse_ok, lse_ref=lse_ref, lse_base=lse_ok).ok
    wrong_empty = lse_ok.clone()
    wrong_empty[1] = 0.0
    c = compare(ref.float(), ref, ref.float(), lse=wrong_empty, lse_ref=lse_ref, lse_base=lse_ok)
    assert not c.ok and "empty rows" in c.reason
    shifted = lse_ok + 0.1
    assert not compare(ref.float(), ref, ref.float(), lse=shifted, lse_ref=lse_ref, lse_base=lse_ok).ok


def test_error_stats():
    rel, mx = error_stats(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 1.0], dtype=torch.float64))
    assert mx == 1.0 and math.isclose(rel, 1 / math.sqrt(2))
    assert error_stats(torch.tensor([float("nan")]), torch.tensor([1.0]))[0] == float("inf")


def test_poison_and_unwritten():
    t = torch.empty(10, dtype=torch.bfloat16)
    poison_(t)
    assert unwritten(t) == 10
    t[:4] = 1.0
    assert unwritten(t) == 6
    u = poison_(torch.empty(8, dtype=torch.uint8))
    u[:3] = 0
    assert unwritten(u) == 5
