"""mqa_decode head-padded kernel: forced splits, determinism, bad input (the gate covers the shapes)."""

import re

import pytest
import torch

from attnkit.gate.specs import mqa_headpad_call
from attnkit.testing import compare, nan_rows, shapes
from attnkit.testing.baselines import mqa_decode_baseline
from attnkit.testing.inputs import distinct_window_slots, make_inputs
from attnkit.testing.oracles import mqa_decode_oracle


@pytest.mark.parametrize("num_splits,block_s,out_dc", [(1, None, None), (3, None, None), (3, 1, None), (2, None, 128)])
def test_headpad_forced_splits(num_splits, block_s, out_dc, device):
    """block_s=1: the finishing merge reads the splits one chunk at a time (online rescaling); out_dc=128:
    four programs per head block, each decoding its own output chunk."""
    from attnkit.mqa_decode import mqa_decode_attention
    inp = make_inputs(shapes.get("mqa_decode-small-t1-h16-fp8"), device, 3)
    out, lse = mqa_decode_attention(inp["q"], inp["swa_cache"], inp["comp_cache"], inp["swa_idx"], inp["comp_idx"],
                                    inp["positions"], inp["cos_sin"], inp["sink"], inp["num_heads"],
                                    inp["softmax_scale"], inp["comp_format"], num_splits=num_splits, kernel="headpad",
                                    out_dc=out_dc, _merge_block_s=block_s)
    ref, ref_lse = mqa_decode_oracle(inp)
    base, base_lse = mqa_decode_baseline(inp)
    c = compare(out, ref, base, lse=lse, lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason


@pytest.mark.parametrize("merge_dc,block_s", [(64, None), (128, 1), (256, None)])
def test_merge_output_chunks(merge_dc, block_s, device):
    """merge_dc: the finishing merge in programs of merge_dc output dims (the RoPE dims and the LSE in a row's last
    program): the oracle's answer, with the fp32 output (the MXFP8 quantizer's input) and the MXFP8 bytes too, and
    in the interpreter the bits of one program per row (each output dim sums the same splits in the same order)."""
    from attnkit.mqa_decode import mqa_decode_attention
    inp = make_inputs(shapes.get("mqa_decode-small-t2-h32-nvfp4"), device, 5)
    T, H_pad = inp["q"].shape[:2]

    def call(dc):
        f8 = torch.full((T, H_pad, 512), 0x7E, dtype=torch.uint8, device=device)
        sc = torch.full((T, H_pad, 16), 0xAB, dtype=torch.uint8, device=device)
        r = mqa_decode_attention(inp["q"], inp["swa_cache"], inp["comp_cache"], inp["swa_idx"], inp["comp_idx"],
                                 inp["positions"], inp["cos_sin"], inp["sink"], inp["num_heads"],
                                 inp["softmax_scale"], inp["comp_format"], num_splits=3, kernel="headpad",
                                 merge_dc=dc, _merge_block_s=block_s, out_fp8=f8.view(torch.float8_e4m3fn),
                                 out_scale=sc, _return_fp32=True)
        return r + (f8, sc)

    out, lse, o32, f8, sc = call(merge_dc)
    ref, ref_lse = mqa_decode_oracle(inp)
    base, base_lse = mqa_decode_baseline(inp)
    c = compare(out, ref, base, lse=lse, lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason
    whole = call(512)
    assert bool((f8[:, inp["num_heads"]:] == 0x7E).all()) and bool((sc[:, inp["num_heads"]:] == 0xAB).all())
    if device == "cpu":
        for x, y in zip((out, lse, o32, f8, sc), whole):
            assert torch.equal(x, y)
    with pytest.raises(ValueError, match="merge_dc"):
        call(96)


@pytest.mark.parametrize("warps", [1, 2, 8, 16])
def test_merge_warps_give_the_same_bits(warps, device):
    """merge_warps: the finishing merge's warps per program change which thread sums which output dims, not the
    order of the splits in a dim's sum, so the output and LSE are the same bits as the rule's; the keyword beats
    ATTNKIT_MQA_MERGE_WARPS, a bad value is refused by name, and the launch key carries the warps."""
    from attnkit.mqa_decode import interface as I
    inp = make_inputs(shapes.get("mqa_decode-small-t2-h32-nvfp4"), device, 6)
    for kernel, kw in (("headpad", {}), ("swapab", dict(gluon_fused=False, gluon_cluster=False))):  # (the Gluon
        # kernel's merge launched)
        a = mqa_headpad_call(inp, kernel=kernel, num_splits=3, **kw)
        n0 = len(I.LAUNCHED_KEYS)
        b = mqa_headpad_call(inp, kernel=kernel, num_splits=3, merge_warps=warps, **kw)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), kernel
        assert [k for k in I.LAUNCHED_KEYS[n0:] if k[0].startswith("merge")][0][2] == warps
    with pytest.raises(ValueError, match="merge_warps"):
        mqa_headpad_call(inp, merge_warps=3)


def test_merge_warps_environment(monkeypatch):
    from attnkit.mqa_decode.config import MERGE_WARPS, merge_warps
    assert [merge_warps(dc) for dc in (64, 128, 256, 512)] == [2, 2, 4, 8] and merge_warps(256, 8) == 8
    monkeypatch.setenv("ATTNKIT_MQA_MERGE_WARPS", "2")
    assert MERGE_WARPS.resolve(None) == 2 and MERGE_WARPS.resolve(8) == 8
    for bad in ("2.0", "0", "17", "two"):
        monkeypatch.setenv("ATTNKIT_MQA_MERGE_WARPS", bad)
        with pytest.raises(ValueError, match="ATTNKIT_MQA_MERGE_WARPS"):
            MERGE_WARPS.resolve(None)


@pytest.mark.parametrize("opts", [dict(), dict(num_splits=1), dict(num_splits=3), dict(num_splits=7)])
@pytest.mark.parametrize("case", ["mqa_decode-small-t1-h16-fp8", "mqa_decode-small-t2-h32-nvfp4"])
def test_headpad_ids_early_gives_the_same_bits(case, opts, device):
    """headpad_ids_early loads the first tiles' slot ids before the query and each next tile's before the current
    tile's records: the same tiles in the same order (splits that start in either list, span both or hold one), so
    the same output and LSE bits; ATTNKIT_MQA_HEADPAD_IDS_EARLY's grammar and the launch key."""
    from attnkit.mqa_decode import interface as I
    inp = make_inputs(shapes.get(case), device, 19)
    a = mqa_headpad_call(inp, kernel="headpad", **opts)
    n0 = len(I.LAUNCHED_KEYS)
    b = mqa_headpad_call(inp, kernel="headpad", headpad_ids_early=True, **opts)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert "_idsearly" in I.LAUNCHED_KEYS[n0][0]
    c = mqa_headpad_call(inp, kernel="headpad", headpad_ids_early=True, perturb="slot-tile-lost", **opts)
    assert not torch.equal(a[0], c[0])  # the perturbation still drops a tile on this path


def test_headpad_ids_early_option(monkeypatch):
    from attnkit.mqa_decode.config import headpad_plan
    assert not headpad_plan(1, 16, 640, 132, None, "cuda").ids_early  # the default until timed
    assert headpad_plan(1, 16, 640, 132, None, "cuda", ids_early=True).ids_early
    monkeypatch.setenv("ATTNKIT_MQA_HEADPAD_IDS_EARLY", "1")
    assert headpad_plan(1, 16, 640, 132, None, "cuda").ids_early
    assert not headpad_plan(1, 16, 640, 132, None, "cuda", ids_early=False).ids_early
    monkeypatch.setenv("ATTNKIT_MQA_HEADPAD_IDS_EARLY", "true")
    with pytest.raises(ValueError, match="ATTNKIT_MQA_HEADPAD_IDS_EARLY"):
        headpad_plan(1, 16, 640, 132, None, "cuda")


def test_headpad_deterministic(device):
    inp = make_inputs(shapes.get("mqa_decode-small-t2-h32-nvfp4"), device, 4)
    a, b = mqa_headpad_call(inp), mqa_headpad_call(inp)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_headpad_bad_input(device):
    inp = make_inputs(shapes.get("mqa_decode-small-t1-h16-fp8"), device, 0)
    with pytest.raises(ValueError, match="comp_idx"):
        mqa_headpad_call(dict(inp, comp_idx=inp["comp_idx"].clone().fill_(10 ** 6)))
    with pytest.raises(ValueError, match="sink"):
        mqa_headpad_call(dict(inp, sink=inp["sink"][:3]))
    two = make_inputs(shapes.get("mqa_decode-small-t2-h32-nvfp4"), device, 0)
    pos = torch.zeros(2 * two["positions"].numel(), dtype=two["positions"].dtype, device=device)
    pos[::2] = two["positions"]
    with pytest.raises(ValueError, match="positions: must be a contiguous"):  # read at offset t: was 1.3 off
        mqa_headpad_call(dict(two, positions=pos[::2]))
    for bad in (65, 16.5, True, "16"):  # a float or bool was truncated to an int before
        with pytest.raises(ValueError, match="num_heads"):
            mqa_headpad_call(dict(inp, num_heads=bad))
    with pytest.raises(ValueError, match="comp_format"):
        mqa_headpad_call(dict(inp, comp_format="int4"))


def test_dispatch_rule_pure_function():
    from attnkit.mqa_decode.config import use_swapab
    # as specified, the single cutoff over both formats: none as measured (nvfp4 at 32 heads loses from T = 1)
    assert not use_swapab(1, 16, "fp8") and not use_swapab(1, 32, "nvfp4")
    assert use_swapab(8, 16, "nvfp4", cutoff=16) and use_swapab(16, 32, "fp8", cutoff=16)
    assert not use_swapab(17, 16, "fp8", cutoff=16) and not use_swapab(1, 64, "fp8", cutoff=16)
    # per format (option swapab_per_format): swap-AB for fp8 records at 16 / 32 heads, head-padded for nvfp4
    assert use_swapab(1, 16, "fp8", True) and use_swapab(64, 32, "fp8", True) and not use_swapab(1, 64, "fp8", True)
    assert not use_swapab(1, 16, "nvfp4", True) and not use_swapab(1, 32, "nvfp4", True)
    cut = {"fp8": 16, "nvfp4": 4}
    assert use_swapab(4, 16, "nvfp4", True, by_format=cut) and not use_swapab(5, 32, "nvfp4", True, by_format=cut)
    assert not use_swapab(17, 16, "fp8", True, by_format=cut) and not use_swapab(1, 8, "fp8", True, by_format=cut)


def test_swapab_agrees_with_headpad_and_rejects_other_heads(device):
    inp = make_inputs(shapes.get("mqa_decode-small-t2-h32-nvfp4"), device, 6)
    a = mqa_headpad_call(inp, kernel="headpad")
    b = mqa_headpad_call(inp, kernel="swapab")
    assert (a[0].float() - b[0].float()).abs().max() <= 2 * (a[0].float().abs().max() * 2 ** -8)
    torch.testing.assert_close(a[1], b[1], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="swapab takes H"):
        mqa_headpad_call(dict(inp, num_heads=8, sink=inp["sink"][:8]), kernel="swapab")


def test_warmup_compiles_the_key_a_step_launches(device):
    from attnkit.mqa_decode import interface as I
    inp = make_inputs(shapes.get("mqa_decode-small-t2-h32-nvfp4"), device, 1)
    keys = I.mqa_decode_warmup(32, inp["q"].shape[1], "nvfp4", device, window=16, topk=48, max_tokens=2,
                               kernel="swapab")
    n0 = len(I.LAUNCHED_KEYS)
    mqa_headpad_call(inp, kernel="swapab")
    step = set(I.LAUNCHED_KEYS[n0:])
    assert step and step <= keys


def test_launch_log_is_bounded():
    """The launch-key log keeps the last KEEP keys only (an engine calling eagerly keeps no growing history), while
    len() counts every launch and indexing by launch number reads the held ones; a dropped key is an IndexError."""
    from attnkit.mqa_decode.interface import _LaunchLog

    class Small(_LaunchLog):
        KEEP = 4

    log = Small()
    for i in range(10):
        log.append(("k", i))
    assert len(log) == 10 and len(log._keys) == 4
    assert log[6:] == [("k", 6), ("k", 7), ("k", 8), ("k", 9)] and log[9] == ("k", 9) and log[-1] == ("k", 9)
    assert log[10:] == []
    with pytest.raises(IndexError):
        log[5]
    with pytest.raises(IndexError):
        log[2:]


def test_merge_dc_rule_and_warmup():
    """The merge's dims per program: a pure function of the kernel and the step's token count (the sweeps with
    merge_early: 256 but from 9 to 31 tokens, at either head count)."""
    from attnkit.mqa_decode.config import merge_dc_rule
    for h in (16, 32):
        assert [merge_dc_rule("swapab", t, h) for t in (1, 4, 8, 9, 16, 31, 32, 47, 64)] == \
            [256, 256, 256, 512, 512, 512, 256, 256, 256]
    assert {merge_dc_rule("headpad", t, h) for t in (1, 4, 16) for h in (16, 64)} == {512}


def test_warmup_compiles_both_merges(device):
    """A warm-up to 9 tokens at 16 heads compiles both merges a swap-AB layer launches (256 dims up to 8 tokens,
    512 at 9), and the keys say which."""
    from attnkit.mqa_decode import interface as I
    keys = I.mqa_decode_warmup(16, 64, "fp8", device, window=16, topk=48, max_tokens=9, kernel="swapab",
                               gluon=False)
    assert {k[1] for k in keys if k[0].startswith("merge")} == {256, 512}


@pytest.mark.parametrize("case,kernel", [("mqa_decode-small-t2-h32-nvfp4", "swapab"),
                                         ("mqa_decode-small-t1-h16-fp8", "headpad"),
                                         ("mqa_decode-model-t5-h32-nvfp4-partial", "swapab")])
def test_merge_early_gives_the_same_bits(device, case, kernel):
    """merge_early reads the sink, the position and its cos / sin before the partials (under pdl before the wait):
    the same arithmetic, so the same output and LSE bits (with pdl where it runs); its launch key says so, and the
    warm-up compiles it; a bad value is refused by name."""
    from attnkit.mqa_decode import interface as I
    inp = make_inputs(shapes.get(case), device, 14)
    kw = dict(gluon_cluster=False) if kernel == "swapab" else {}  # (the Gluon kernel's merge launched)
    a = mqa_headpad_call(inp, kernel=kernel, merge_early=False, **kw)
    n0 = len(I.LAUNCHED_KEYS)
    b = mqa_headpad_call(inp, kernel=kernel, merge_early=True, **kw)
    step = set(I.LAUNCHED_KEYS[n0:])
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert any(k[0].startswith("merge_early") for k in step) or any("fused" in k[0] for k in step), step
    T, H = inp["q"].shape[0], inp["num_heads"]
    keys = I.mqa_decode_warmup(H, inp["q"].shape[1], inp["comp_format"], device, window=inp["swa_idx"].shape[1],
                               topk=inp["comp_idx"].shape[1], max_tokens=T, kernel=kernel, merge_early=True, **kw)
    assert step <= keys
    with pytest.raises(ValueError, match="merge_early"):
        mqa_headpad_call(inp, kernel=kernel, merge_early="yes")


def _kernel(key):
    """The kernel of a launch key, without its variant suffixes (nvfp4 from bits, PDL, the Gluon kernel's fused
    merge, which the rule picks where a token has at most two splits, its record-load layout for nvfp4, its loads
    order: loads first, the prologue level, the cluster merge)."""
    return re.sub(r"_prologue\d|_cluster\d+s\d+", "", key[0].replace("_e2m1bits", "").replace("_pdl", "").replace("_fused", "")
                  .replace("_async", "").replace("_early", "").replace("_half", "").replace("_banks", "")
                  .replace("_loadsfirst", ""))


def test_warmup_follows_the_per_format_dispatch(device):
    """The Triton swap-AB kernel's rule: with swapab_per_format an fp8 step of 16 heads dispatches to swap-AB; the
    warm-up compiles that key."""
    from attnkit.mqa_decode import interface as I
    inp = make_inputs(shapes.get("mqa_decode-small-t1-h16-fp8"), device, 1)
    keys = I.mqa_decode_warmup(16, inp["q"].shape[1], "fp8", device, window=inp["swa_idx"].shape[1],
                               topk=inp["comp_idx"].shape[1], max_tokens=1, swapab_per_format=True, gluon=False)
    n0 = len(I.LAUNCHED_KEYS)
    mqa_headpad_call(inp, kernel=None, swapab_per_format=True, gluon=False)
    step = set(I.LAUNCHED_KEYS[n0:])
    assert step and step <= keys and all(_kernel(k) == "swapab" for k in step if not k[0].startswith("merge"))
    n1 = len(I.LAUNCHED_KEYS)
    mqa_headpad_call(inp, kernel=None, gluon=False)  # the Triton kernel's default rule: head-padded
    assert all(_kernel(k) == "headpad" for k in I.LAUNCHED_KEYS[n1:] if not k[0].startswith("merge"))


def test_warmup_follows_the_gluon_dispatch(device):
    """The default rule where the Gluon kernel runs: swap-AB for 16 heads (either format); the warm-up compiles the
    key a step launches. On a machine without it, the Triton rule (head-padded)."""
    from attnkit.mqa_decode import interface as I
    from attnkit._runtime import gluon_runs
    inp = make_inputs(shapes.get("mqa_decode-small-t2-h32-nvfp4"), device, 1)
    keys = I.mqa_decode_warmup(32, inp["q"].shape[1], "nvfp4", device, window=inp["swa_idx"].shape[1],
                               topk=inp["comp_idx"].shape[1], max_tokens=2)
    n0 = len(I.LAUNCHED_KEYS)
    mqa_headpad_call(inp, kernel=None)
    step = set(I.LAUNCHED_KEYS[n0:])
    assert step and step <= keys
    want = "swapab_gluon" if gluon_runs(torch.device(device)) else "headpad"
    assert all(_kernel(k) == want for k in step if not k[0].startswith("merge")), step


def test_mqa_custom_ops(device):
    import attnkit.ops  # noqa: F401
    from attnkit.testing.opcheck import check_custom_op
    inp = make_inputs(shapes.get("mqa_decode-small-t1-h16-fp8"), device, 2)
    args = [inp["q"], inp["swa_cache"], inp["comp_cache"], inp["swa_idx"], inp["comp_idx"], inp["positions"],
            inp["cos_sin"], inp["sink"], inp["num_heads"], inp["softmax_scale"], inp["comp_format"], ""]
    def refresh(a):  # graph replays after the inputs change in place (q and the sink)
        a[0].mul_(-0.5)
        a[7].add_(0.25)

    assert check_custom_op(torch.ops.attnkit.mqa_decode, args, refresh=refresh)["opcheck"]
    lat = inp["q"][0, :4].contiguous()
    cache = torch.zeros(1, 16, 528, dtype=torch.uint8, device=device)
    wargs = [lat, torch.arange(4, device=device), inp["cos_sin"], torch.arange(4, device=device), cache, "fp8"]
    assert check_custom_op(torch.ops.attnkit.mqa_write_records, wargs, mutated=(4,))["opcheck"]


@pytest.mark.parametrize("kernel", [None, "headpad"])
def test_decode_step_writes_then_attends(device, kernel):
    """mqa_decode_step: the new records written, then the attention (with PDL and early inputs where PDL runs): the
    same bits as the writer and the attention called one after the other, the fp64 oracle on the cache as written
    (the attention sees the new records), and its refusals."""
    from attnkit.mqa_decode import mqa_decode_step, mqa_write_records
    inp = make_inputs(shapes.get("mqa_decode-model-t5-h32-nvfp4-partial" if device == "cuda"
                                 else "mqa_decode-small-t2-h32-nvfp4"), device, 4)
    T = inp["q"].shape[0]
    slot = distinct_window_slots(inp["swa_idx"])
    lat = torch.randn(T, 512, generator=torch.Generator().manual_seed(9)).bfloat16().to(device) * 3
    args = (inp["q"], inp["swa_cache"], inp["comp_cache"], inp["swa_idx"], inp["comp_idx"], inp["positions"],
            inp["cos_sin"], inp["sink"], inp["num_heads"], inp["softmax_scale"], inp["comp_format"])
    before = inp["swa_cache"].clone()
    out, lse = mqa_decode_step(lat, slot, *args, kernel=kernel)
    assert not torch.equal(before, inp["swa_cache"])  # the records were written
    ref, ref_lse = mqa_decode_oracle(inp)  # over the cache as written
    base, base_lse = mqa_decode_baseline(inp)
    c = compare(out, ref, base, lse=lse, lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason
    inp["swa_cache"].copy_(before)
    mqa_write_records(lat, inp["positions"], inp["cos_sin"], slot, inp["swa_cache"], "fp8", pdl=False)
    out2, lse2 = mqa_headpad_call(inp, kernel=kernel, pdl=False)
    assert torch.equal(out.view(torch.uint8), out2.view(torch.uint8)) and torch.equal(lse, lse2)
    with pytest.raises(ValueError, match="pdl_early_inputs"):
        mqa_decode_step(lat, slot, *args, pdl_early_inputs=False)
    with pytest.raises(ValueError, match="new_positions"):
        mqa_decode_step(lat[:1], slot[:1], *args)
    out3, _ = mqa_decode_step(lat[:1], slot[:1], *args, new_positions=inp["positions"][:1].clone(), kernel=kernel)
    assert out3.shape == out.shape


def test_decode_step_custom_op(device):
    import attnkit.ops  # noqa: F401
    from attnkit.testing.opcheck import check_custom_op
    inp = make_inputs(shapes.get("mqa_decode-small-t1-h16-fp8"), device, 2)
    slot = inp["swa_idx"][0, :1].clone().long().clamp(min=0)
    lat = inp["q"][:, 0].contiguous()
    args = [lat, slot, inp["positions"], inp["q"], inp["swa_cache"], inp["comp_cache"], inp["swa_idx"], inp["comp_idx"],
            inp["positions"], inp["cos_sin"], inp["sink"], inp["num_heads"], inp["softmax_scale"], inp["comp_format"], ""]

    def refresh(a):  # graph replays after the new latent and q change in place
        a[0].mul_(-0.5)
        a[3].mul_(2.0)

    assert check_custom_op(torch.ops.attnkit.mqa_decode_step, args, refresh=refresh)["opcheck"]


def test_mxfp8_output_matches_the_rounding_rule_and_leaves_padding_untouched(device):
    from attnkit.reference.mqa_decode import encode_fp8_record
    inp = make_inputs(shapes.get("mqa_decode-small-t2-h32-nvfp4"), device, 8)
    T, H_pad, H = inp["q"].shape[0], inp["q"].shape[1], inp["num_heads"]
    q8 = torch.full((T, H_pad, 512), 0x5A, dtype=torch.uint8, device=device)
    sc = torch.full((T, H_pad, 16), 0xA5, dtype=torch.uint8, device=device)
    from attnkit.mqa_decode import interface as I
    out, _, o32 = I.mqa_decode_attention(inp["q"], inp["swa_cache"], inp["comp_cache"], inp["swa_idx"],
                                         inp["comp_idx"], inp["positions"], inp["cos_sin"], inp["sink"], H,
                                         inp["softmax_scale"], inp["comp_format"], out_fp8=q8.view(torch.float8_e4m3fn),
                                         out_scale=sc, _return_fp32=True)
    assert (q8[:, H:] == 0x5A).all() and (sc[:, H:] == 0xA5).all()  # padding heads untouched
    rec = encode_fp8_record(o32.cpu())  # the rounding rule applied to the fp32 output the kernel quantized
    assert torch.equal(q8[:, :H].cpu(), rec[..., :512]) and torch.equal(sc[:, :H].cpu(), rec[..., 512:])
    # and the MXFP8 values decode to the bf16 output within the e4m3 rounding
    deq = q8[:, :H].view(torch.float8_e4m3fn).float() * torch.exp2(sc[:, :H].float() - 127).repeat_interleave(32, -1)
    assert (deq.cpu() - out.float().cpu()).abs().max() <= out.float().abs().max().cpu() * 2 ** -3


def test_mxfp8_output_keeps_nan_as_the_nan_code(device):
    """A NaN row (a NaN in a record, the NaN tests below) quantized to MXFP8: every NaN value is the e4m3 NaN code
    (sign kept) and leaves its block's amax, so a block's other values keep the codes the rule gives them; against
    the oracle's encoder, byte for byte. Before, a NaN row came out as finite codes (0x7C in the interpreter; on a GPU,
    whose min / max return the other operand of a NaN, the clamp's bound), and a NaN beside finite values set its
    block's scale wrong."""
    from attnkit.mqa_decode.kernel_mxfp8 import mxfp8_out_kernel
    from attnkit.reference.mqa_decode import encode_fp8_record
    T, H, H_pad = 2, 3, 4
    g = torch.Generator().manual_seed(11)
    x = torch.randn(T * H, 512, generator=g) * 30
    x[0] = float("nan")  # a whole NaN row
    x[1, 5] = float("nan")  # NaNs beside finite values, one of them the block's largest
    x[1, 40] = -float("nan")
    x[1, 41] = 1000.0
    x[4, 64:96] = float("nan")  # a whole block
    x[5, 511] = -float("nan")
    q8 = torch.full((T, H_pad, 512), 0x5A, dtype=torch.uint8, device=device)
    sc = torch.full((T, H_pad, 16), 0xA5, dtype=torch.uint8, device=device)
    mxfp8_out_kernel[(T * H,)](x.to(device), q8, sc, H, H_pad)
    rec = encode_fp8_record(x).view(T, H, 528)
    nan = torch.isnan(x).view(T, H, 512)
    assert torch.equal(rec[..., :512][nan] & 0x7F, torch.full_like(rec[..., :512][nan], 0x7F))
    assert torch.equal(q8[:, :H].cpu(), rec[..., :512]) and torch.equal(sc[:, :H].cpu(), rec[..., 512:])
    assert (q8[:, H:] == 0x5A).all() and (sc[:, H:] == 0xA5).all()


@pytest.mark.parametrize("kernel", ["headpad", "swapab"])
@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
def test_one_visible_slot_returns_its_record_exactly(kernel, fmt, device):
    """Every byte code, subnormals and extreme block scales included: with one visible slot, no sink and the
    identity rotation, the output is that record decoded (exact in bf16 where the value lies in its range)."""
    from attnkit.mqa_decode import mqa_decode_attention
    from attnkit.reference.mqa_decode import decode_fp8_record, decode_nvfp4_record
    inp = make_inputs(shapes.get("mqa_decode-small-t1-h16-fp8" if fmt == "fp8" else "mqa_decode-small-t2-h32-nvfp4"),
                      device, 5)
    T, H = inp["q"].shape[0], inp["num_heads"]
    cache = inp["comp_cache"].clone()
    flat = cache.view(-1, cache.shape[2])
    g = torch.Generator().manual_seed(0)
    for slot in range(T):
        if fmt == "fp8":
            codes = torch.tensor([c for c in range(256) if c & 0x7F != 0x7F])  # every code but the two NaNs
            rec = torch.cat([codes, codes[torch.randint(0, codes.numel(), (512 - codes.numel(),), generator=g)]])
            rec = rec[torch.randperm(512, generator=g)].to(torch.uint8)
            scales = torch.tensor([0, 1, 100, 120, 127, 127, 130, 134, 135, 140, 127, 126, 90, 127, 150, 127],
                                  dtype=torch.uint8)
            rec = torch.cat([rec, scales])
        else:
            rec = torch.randint(0, 256, (256,), generator=g).to(torch.uint8)
            sc = torch.randint(0, 0x7F, (32,), generator=g).to(torch.uint8)  # finite positive and negative e4m3
            sc[:4] = torch.tensor([0x01, 0x07, 0x08, 0x7E], dtype=torch.uint8)  # subnormal and extreme scales
            rec = torch.cat([rec, sc | (torch.arange(32) % 2 == 0).to(torch.uint8) * 0x80])
        flat[slot, :rec.numel()] = rec.to(device)
    swa = torch.full_like(inp["swa_idx"], -1)
    comp = torch.full_like(inp["comp_idx"], -1)
    comp[:, 0] = torch.arange(T, dtype=torch.int32, device=device)
    cos_sin = torch.zeros(1, 64, device=device)
    cos_sin[:, :32] = 1.0
    out, lse = mqa_decode_attention(inp["q"], inp["swa_cache"], cache, swa, comp, torch.zeros(T, dtype=torch.long,
                                    device=device), cos_sin, torch.full((H,), float("-inf"), device=device), H,
                                    inp["softmax_scale"], fmt, kernel=kernel)
    dec = decode_fp8_record if fmt == "fp8" else decode_nvfp4_record
    want = dec(flat[:T].cpu()).to(torch.bfloat16)[:, None, :].expand(T, H, 512)  # fp64 decode, rounded once
    got = out.cpu()
    from attnkit._runtime import interpreting
    if interpreting():  # Triton's interpreter mangles fp32 -> bf16 below bf16's normal range (docs/testing.md)
        normal = (want.float().abs() >= 2.0 ** -126) | (want == 0)
        got, want = got[normal], want[normal]
    assert torch.equal(got, want), (got.float() - want.float()).abs().max()


def test_caller_buffers_give_the_same_bits_and_are_checked(device):
    """out / lse / workspace given: the same bits as the allocating call, written into those buffers; a
    workspace sized for the layer's largest step serves a smaller one; a short one is refused by name."""
    from attnkit.mqa_decode import mqa_decode_attention, mqa_decode_workspace
    inp = make_inputs(shapes.get("mqa_decode-small-t2-h32-nvfp4"), device, 9)
    T, H = inp["q"].shape[0], inp["num_heads"]
    args = (inp["q"], inp["swa_cache"], inp["comp_cache"], inp["swa_idx"], inp["comp_idx"], inp["positions"],
            inp["cos_sin"], inp["sink"], H, inp["softmax_scale"], inp["comp_format"])
    W, K = inp["swa_idx"].shape[1], inp["comp_idx"].shape[1]
    for kernel in ("headpad", "swapab"):
        a_out, a_lse = mqa_decode_attention(*args, kernel=kernel)
        ws = mqa_decode_workspace(4, H, device, window=W, topk=K, kernel=kernel)
        out = torch.empty(T, H, 512, dtype=torch.bfloat16, device=device)
        lse = torch.empty(T, H, device=device)
        b_out, b_lse = mqa_decode_attention(*args, kernel=kernel, out=out, lse=lse, workspace=ws, validate=False)
        assert b_out.data_ptr() == out.data_ptr() and b_lse.data_ptr() == lse.data_ptr()
        assert torch.equal(a_out, b_out) and torch.equal(a_lse, b_lse)
    with pytest.raises(ValueError, match="workspace"):
        mqa_decode_attention(*args, workspace=torch.empty(10, device=device))
    with pytest.raises(ValueError, match="out"):
        mqa_decode_attention(*args, out=torch.empty(T, H, 512, device=device))


@pytest.mark.parametrize("case", ["mqa_decode-small-t1-h16-fp8", "mqa_decode-small-t2-h32-nvfp4"])
def test_swapab_error_at_most_1p1_of_headpad(case, device):
    """The specified bound: swap-AB's error against fp64 at most 1.1x the head-padded kernel's."""
    inp = make_inputs(shapes.get(case), device, 12)
    ref, _ = mqa_decode_oracle(inp)
    err = {}
    for kernel in ("headpad", "swapab"):
        out, _ = mqa_headpad_call(inp, kernel=kernel)
        d = out.double().cpu() - ref.double().cpu()
        err[kernel] = (d.pow(2).mean().sqrt() / ref.double().cpu().pow(2).mean().sqrt()).item()
    assert err["swapab"] <= 1.1 * err["headpad"] + 1e-6, err


def test_split_rule_fills_whole_waves():
    """A pure function: one resident program per SM, the fewest program-waves of work, ties to fewer splits."""
    from attnkit.mqa_decode.config import headpad_plan, swapab_plan
    # 640 slots = 20 tiles of 32; 132 SMs
    assert swapab_plan(1, 16, 640, 132, None, "cuda").num_splits == 20  # latency: one tile per program
    assert swapab_plan(8, 16, 640, 132, None, "cuda").num_splits == 10  # 80 programs, one wave, 2 tiles each
    assert swapab_plan(16, 32, 640, 132, None, "cuda").num_splits == 7  # 112 programs, 3 tiles each
    assert headpad_plan(64, 64, 640, 132, None, "cuda").num_splits == 2  # 128 programs, 10 tiles each
    assert headpad_plan(16, 64, 640, 132, None, "cuda", out_dc=128).num_splits == 2  # 4 programs per split
    assert swapab_plan(8, 16, 640, 132, 3, "cuda").num_splits == 3  # the override
    for T in (1, 2, 5, 16, 64):
        p = swapab_plan(T, 16, 640, 132, None, "cuda")
        assert p.num_splits * p.slots_per_split >= 640 and (p.num_splits - 1) * p.slots_per_split < 640


def test_ablation_diagnostics_warn_that_results_are_wrong(device, monkeypatch):
    monkeypatch.setenv("ATTNKIT_DIAG_MQA_ABLATE", "3")
    inp = make_inputs(shapes.get("mqa_decode-small-t1-h16-fp8"), device, 2)
    with pytest.warns(RuntimeWarning, match="wrong by design"):
        mqa_headpad_call(inp, kernel="swapab", gluon=False)  # the ablations are the Triton kernel's
    monkeypatch.setenv("ATTNKIT_DIAG_MQA_ABLATE", "5")
    with pytest.raises(ValueError, match="_ablate"):
        mqa_headpad_call(inp, kernel="swapab", gluon=False)


def test_gluon_dispatch_rule_and_plan():
    """With the Gluon kernel (sm_90), swap-AB wins at every measured T for both formats and head counts."""
    from attnkit.mqa_decode.config import swapab_plan, use_swapab
    for fmt in ("fp8", "nvfp4"):
        assert use_swapab(1, 16, fmt, gluon=True) and use_swapab(64, 32, fmt, gluon=True)
        assert not use_swapab(65, 16, fmt, gluon=True) and not use_swapab(1, 64, fmt, gluon=True)
        assert not use_swapab(1, 8, fmt, gluon=True)
    assert use_swapab(16, 32, "nvfp4", gluon=True, cutoff=16) and not use_swapab(17, 32, "nvfp4", gluon=True, cutoff=16)
    # 640 slots = 10 tiles of 64; 8 warps: one resident program per SM; 4 warps: two
    p = swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True)
    assert (p.block_n, p.num_warps, p.num_splits, p.gluon, p.fused_merge, p.gluon_async) == (64, 8, 10, True, False, False)
    assert swapab_plan(16, 16, 640, 132, None, "cuda", gluon=True).num_splits == 5  # 80 programs, 2 tiles each
    assert swapab_plan(16, 16, 640, 132, None, "cuda", gluon=True, gluon_warps=4,
                       gluon_async=False).num_splits == 10  # two resident: 160 programs <= 264
    assert swapab_plan(16, 16, 640, 132, None, "cuda", gluon=True, gluon_warps=4,
                       gluon_async=True).num_splits == 5  # async: one
    assert swapab_plan(16, 16, 640, 132, None, "cuda", gluon=True, fused_merge=True).fused_merge
    # the fused merge by rule where a token has at most two splits (64 tokens: 2; 32: 4; 16: 5)
    assert not swapab_plan(32, 16, 640, 132, None, "cuda", gluon=True).fused_merge
    p64 = swapab_plan(64, 32, 640, 132, None, "cuda", gluon=True)
    assert p64.num_splits == 2 and p64.fused_merge
    assert not swapab_plan(64, 32, 640, 132, None, "cuda", gluon=True, fused_merge=False).fused_merge
    assert not swapab_plan(64, 32, 640, 132, None, "cuda").fused_merge  # the Triton kernel has no fused merge
    with pytest.raises(ValueError, match="gluon_warps"):
        swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, gluon_warps=6)
    with pytest.raises(ValueError, match="gluon_fused"):
        swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, fused_merge="yes")
    with pytest.raises(ValueError, match="gluon_early"):
        swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, gluon_async=True, gluon_early=True)
    early = swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, gluon_early=True)
    assert early.gluon_early and swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True).gluon_early  # the rule: on
    assert not swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, gluon_async=True).gluon_early  # but with async
    assert not swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, gluon_early=False).gluon_early
    from attnkit.mqa_decode.interface import _key
    # the warm-up compiles what a step launches
    assert _key("swapab", 16, early, "fp8")[0] == "swapab_gluon_early_loadsfirst_prologue2_cluster16s10"


def test_gluon_one_loop_option(monkeypatch):
    """gluon_one_loop: the keyword beats ATTNKIT_MQA_GLUON_ONE_LOOP, the default is the rule
    (config.GLUON_ONE_LOOP_BY_RULE), it is refused with gluon_async or without gluon_prefetch, and the compile key
    names it (the warm-up compiles what a step launches)."""
    from attnkit.mqa_decode import config as cfg
    from attnkit.mqa_decode.config import swapab_plan
    from attnkit.mqa_decode.interface import _key
    rule = swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True)
    assert rule.one_loop == cfg.GLUON_ONE_LOOP_BY_RULE
    assert swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True, gluon_one_loop=True).one_loop
    assert not swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True, gluon_one_loop=False).one_loop
    assert not swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True, gluon_async=True).one_loop  # the rule: not async
    monkeypatch.setenv("ATTNKIT_MQA_GLUON_ONE_LOOP", "1")
    one = swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True)
    assert one.one_loop and not swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True, gluon_one_loop=False).one_loop
    assert _key("swapab", 16, one, "fp8")[0] == "swapab_gluon_early_oneloop_loadsfirst_prologue1_cluster16s10"
    monkeypatch.setenv("ATTNKIT_MQA_GLUON_ONE_LOOP", "yes")
    with pytest.raises(ValueError, match="ATTNKIT_MQA_GLUON_ONE_LOOP"):
        swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True)
    monkeypatch.delenv("ATTNKIT_MQA_GLUON_ONE_LOOP")
    with pytest.raises(ValueError, match="gluon_one_loop"):
        swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True, gluon_one_loop=True, gluon_async=True)
    with pytest.raises(ValueError, match="gluon_one_loop"):
        swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True, gluon_one_loop=True, gluon_prefetch=False,
                    gluon_early=False)
    # gluon_loads_first: the keyword, the rule, the key, and refused with gluon_async
    assert swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True).loads_first == cfg.GLUON_LOADS_FIRST_BY_RULE
    lf = swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True, gluon_loads_first=True)
    assert lf.loads_first and _key("swapab", 16, lf, "fp8")[0].split("_prologue")[0].endswith("_loadsfirst")
    assert not swapab_plan(64, 16, 640, 132, None, "cuda", gluon=True).loads_first  # the rule: not with the fused merge
    assert not swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True, gluon_async=True).loads_first
    monkeypatch.setenv("ATTNKIT_MQA_GLUON_LOADS_FIRST", "0")
    assert not swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True).loads_first
    monkeypatch.setenv("ATTNKIT_MQA_GLUON_LOADS_FIRST", "on")
    with pytest.raises(ValueError, match="ATTNKIT_MQA_GLUON_LOADS_FIRST"):
        swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True)
    monkeypatch.delenv("ATTNKIT_MQA_GLUON_LOADS_FIRST")
    with pytest.raises(ValueError, match="gluon_loads_first"):
        swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True, gluon_loads_first=True, gluon_async=True)
    # gluon_prologue: the keyword, the rule, the key, the grammar, and level 2 refused where it cannot run
    # the rule: level 2 where each split is one tile (1-8 tokens at the default lists), else 1
    assert [swapab_plan(T, 16, 640, 132, None, "cuda", gluon=True).prologue for T in (1, 8, 16, 64)] == [2, 2, 1, 1]
    assert swapab_plan(4, 16, 640, 132, 5, "cuda", gluon=True).prologue == 1  # 5 splits of two tiles
    for lvl in (1, 2):
        pro = swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True, gluon_prologue=lvl)
        assert pro.prologue == lvl and f"_prologue{lvl}_" in _key("swapab", 16, pro, "fp8")[0] + "_"
    assert not _key("swapab", 16, swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True, gluon_prologue=0),
                    "fp8")[0].endswith("_prologue0")
    for opts in (dict(pdl_early=True), dict(gluon_async=True), dict(gluon_one_loop=True), dict(gluon_half=True),
                 dict(gluon_early=False)):  # where level 2 cannot run, the rule takes 1
        assert swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True, **opts).prologue == 1, opts
    monkeypatch.setenv("ATTNKIT_MQA_GLUON_PROLOGUE", "1")
    assert swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True).prologue == 1
    assert swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True, gluon_prologue=0).prologue == 0
    for bad in ("3", "-1", "01", "1.0", "two", " 1"):
        monkeypatch.setenv("ATTNKIT_MQA_GLUON_PROLOGUE", bad)
        with pytest.raises(ValueError, match="ATTNKIT_MQA_GLUON_PROLOGUE"):
            swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True)
    monkeypatch.delenv("ATTNKIT_MQA_GLUON_PROLOGUE")
    with pytest.raises(ValueError, match="gluon_prologue"):
        swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True, gluon_prologue=3)
    for opts in (dict(gluon_async=True), dict(gluon_one_loop=True), dict(gluon_half=True), dict(pdl_early=True),
                 dict(gluon_early=False)):
        with pytest.raises(ValueError, match="gluon_prologue"):
            swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True, gluon_prologue=2, **opts)


def test_gluon_cluster_plan(monkeypatch):
    """gluon_cluster: the rule by default (config.gluon_cluster_rule); on, a token's splits run as one cluster of the next power of two of CTAs (at
    least 2, at most 16) and the merge is neither fused nor launched apart; refused with gluon_fused, beyond 16
    splits, and for a bad ATTNKIT_MQA_GLUON_CLUSTER; the compile key names the cluster size."""
    from attnkit.mqa_decode.config import swapab_plan
    from attnkit.mqa_decode.interface import _key
    # the rule: 16 heads x 1-4 tokens, 32 heads x 2-4 (and x 1 token for nvfp4), and 12-20 tokens with the wide-tile
    # rule's tiles (5 splits, clusters of 5: 4 merging), at most 16 splits, not with the fused merge
    for fmt in ("fp8", "nvfp4"):
        assert [swapab_plan(T, 16, 640, 132, None, "cuda", gluon=True, comp_format=fmt).cluster
                for T in (1, 4, 5, 8, 11, 12, 15, 16, 17, 20, 22, 23, 32)] == \
            [4 - (fmt == "nvfp4")] * 2 + [0, 0, 0, 2, 2, 2, 2, 2, 2, 0, 0], fmt
        # (1-4 tokens at 16 heads over nvfp4: exact clusters of 10, 8 merging: gluon_cluster_exact's rule)
        assert swapab_plan(10, 16, 640, 132, None, "cuda", gluon=True, comp_format=fmt).cluster == \
            (2 if fmt == "nvfp4" else 0), fmt  # 10 tokens: wide tiles in clusters over nvfp4 records only
        assert [swapab_plan(T, 32, 640, 132, None, "cuda", gluon=True, comp_format=fmt).cluster
                for T in (1, 2, 4, 5)] == [4 if fmt == "nvfp4" else 0, 4, 4, 0], fmt
    assert swapab_plan(2, 16, 1280, 132, None, "cuda", gluon=True).cluster == 0  # 20 splits
    assert swapab_plan(2, 16, 640, 132, None, "cuda", gluon=True, fused_merge=True).cluster == 0
    assert not swapab_plan(2, 16, 640, 132, None, "cuda", gluon=True, gluon_cluster=True).fused_merge
    # a cluster of one CTA per split (at least 2) up to 8 splits, the largest power of two of them merging; of 16
    # from 9 splits, all merging
    for T, n_slots, splits, ctas, mergers in ((1, 640, 10, 16, 16), (16, 640, 5, 5, 4), (32, 640, 4, 4, 4),
                                              (64, 640, 2, 2, 2), (1, 48, 1, 2, 2), (2, 64, 1, 2, 2)):
        p = swapab_plan(T, 16, n_slots, 132, None, "cuda", gluon=True, gluon_cluster=True)
        assert (p.num_splits, p.cluster_ctas, 1 << p.cluster, p.fused_merge) == (splits, ctas, mergers, False), T
        assert _key("swapab", 16, p, "fp8")[0].endswith(f"_cluster{ctas}s{splits}")
    p = swapab_plan(1, 16, 640, 132, 3, "cuda", gluon=True, gluon_cluster=True)
    assert (p.cluster_ctas, p.cluster) == (3, 1)  # 3 splits: 3 CTAs, 2 merging
    p = swapab_plan(1, 16, 768, 132, 12, "cuda", gluon=True, gluon_cluster=True)
    assert (p.num_splits, p.cluster_ctas, p.cluster) == (12, 16, 4)  # past 8 (the portable size): 16
    with pytest.raises(ValueError, match="gluon_cluster"):
        swapab_plan(64, 16, 640, 132, None, "cuda", gluon=True, gluon_cluster=True, fused_merge=True)
    with pytest.raises(ValueError, match="gluon_cluster"):  # 1280 slots: the split rule gives 20
        swapab_plan(1, 16, 1280, 132, None, "cuda", gluon=True, gluon_cluster=True)
    monkeypatch.setenv("ATTNKIT_MQA_GLUON_CLUSTER", "1")
    assert swapab_plan(1, 32, 640, 132, None, "cuda", gluon=True).cluster == 4
    assert swapab_plan(1, 32, 640, 132, None, "cuda", gluon=True, gluon_cluster=False).cluster == 0
    monkeypatch.setenv("ATTNKIT_MQA_GLUON_CLUSTER", "0")
    assert swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True).cluster == 0
    for bad in ("yes", "2", "true", " 1"):
        monkeypatch.setenv("ATTNKIT_MQA_GLUON_CLUSTER", bad)
        with pytest.raises(ValueError, match="ATTNKIT_MQA_GLUON_CLUSTER"):
            swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True)


def test_gluon_cluster_refused_where_the_triton_kernel_runs(device, monkeypatch):
    """gluon_cluster asked for (keyword or ATTNKIT_MQA_GLUON_CLUSTER) where the Triton swap-AB kernel runs, which
    launches its merge apart: a ValueError naming it, not a silently ignored option; a bad value is refused whichever
    kernel runs; the head-padded kernel ignores it (a Gluon swap-AB option)."""
    inp = make_inputs(shapes.get("mqa_decode-small-t1-h16-fp8"), device, 2)
    with pytest.raises(ValueError, match="gluon_cluster"):
        mqa_headpad_call(inp, kernel="swapab", gluon=False, gluon_cluster=True)
    with pytest.raises(ValueError, match="gluon_cluster"):
        mqa_headpad_call(inp, kernel="headpad", gluon_cluster="yes")
    mqa_headpad_call(inp, kernel="headpad", gluon_cluster=True)
    mqa_headpad_call(inp, kernel="swapab", gluon=False, gluon_cluster=False)
    monkeypatch.setenv("ATTNKIT_MQA_GLUON_CLUSTER", "1")
    with pytest.raises(ValueError, match="gluon_cluster"):
        mqa_headpad_call(inp, kernel="swapab", gluon=False)


def test_gluon_banks_rule(monkeypatch):
    """gluon_banks: on by default for nvfp4 compressed records, off for fp8 (config.GLUON_BANKS's sweep); the keyword
    and ATTNKIT_MQA_GLUON_BANKS override it both ways; never with gluon_async (off by the rule, refused if asked)."""
    import attnkit.mqa_decode.config as C
    monkeypatch.delenv("ATTNKIT_MQA_GLUON_BANKS", raising=False)
    assert C.swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, comp_format="nvfp4").gluon_banks
    assert not C.swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, comp_format="fp8").gluon_banks
    assert not C.swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, comp_format="nvfp4",
                             gluon_banks=False).gluon_banks
    assert C.swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, gluon_banks=True).gluon_banks
    assert not C.swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, comp_format="nvfp4",
                             gluon_async=True).gluon_banks
    with pytest.raises(ValueError, match="gluon_banks"):
        C.swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, gluon_banks=True, gluon_async=True)
    monkeypatch.setenv("ATTNKIT_MQA_GLUON_BANKS", "0")
    assert not C.swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, comp_format="nvfp4").gluon_banks
    monkeypatch.setenv("ATTNKIT_MQA_GLUON_BANKS", "yes")
    with pytest.raises(ValueError, match="gluon_banks"):
        C.swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True)


def test_headpad_stages_option(monkeypatch):
    """headpad_stages: Triton's num_stages for the head-padded kernel, default 1 (the sweep), the keyword over
    ATTNKIT_MQA_HEADPAD_STAGES, 1 to 4, anything else refused by name; the launch key carries it (the warm-up
    compiles what a step launches)."""
    import attnkit.mqa_decode.config as C
    from attnkit.mqa_decode.interface import _key
    monkeypatch.delenv("ATTNKIT_MQA_HEADPAD_STAGES", raising=False)
    p = C.headpad_plan(1, 16, 640, 132, None, "cuda")
    assert p.num_stages == C.HEADPAD_STAGES.default == 1
    assert C.headpad_plan(1, 16, 640, 132, None, "cuda", stages=1).num_stages == 1
    monkeypatch.setenv("ATTNKIT_MQA_HEADPAD_STAGES", "2")
    assert C.headpad_plan(1, 16, 640, 132, None, "cuda").num_stages == 2
    assert C.headpad_plan(1, 16, 640, 132, None, "cuda", stages=1).num_stages == 1
    assert _key("headpad", 16, C.headpad_plan(1, 16, 640, 132, None, "cuda"), "fp8")[-1] == 2
    for bad in ("0", "5", "2.0", " 2"):
        monkeypatch.setenv("ATTNKIT_MQA_HEADPAD_STAGES", bad)
        with pytest.raises(ValueError, match="headpad_stages"):
            C.headpad_plan(1, 16, 640, 132, None, "cuda")
    monkeypatch.delenv("ATTNKIT_MQA_HEADPAD_STAGES")
    with pytest.raises(ValueError, match="headpad_stages"):
        C.headpad_plan(1, 16, 640, 132, None, "cuda", stages=0)


def test_headpad_out_dc_rule(monkeypatch):
    """A pure function (the mqa-headpad-tile sweep): 256 output dims per head-padded program at one token, and at two
    for fp8; 512 otherwise; out_dc and ATTNKIT_MQA_HEADPAD_OUT_DC override it; the workspace follows the rule."""
    import attnkit.mqa_decode.config as C
    from attnkit.mqa_decode.interface import mqa_decode_workspace
    monkeypatch.delenv("ATTNKIT_MQA_HEADPAD_OUT_DC", raising=False)
    assert [C.headpad_out_dc_rule(T, "fp8") for T in (1, 2, 3, 4, 16)] == [256, 256, 512, 512, 512]
    assert [C.headpad_out_dc_rule(T, "nvfp4") for T in (1, 2, 4)] == [256, 512, 512]
    assert C.headpad_plan(1, 16, 640, 132, None, "cuda", comp_format="nvfp4").out_dc == 256
    assert C.headpad_plan(2, 16, 640, 132, None, "cuda", comp_format="nvfp4").out_dc == 512
    assert C.headpad_plan(1, 16, 640, 132, None, "cuda", out_dc=512).out_dc == 512
    monkeypatch.setenv("ATTNKIT_MQA_HEADPAD_OUT_DC", "128")
    assert C.headpad_plan(1, 16, 640, 132, None, "cuda").out_dc == 128
    monkeypatch.delenv("ATTNKIT_MQA_HEADPAD_OUT_DC")
    for fmt in ("fp8", "nvfp4"):
        for T in (1, 2, 3):
            p = C.headpad_plan(T, 64, 640, 132, None, "cuda", comp_format=fmt)
            ws = mqa_decode_workspace(T, 64, "cpu", kernel="headpad", comp_format=fmt)
            sr = p.num_splits * T * 64
            assert ws.numel() >= -(-2 * sr // 4) * 4 + sr * 512 + T


def test_headpad_block_n_option(monkeypatch):
    """headpad_block_n: 16 / 32 / 64 slots per head-padded tile (default 32), splits in units of it; anything else
    refused by name."""
    import attnkit.mqa_decode.config as C
    monkeypatch.delenv("ATTNKIT_MQA_HEADPAD_BLOCK_N", raising=False)
    assert C.headpad_plan(1, 16, 640, 132, None, "cuda").block_n == 32
    p = C.headpad_plan(1, 16, 640, 132, None, "cuda", block_n=16)
    assert p.block_n == 16 and p.slots_per_split % 16 == 0 and p.num_splits * p.slots_per_split >= 640
    monkeypatch.setenv("ATTNKIT_MQA_HEADPAD_BLOCK_N", "64")
    assert C.headpad_plan(1, 16, 640, 132, None, "cuda").block_n == 64
    for bad in ("48", "8", "32.0"):
        monkeypatch.setenv("ATTNKIT_MQA_HEADPAD_BLOCK_N", bad)
        with pytest.raises(ValueError, match="headpad_block_n"):
            C.headpad_plan(1, 16, 640, 132, None, "cuda")


@pytest.mark.parametrize("bn", [16, 64])
def test_headpad_block_n_matches_the_oracle(device, bn):
    """Another tile size covers the same slots: the fp64 oracle by the compare rule (interpreter on a CPU)."""
    case = "mqa_decode-small-t2-h32-nvfp4"
    inp = make_inputs(shapes.get(case), device, 15)
    out, lse = mqa_headpad_call(inp, kernel="headpad", headpad_block_n=bn)
    ref, ref_lse = mqa_decode_oracle(inp)
    base, base_lse = mqa_decode_baseline(inp)
    c = compare(out, ref, base, lse=lse, lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason


@pytest.mark.cuda
@pytest.mark.parametrize("case", ["mqa_decode-small-t1-h16-fp8", "mqa_decode-small-t2-h32-nvfp4",
                                  "mqa_decode-model-t5-h32-nvfp4-partial", "mqa_decode-step-h64-t4-fp8"])
def test_headpad_stages_give_the_same_bits(case):
    """headpad_stages changes how the tile loop's loads are scheduled (cp.async staging or register loads), not its
    arithmetic: the same output and LSE bits at 1, 2 and 3 stages."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (the interpreter ignores num_stages): not a pass")
    inp = make_inputs(shapes.get(case), "cuda", 14)
    a = mqa_headpad_call(inp, kernel="headpad", headpad_stages=3)
    for st in (1, 2):
        b = mqa_headpad_call(inp, kernel="headpad", headpad_stages=st)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), st


def test_gluon_maxnreg_plan(monkeypatch):
    """gluon_maxnreg: registers capped at 128 or fewer let two 8-warp Gluon programs share an SM, and the split rule
    counts them (16 tokens: 10 splits of one tile instead of 5 of two); above 128, at 4 warps or with the cp.async
    buffers the plan is the rule's. The keyword beats ATTNKIT_MQA_GLUON_MAXNREG; bad values are refused by name; the
    launch key and the workspace follow it."""
    import attnkit.mqa_decode.config as C
    from attnkit.mqa_decode.interface import _key, mqa_decode_workspace
    monkeypatch.delenv("ATTNKIT_MQA_GLUON_MAXNREG", raising=False)
    plan = lambda T, **kw: C.swapab_plan(T, 16, 640, 132, None, "cuda", gluon=True, **kw)  # noqa: E731
    rule16, capped16 = plan(16), plan(16, gluon_maxnreg=128)
    assert (rule16.num_splits, rule16.slots_per_split, rule16.maxnreg) == (5, 128, None)
    assert (capped16.num_splits, capped16.slots_per_split, capped16.maxnreg) == (10, 64, 128)
    assert (plan(32, gluon_maxnreg=128).num_splits, plan(32).num_splits) == (5, 4)
    assert plan(4, gluon_maxnreg=128).num_splits == plan(4).num_splits == 10  # one wave either way
    assert plan(16, gluon_maxnreg=168).num_splits == 5  # three programs' registers do not fit two
    assert plan(16, gluon_maxnreg=128, gluon_async=True).num_splits == 5  # nor their shared memory with the copies
    assert plan(16, gluon_maxnreg=128, gluon_warps=4).num_splits == plan(16, gluon_warps=4).num_splits
    assert C.gluon_resident(8, False, 128) == 2 and C.gluon_resident(8, False, None) == 1
    assert "_maxnreg128" in _key("swapab", 16, capped16, "fp8")[0]
    assert "maxnreg" not in _key("swapab", 16, rule16, "fp8")[0]
    monkeypatch.setenv("ATTNKIT_MQA_GLUON_MAXNREG", "128")
    assert plan(16).maxnreg == 128 and plan(16, gluon_maxnreg=200).maxnreg == 200
    ws = mqa_decode_workspace(16, 16, "cpu", kernel="swapab", gluon=True)
    monkeypatch.delenv("ATTNKIT_MQA_GLUON_MAXNREG")
    assert ws.numel() > mqa_decode_workspace(16, 16, "cpu", kernel="swapab", gluon=True).numel()
    assert ws.numel() == mqa_decode_workspace(16, 16, "cpu", kernel="swapab", gluon=True, gluon_maxnreg=128).numel()
    for bad in ("0x80", "128.0", " 128", "+128", "63", "256"):
        monkeypatch.setenv("ATTNKIT_MQA_GLUON_MAXNREG", bad)
        with pytest.raises(ValueError, match="gluon_maxnreg"):
            plan(16)
    monkeypatch.delenv("ATTNKIT_MQA_GLUON_MAXNREG")
    for bad in (True, 12.0, 300):
        with pytest.raises(ValueError, match="gluon_maxnreg"):
            plan(16, gluon_maxnreg=bad)


def test_gluon_half_tile_plan(monkeypatch):
    """gluon_half: 32 live slots per tile, so splits in units of 32 slots (twice the programs at 1-4 tokens); refused
    with gluon_async; the rule (off until GLUON_HALF_BY_RULE) only where one half tile per program fits one wave;
    the launch key says which kernel compiles."""
    from attnkit.mqa_decode import config as C
    from attnkit.mqa_decode.interface import _key
    whole = C.swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True)
    half = C.swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, gluon_half=True)
    assert (whole.live, whole.num_splits, whole.slots_per_split) == (64, 10, 64)
    assert (half.live, half.num_splits, half.slots_per_split, half.block_n) == (32, 20, 32, 64)
    for T in (1, 4, 16, 64):
        p = C.swapab_plan(T, 32, 640, 132, None, "cuda", gluon=True, gluon_half=True)
        assert p.slots_per_split % 32 == 0 and p.num_splits * p.slots_per_split >= 640
        assert (p.num_splits - 1) * p.slots_per_split < 640  # no split without slots
    assert C.swapab_plan(1, 16, 640, 132, 3, "cuda", gluon=True, gluon_half=True).slots_per_split == 224
    with pytest.raises(ValueError, match="gluon_half"):
        C.swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, gluon_half=True, gluon_async=True)
    with pytest.raises(ValueError, match="gluon_half"):
        C.swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, gluon_half="yes")
    assert _key("swapab", 16, half, "fp8")[0] == "swapab_gluon_early_half_loadsfirst_prologue1"
    assert _key("swapab", 16, whole, "fp8")[0] == "swapab_gluon_early_loadsfirst_prologue2_cluster16s10"
    monkeypatch.setattr(C, "GLUON_HALF_BY_RULE", True)
    assert [C.swapab_plan(T, 16, 640, 132, None, "cuda", gluon=True).live for T in (1, 4, 6, 7, 8, 16)] == \
        [32, 32, 32, 64, 64, 128]  # 20 half tiles per token: one wave of 132 programs up to 6 tokens (16: gluon_wide)
    assert C.swapab_plan(4, 16, 640, 132, None, "cuda", gluon=True, gluon_async=True).live == 64
    monkeypatch.setenv("ATTNKIT_MQA_GLUON_HALF", "0")
    assert C.swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True).live == 64  # the variable beats the rule
    assert C.swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, gluon_half=True).live == 32  # the keyword both


def test_gluon_wide_tile_plan(monkeypatch):
    """gluon_wide: 128 slots per tile, so splits in units of 128 slots (16 tokens: the 5 splits of two 64-slot tiles
    become 5 of one wide tile); refused with gluon_async, gluon_half and prologue level 2; the rule (off until
    GLUON_WIDE_TOKENS names a token count: 16, where its sweep won) per head count and format; the launch key says
    which kernel compiles."""
    from attnkit.mqa_decode import config as C
    from attnkit.mqa_decode.interface import _key
    base = C.swapab_plan(16, 16, 640, 132, None, "cuda", gluon=True, gluon_wide=False)
    wide = C.swapab_plan(16, 16, 640, 132, None, "cuda", gluon=True, gluon_wide=True)
    import dataclasses
    rule = C.swapab_plan(16, 16, 640, 132, None, "cuda", gluon=True)
    assert rule == dataclasses.replace(wide, num_warps=16)  # the rule at 16 tokens: fp8 records at 16 warps
    assert C.swapab_plan(16, 16, 640, 132, None, "cuda", gluon=True, comp_format="nvfp4").num_warps == 8  # nvfp4 8
    assert C.swapab_plan(16, 16, 640, 132, None, "cuda", gluon=True, gluon_warps=8) == wide  # the keyword beats it
    assert [C.swapab_plan(T, H, 640, 132, None, "cuda", gluon=True, comp_format=f).live
            for T in (1, 8, 11, 12, 16, 20, 22, 23, 32) for H in (16, 32)
            for f in ("fp8", "nvfp4")] == [64] * 12 + [128] * 16 + [64] * 8
    assert [C.swapab_plan(10, H, 640, 132, None, "cuda", gluon=True, comp_format=f).live
            for H in (16, 32) for f in ("fp8", "nvfp4")] == [64, 128] * 2  # 10 tokens: over nvfp4 records only
    # the rule's wide tiles merge in clusters (of 5, one CTA per split), also where the 64-slot rule has none; at most
    # 22 clusters of 5 are resident at once on the H200, so 23 tokens and more keep 64-slot tiles
    assert [C.swapab_plan(T, 16, 640, 132, None, "cuda", gluon=True).cluster_ctas for T in (11, 12, 20, 22, 23)] == \
        [0, 5, 5, 5, 0]
    assert C.swapab_plan(12, 16, 640, 132, None, "cuda", gluon=True, gluon_wide=False).cluster_ctas == 0
    assert (base.block_n, base.live, base.num_splits, base.slots_per_split) == (64, 64, 5, 128)
    assert (wide.block_n, wide.live, wide.num_splits, wide.slots_per_split) == (128, 128, 5, 128)
    assert (wide.cluster_ctas, wide.prologue) == (5, 1)  # the cluster merge as the rule's; level 2 needs 64 slots
    for T in (1, 4, 16, 32, 64):
        p = C.swapab_plan(T, 32, 640, 132, None, "cuda", gluon=True, gluon_wide=True)
        assert p.slots_per_split % 128 == 0 and p.num_splits * p.slots_per_split >= 640
        assert (p.num_splits - 1) * p.slots_per_split < 640  # no split without slots
    assert C.swapab_plan(1, 16, 640, 132, 2, "cuda", gluon=True, gluon_wide=True).slots_per_split == 384
    # 16 warps (four warpgroups): wide tiles only
    w16 = C.swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, gluon_warps=16)
    assert (w16.live, w16.num_warps, w16.num_splits) == (128, 16, 5)
    for bad in (dict(gluon_wide=False), dict(gluon_async=True), dict(gluon_half=True)):
        with pytest.raises(ValueError, match="gluon_warps"):
            C.swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, gluon_warps=16, **bad)
    with pytest.raises(ValueError, match="gluon_warps"):
        C.swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, gluon_warps=12)
    # the rule was timed at 8 warps, one program per SM: not where two fit (4 warps, registers capped), and a wide
    # program's shared memory fits one per SM, which its split rule counts (64 tokens: 2 splits, as at 8 warps)
    for kw in (dict(gluon_warps=4), dict(gluon_maxnreg=128)):
        assert C.swapab_plan(16, 16, 640, 132, None, "cuda", gluon=True, **kw).live == 64
        w = C.swapab_plan(64, 16, 640, 132, None, "cuda", gluon=True, gluon_wide=True, **kw)
        assert (w.live, w.num_splits) == (128, 2)
    for bad in (dict(gluon_async=True), dict(gluon_half=True)):
        with pytest.raises(ValueError, match="gluon_wide"):
            C.swapab_plan(16, 16, 640, 132, None, "cuda", gluon=True, gluon_wide=True, **bad)
    with pytest.raises(ValueError, match="gluon_prologue"):
        C.swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, gluon_wide=True, gluon_prologue=2)
    with pytest.raises(ValueError, match="gluon_one_loop"):
        C.swapab_plan(16, 16, 640, 132, None, "cuda", gluon=True, gluon_wide=True, gluon_one_loop=True)
    # options defined over 64-slot tiles asked for at 16 tokens: the rule steps aside (64-slot tiles, 8 warps)
    for kw in (dict(gluon_one_loop=True), dict(gluon_prologue=2)):
        p = C.swapab_plan(16, 16, 640, 132, None, "cuda", gluon=True, **kw)
        assert (p.live, p.num_warps) == (64, 8), kw
    with pytest.raises(ValueError, match="gluon_wide"):
        C.swapab_plan(16, 16, 640, 132, None, "cuda", gluon=True, gluon_wide="2")
    k_wide, k_base = _key("swapab", 16, wide, "fp8"), _key("swapab", 16, base, "fp8")
    assert k_wide[0] == k_base[0] and (k_wide[2], k_base[2]) == (128, 64)  # BLOCK_N is in the key
    monkeypatch.setattr(C, "GLUON_WIDE_TOKENS", {(16, "nvfp4"): (8,)})
    assert [C.swapab_plan(T, 16, 640, 132, None, "cuda", gluon=True, comp_format=f).live
            for T, f in ((8, "nvfp4"), (16, "nvfp4"), (8, "fp8"))] == [128, 64, 64]
    assert C.swapab_plan(8, 16, 640, 132, None, "cuda", gluon=True, comp_format="nvfp4", gluon_async=True).live == 64
    monkeypatch.setenv("ATTNKIT_MQA_GLUON_WIDE", "0")
    assert C.swapab_plan(8, 16, 640, 132, None, "cuda", gluon=True, comp_format="nvfp4").live == 64  # env beats rule
    assert C.swapab_plan(16, 16, 640, 132, None, "cuda", gluon=True, gluon_wide=True).live == 128  # keyword beats env


def test_gluon_option_is_checked(device, monkeypatch):
    from attnkit._runtime import gluon_runs
    inp = make_inputs(shapes.get("mqa_decode-small-t1-h16-fp8"), device, 2)
    with pytest.raises(ValueError, match="gluon"):
        mqa_headpad_call(inp, kernel="swapab", gluon="true")
    monkeypatch.setenv("ATTNKIT_MQA_GLUON", "01")
    with pytest.raises(ValueError, match="ATTNKIT_MQA_GLUON"):
        mqa_headpad_call(inp, kernel="swapab")
    monkeypatch.delenv("ATTNKIT_MQA_GLUON")
    if not gluon_runs(torch.device(device)):
        with pytest.raises(ValueError, match="gluon: the Gluon swap-AB kernel runs on CUDA sm_90"):
            mqa_headpad_call(inp, kernel="swapab", gluon=True)


def _gluon_or_skip():
    from attnkit._runtime import gluon_runs
    if not gluon_runs(torch.device("cuda")):
        pytest.skip("needs an sm_90 GPU (the Gluon kernel): not a pass")


@pytest.mark.cuda
@pytest.mark.parametrize("warps,fused,asy", [(4, False, False), (8, False, False), (4, True, False), (8, True, True),
                                             (8, False, True), (4, False, True)])
@pytest.mark.parametrize("case", ["mqa_decode-small-t1-h16-fp8", "mqa_decode-small-t2-h32-nvfp4",
                                  "mqa_decode-model-t5-h32-nvfp4-partial"])
def test_gluon_matches_the_triton_twin(case, warps, fused, asy):
    """The Gluon kernel (any warps, merge fused or not, records copied by cp.async or loaded) against its interpreter
    twin, the Triton swap-AB kernel:
    within a bf16 rounding of each other (the fp32 sums differ in order), repeatable to the bit."""
    _gluon_or_skip()
    inp = make_inputs(shapes.get(case), "cuda", 7)
    t_out, t_lse = mqa_headpad_call(inp, kernel="swapab", gluon=False)
    g = [mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_warps=warps, gluon_fused=fused, gluon_async=asy)
         for _ in range(2)]
    assert torch.equal(g[0][0], g[1][0]) and torch.equal(g[0][1], g[1][1])
    assert (g[0][0].float() - t_out.float()).abs().max() <= 2 * t_out.float().abs().max() * 2 ** -8
    torch.testing.assert_close(g[0][1], t_lse, rtol=1e-5, atol=1e-5)


@pytest.mark.cuda
@pytest.mark.parametrize("asy", [False, True])
@pytest.mark.parametrize("case", ["mqa_decode-small-t2-h32-nvfp4", "mqa_decode-model-t5-h32-nvfp4-partial"])
def test_gluon_e2m1_bits_gives_the_same_bits(case, asy):
    """The nvfp4 decode from bits (gluon_e2m1_bits) decodes every value to the same bf16 as the default decode, so
    the kernel's output and LSE are the same bits."""
    _gluon_or_skip()
    inp = make_inputs(shapes.get(case), "cuda", 3)
    a = mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_async=asy)
    b = mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_async=asy, gluon_e2m1_bits=True)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.cuda
@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("case", ["mqa_decode-small-t1-h16-fp8", "mqa_decode-small-t2-h32-nvfp4",
                                  "mqa_decode-model-t5-h32-nvfp4-partial"])
def test_gluon_early_slot_ids_give_the_same_bits(case, fused):
    """gluon_early loads the first tiles' slot ids before the query instead of after its prologue: the same tiles in
    the same order, so the same output and LSE bits; without gluon_prefetch it is refused."""
    _gluon_or_skip()
    inp = make_inputs(shapes.get(case), "cuda", 5)
    a = mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_fused=fused)
    b = mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_fused=fused, gluon_early=True)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    with pytest.raises(ValueError, match="gluon_early"):
        mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_early=True, gluon_prefetch=False)


@pytest.mark.cuda
@pytest.mark.parametrize("opts", [dict(), dict(gluon_fused=True), dict(gluon_half=True), dict(gluon_one_loop=True),
                                  dict(num_splits=3)])
@pytest.mark.parametrize("case", ["mqa_decode-small-t1-h16-fp8", "mqa_decode-small-t2-h32-nvfp4",
                                  "mqa_decode-model-t5-h32-nvfp4-partial", "mqa_decode-step-h16-t4-fp8"])
def test_gluon_loads_first_gives_the_same_bits(case, opts):
    """gluon_loads_first issues a tile's record loads before its first store: the same values decoded into the
    same tile, so the same output and LSE bits; refused with gluon_async."""
    _gluon_or_skip()
    inp = make_inputs(shapes.get(case), "cuda", 11)
    a = mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_loads_first=False, **opts)
    b = mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_loads_first=True, **opts)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    with pytest.raises(ValueError, match="gluon_loads_first"):
        mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_loads_first=True, gluon_async=True)


@pytest.mark.cuda
@pytest.mark.parametrize("opts", [dict(), dict(gluon_fused=True), dict(gluon_loads_first=False), dict(num_splits=1),
                                  dict(num_splits=3), dict(num_splits=7)])
@pytest.mark.parametrize("case", ["mqa_decode-small-t1-h16-fp8", "mqa_decode-small-t2-h32-nvfp4",
                                  "mqa_decode-model-t5-h32-nvfp4-partial", "mqa_decode-step-h16-t4-fp8",
                                  "mqa_decode-step-h32-t16-nvfp4"])
def test_gluon_prologue_gives_the_same_bits(case, opts):
    """gluon_prologue 1 / 2 issue the query's loads (2: and the split's first tile's records) before the query is
    stored: the same values in the same tiles and order, so the same output and LSE bits as level 0 (splits of
    one, three and seven tiles: a first tile in the window list, in the compressed list, and splits that span
    both); level 2 refused with gluon_async."""
    _gluon_or_skip()
    inp = make_inputs(shapes.get(case), "cuda", 13)
    a = mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_prologue=0, gluon_wide=False, **opts)
    for lvl in (1, 2):  # (64-slot tiles: level 2 does not run on wide ones, the rule's at 16 tokens)
        b = mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_prologue=lvl, gluon_wide=False, **opts)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), lvl
    with pytest.raises(ValueError, match="gluon_prologue"):
        mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_prologue=2, gluon_async=True)


@pytest.mark.cuda
@pytest.mark.parametrize("opts", [dict(), dict(gluon_fused=True), dict(gluon_half=True), dict(gluon_early=False),
                                  dict(num_splits=1), dict(num_splits=3)])
@pytest.mark.parametrize("case", ["mqa_decode-small-t1-h16-fp8", "mqa_decode-small-t2-h32-nvfp4",
                                  "mqa_decode-model-t5-h32-nvfp4-partial", "mqa_decode-step-h16-t4-fp8",
                                  "mqa_decode-step-h32-t16-nvfp4"])
def test_gluon_one_loop_gives_the_same_bits(case, opts):
    """gluon_one_loop walks both lists' tiles in one loop: the same tiles in the same order (splits that start in
    either list, span both or hold one), so the same output and LSE bits as a loop per list; refused without
    gluon_prefetch or with gluon_async."""
    _gluon_or_skip()
    inp = make_inputs(shapes.get(case), "cuda", 7)
    a = mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_one_loop=False, gluon_wide=False, **opts)
    b = mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_one_loop=True, gluon_wide=False, **opts)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    for bad in (dict(gluon_prefetch=False), dict(gluon_async=True)):
        with pytest.raises(ValueError, match="gluon_one_loop"):
            mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_one_loop=True, **bad)


@pytest.mark.cuda
@pytest.mark.parametrize("opts", [dict(), dict(gluon_cluster=False), dict(gluon_cluster_exact=False)])
@pytest.mark.parametrize("case", ["mqa_decode-step-h16-t1-nvfp4", "mqa_decode-step-h16-t1-fp8",
                                  "mqa_decode-step-h32-t2-nvfp4", "mqa_decode-step-h32-t4-fp8",
                                  "mqa_decode-model-t5-h32-nvfp4-partial", "mqa_decode-small-t1-h16-fp8"])
def test_gluon_one_tile_gives_the_same_bits(case, opts):
    """gluon_one_tile compiles out the list loops where every split is one tile of one list: the same bits as the
    kernel with them, in the cluster merge and with the merge launched apart, its key named where it applies and
    absent where a window list that is not a multiple of 64 puts two lists' tiles in one split (the option then
    changes nothing); at these cases the split rule gives 64 slots a split."""
    _gluon_or_skip()
    from attnkit.mqa_decode.interface import LAUNCHED_KEYS
    inp = make_inputs(shapes.get(case), "cuda", 29)
    a = mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_one_tile=False, **opts)
    n0 = len(LAUNCHED_KEYS)
    b = mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_one_tile=True, **opts)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    applies = inp["swa_idx"].shape[1] % 64 == 0  # (the small case's 16-slot window: its one split spans both lists)
    assert any("_onetile" in k[0] for k in LAUNCHED_KEYS[n0:]) == applies, (case, LAUNCHED_KEYS[n0:])


def test_gluon_one_tile_option_grammar(monkeypatch):
    from attnkit.mqa_decode.config import GLUON_ONE_TILE
    assert GLUON_ONE_TILE.resolve(None) is False and GLUON_ONE_TILE.resolve(True) is True
    monkeypatch.setenv("ATTNKIT_MQA_GLUON_ONE_TILE", "1")
    assert GLUON_ONE_TILE.resolve(None) is True and GLUON_ONE_TILE.resolve(False) is False
    monkeypatch.setenv("ATTNKIT_MQA_GLUON_ONE_TILE", "true")
    with pytest.raises(ValueError, match="ATTNKIT_MQA_GLUON_ONE_TILE"):
        GLUON_ONE_TILE.resolve(None)


@pytest.mark.cuda
@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("case", ["mqa_decode-small-t1-h16-fp8", "mqa_decode-small-t2-h32-nvfp4",
                                  "mqa_decode-model-t5-h32-nvfp4-partial", "mqa_decode-step-h16-t4-fp8"])
def test_gluon_half_tiles_match_whole_tiles(case, fused):
    """gluon_half (32 live slots in each 64-row MMA tile, the other rows zero) against whole tiles: the same slots in
    other splits, so within a bf16 rounding of each other; repeatable to the bit; and against the fp64 oracle by
    the compare rule (the gate mqa_decode/gluon_swapab_half runs every shape family)."""
    _gluon_or_skip()
    inp = make_inputs(shapes.get(case), "cuda", 11)
    whole = mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_fused=fused)
    half = [mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_fused=fused, gluon_half=True) for _ in range(2)]
    assert torch.equal(half[0][0], half[1][0]) and torch.equal(half[0][1], half[1][1])
    assert (half[0][0].float() - whole[0].float()).abs().max() <= 2 * whole[0].float().abs().max() * 2 ** -8
    torch.testing.assert_close(half[0][1], whole[1], rtol=1e-5, atol=1e-5)
    ref, ref_lse = mqa_decode_oracle(inp)
    base, base_lse = mqa_decode_baseline(inp)
    c = compare(half[0][0], ref, base, lse=half[0][1], lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason


@pytest.mark.cuda
@pytest.mark.parametrize("opts", [dict(), dict(gluon_fused=True), dict(gluon_cluster=True), dict(num_splits=2),
                                  dict(gluon_loads_first=False), dict(gluon_cluster=False), dict(gluon_warps=16),
                                  dict(gluon_warps=16, num_splits=2, gluon_cluster=False)])
@pytest.mark.parametrize("case", ["mqa_decode-small-t1-h16-fp8", "mqa_decode-small-t2-h32-nvfp4",
                                  "mqa_decode-model-t5-h32-nvfp4-partial", "mqa_decode-step-h16-t16-fp8",
                                  "mqa_decode-step-h32-t16-nvfp4"])
def test_gluon_wide_tiles_match_64_slot_tiles(case, opts):
    """gluon_wide (128-slot tiles: one softmax over two 64-slot tiles' scores) against 64-slot tiles: the same slots
    in other steps of the online softmax, so within a bf16 rounding of each other; repeatable to the bit; against the
    fp64 oracle by the compare rule (the gate mqa_decode/gluon_swapab_wide runs every shape family). The small cases'
    lists are shorter than a tile (rows past them masked); splits of one and of three wide tiles."""
    _gluon_or_skip()
    inp = make_inputs(shapes.get(case), "cuda", 13)
    base = mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_wide=False,
                            **{k: v for k, v in opts.items() if k != "gluon_warps"})
    wide = [mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_wide=True, **opts) for _ in range(2)]
    assert torch.equal(wide[0][0], wide[1][0]) and torch.equal(wide[0][1], wide[1][1])
    assert (wide[0][0].float() - base[0].float()).abs().max() <= 2 * base[0].float().abs().max() * 2 ** -8
    torch.testing.assert_close(wide[0][1], base[1], rtol=1e-5, atol=1e-5)
    ref, ref_lse = mqa_decode_oracle(inp)
    b, b_lse = mqa_decode_baseline(inp)
    c = compare(wide[0][0], ref, b, lse=wide[0][1], lse_ref=ref_lse, lse_base=b_lse)
    assert c.ok, c.reason


@pytest.mark.cuda
@pytest.mark.parametrize("case", ["mqa_decode-small-t1-h16-fp8", "mqa_decode-small-t2-h32-nvfp4",
                                  "mqa_decode-model-t5-h32-nvfp4-partial", "mqa_decode-step-h16-t4-fp8"])
def test_gluon_banks_gives_the_same_bits(case):
    """gluon_banks changes only which thread loads, decodes and stores which record bytes: the decoded tile in shared
    memory, and so every result, is the same to the bit; refused with gluon_async."""
    _gluon_or_skip()
    inp = make_inputs(shapes.get(case), "cuda", 12)
    a = mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_banks=False)
    b = mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_banks=True)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    with pytest.raises(ValueError, match="gluon_banks"):
        mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_banks=True, gluon_async=True)


@pytest.mark.cuda
@pytest.mark.parametrize("case", ["mqa_decode-small-t1-h16-fp8", "mqa_decode-small-t2-h32-nvfp4",
                                  "mqa_decode-model-t5-h32-nvfp4-partial", "mqa_decode-step-h16-t16-fp8"])
def test_gluon_maxnreg_gives_the_same_bits(case):
    """Registers capped (gluon_maxnreg) change where values live, not what is computed: at the rule's split count the
    same bits; with the split rule counting two programs per SM (more splits at 16 tokens) within a bf16 rounding of
    the rule, repeatable to the bit, and right by the oracle's compare rule."""
    _gluon_or_skip()
    from attnkit.mqa_decode.config import swapab_plan
    inp = make_inputs(shapes.get(case), "cuda", 13)
    T, H = inp["q"].shape[0], inp["num_heads"]
    S = swapab_plan(T, H, inp["swa_idx"].shape[1] + inp["comp_idx"].shape[1],
                    torch.cuda.get_device_properties(0).multi_processor_count, None, "cuda", gluon=True,
                    gluon_wide=False).num_splits
    # 64-slot tiles both (a capped program is not a wide one: the rule's at 16 tokens)
    a = mqa_headpad_call(inp, kernel="swapab", gluon=True, num_splits=S, gluon_wide=False)
    b = mqa_headpad_call(inp, kernel="swapab", gluon=True, num_splits=S, gluon_maxnreg=128)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    c = [mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_maxnreg=128) for _ in range(2)]
    assert torch.equal(c[0][0], c[1][0]) and torch.equal(c[0][1], c[1][1])
    assert (c[0][0].float() - a[0].float()).abs().max() <= 2 * a[0].float().abs().max() * 2 ** -8
    ref, ref_lse = mqa_decode_oracle(inp)
    base, base_lse = mqa_decode_baseline(inp)
    r = compare(c[0][0], ref, base, lse=c[0][1], lse_ref=ref_lse, lse_base=base_lse)
    assert r.ok, r.reason


@pytest.mark.cuda
def test_gluon_fused_merge_replays_and_leaves_its_counters_at_zero():
    """The fused merge's arrival counters live at the end of the caller's workspace and are reset by each launch:
    graph replays give the eager bits, also after the inputs change in place."""
    _gluon_or_skip()
    from attnkit.mqa_decode import mqa_decode_attention
    from attnkit.mqa_decode.interface import mqa_decode_workspace
    inp = make_inputs(shapes.get("mqa_decode-model-t5-h32-nvfp4-partial"), "cuda", 8)
    T, H = inp["q"].shape[0], inp["num_heads"]
    ws = mqa_decode_workspace(T, H, "cuda", window=inp["swa_idx"].shape[1], topk=inp["comp_idx"].shape[1],
                              kernel="swapab", comp_format="nvfp4", gluon=True)
    out = torch.empty(T, H, 512, dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(T, H, device="cuda")
    args = (inp["q"], inp["swa_cache"], inp["comp_cache"], inp["swa_idx"], inp["comp_idx"], inp["positions"],
            inp["cos_sin"], inp["sink"], H, inp["softmax_scale"], "nvfp4")
    kw = dict(kernel="swapab", gluon=True, gluon_fused=True, validate=False, out=out, lse=lse, workspace=ws)
    mqa_decode_attention(*args, **kw)
    ref = out.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mqa_decode_attention(*args, **kw)
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, ref)
    inp["q"].mul_(0.5)
    graph.replay()
    eager, _ = mqa_decode_attention(*args, kernel="swapab", gluon=True, gluon_fused=True)
    assert torch.equal(out, eager)
    assert bool((ws[-T:].view(torch.int32) == 0).all())


@pytest.mark.cuda
@pytest.mark.parametrize("case", ["mqa_decode-small-t1-h16-fp8", "mqa_decode-small-t2-h32-nvfp4",
                                  "mqa_decode-model-t5-h32-nvfp4-partial", "mqa_decode-step-h16-t16-fp8",
                                  "mqa_decode-step-h32-t1-nvfp4"])
def test_gluon_cluster_merge_matches_the_merge_kernel(case):
    """gluon_cluster (the splits of a token one thread-block cluster that merges them after a cluster barrier) against
    the same kernel with the merge launched apart: the same partials summed in another order, so within a bf16
    rounding; the fp32 output and LSE within fp32 rounding; repeatable to the bit; no merge launch; and right by the
    oracle's compare rule."""
    _gluon_or_skip()
    from attnkit.mqa_decode.interface import LAUNCHED_KEYS
    inp = make_inputs(shapes.get(case), "cuda", 17)
    apart = mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_fused=False)
    n0 = len(LAUNCHED_KEYS)
    cl = [mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_cluster=True) for _ in range(2)]
    keys = LAUNCHED_KEYS[n0:]
    assert len(keys) == 2 and all("_cluster" in k[0] for k in keys), keys
    assert torch.equal(cl[0][0], cl[1][0]) and torch.equal(cl[0][1], cl[1][1])
    assert (cl[0][0].float() - apart[0].float()).abs().max() <= 2 * apart[0].float().abs().max() * 2 ** -8
    torch.testing.assert_close(cl[0][1], apart[1], rtol=1e-5, atol=1e-5)
    ref, ref_lse = mqa_decode_oracle(inp)
    base, base_lse = mqa_decode_baseline(inp)
    c = compare(cl[0][0], ref, base, lse=cl[0][1], lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason


def test_gluon_cluster_exact_plan(monkeypatch):
    """gluon_cluster_exact: 9 to 15 splits a token one CTA per split (a non-portable cluster size), 8 merging; up to
    8 and at 16 splits the same clusters as without it; by default the rule (16 heads over nvfp4 records); refused
    without the cluster merge and, by keyword, where the Triton swap-AB kernel runs; the compile key names the
    cluster size."""
    from attnkit.mqa_decode.config import cluster_size, swapab_plan
    from attnkit.mqa_decode.interface import _key
    assert [cluster_size(s, True) for s in (1, 5, 8, 9, 10, 15, 16)] == \
        [(2, 1), (5, 2), (8, 3), (9, 3), (10, 3), (15, 3), (16, 4)]
    assert [cluster_size(s) for s in (9, 10, 15)] == [(16, 4)] * 3
    p = swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, gluon_cluster_exact=True)
    assert (p.num_splits, p.cluster_ctas, p.cluster) == (10, 10, 3)
    assert _key("swapab", 16, p, "fp8")[0].endswith("_cluster10s10")
    # the rule: at 16 heads over nvfp4 records; clusters of 16 elsewhere
    assert [swapab_plan(T, H, 640, 132, None, "cuda", gluon=True, comp_format=f).cluster_ctas
            for T, H, f in ((1, 16, "fp8"), (1, 16, "nvfp4"), (4, 16, "nvfp4"), (1, 32, "nvfp4"), (2, 32, "fp8"))] \
        == [16, 10, 10, 16, 16]
    assert swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, comp_format="nvfp4",
                       gluon_cluster_exact=False).cluster_ctas == 16
    assert swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, comp_format="nvfp4", gluon_cluster=False).cluster == 0
    assert swapab_plan(16, 16, 640, 132, None, "cuda", gluon=True, gluon_cluster_exact=True).cluster_ctas == 5
    with pytest.raises(ValueError, match="gluon_cluster_exact"):  # 32 heads x 1 token fp8: no cluster by the rule
        swapab_plan(1, 32, 640, 132, None, "cuda", gluon=True, gluon_cluster_exact=True)
    with pytest.raises(ValueError, match="gluon_cluster_exact"):
        swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True, gluon_cluster=False, gluon_cluster_exact=True)
    with pytest.raises(ValueError, match="gluon_cluster_exact"):
        swapab_plan(1, 16, 640, 132, None, "cuda", gluon=False, gluon_cluster_exact=True)
    swapab_plan(1, 16, 640, 132, None, "cuda", gluon=False, gluon_cluster_exact=False)
    monkeypatch.setenv("ATTNKIT_MQA_GLUON_CLUSTER_EXACT", "1")
    assert swapab_plan(2, 16, 640, 132, None, "cuda", gluon=True).cluster_ctas == 10
    assert swapab_plan(2, 16, 640, 132, None, "cuda", gluon=True, gluon_cluster_exact=False).cluster_ctas == 16
    for bad in ("yes", "2", "true", " 1"):
        monkeypatch.setenv("ATTNKIT_MQA_GLUON_CLUSTER_EXACT", bad)
        with pytest.raises(ValueError, match="ATTNKIT_MQA_GLUON_CLUSTER_EXACT"):
            swapab_plan(1, 16, 640, 132, None, "cuda", gluon=True)


@pytest.mark.cuda
@pytest.mark.parametrize("case", ["mqa_decode-step-h16-t1-fp8", "mqa_decode-step-h32-t2-nvfp4",
                                  "mqa_decode-step-h16-t4-nvfp4"])
def test_gluon_cluster_exact_matches_clusters_of_16(case):
    """gluon_cluster_exact (10 splits a token in non-portable clusters of 10, 8 merging) against clusters of 16 (all
    merging): the same partials merged in other slices, so within a bf16 rounding and the LSE within fp32 rounding;
    repeatable to the bit, eagerly and in CUDA-graph replays; right by the oracle's compare rule."""
    _gluon_or_skip()
    from attnkit.mqa_decode.interface import LAUNCHED_KEYS
    inp = make_inputs(shapes.get(case), "cuda", 23)
    c16 = mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_cluster=True)
    n0 = len(LAUNCHED_KEYS)
    ex = [mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_cluster=True, gluon_cluster_exact=True)
          for _ in range(2)]
    assert all("_cluster10s10" in k[0] for k in LAUNCHED_KEYS[n0:]), LAUNCHED_KEYS[n0:]
    assert torch.equal(ex[0][0], ex[1][0]) and torch.equal(ex[0][1], ex[1][1])
    assert (ex[0][0].float() - c16[0].float()).abs().max() <= 2 * c16[0].float().abs().max() * 2 ** -8
    torch.testing.assert_close(ex[0][1], c16[1], rtol=1e-5, atol=1e-5)
    ref, ref_lse = mqa_decode_oracle(inp)
    base, base_lse = mqa_decode_baseline(inp)
    c = compare(ex[0][0], ref, base, lse=ex[0][1], lse_ref=ref_lse, lse_base=base_lse)
    assert c.ok, c.reason
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        got = mqa_headpad_call(inp, kernel="swapab", gluon=True, gluon_cluster=True, gluon_cluster_exact=True,
                               validate=False)
    for _ in range(2):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(got[0], ex[0][0]) and torch.equal(got[1], ex[0][1])


@pytest.mark.cuda
@pytest.mark.parametrize("case,kernel", [("mqa_decode-model-t1-h16-fp8", "swapab"),
                                         ("mqa_decode-model-t5-h32-nvfp4-partial", "swapab"),
                                         ("mqa_decode-model-t1-h16-fp8", "headpad")])
def test_writer_release_early_steps_give_the_same_bits(case, kernel):
    """writer_release_early (the writer releases the attention before it waits): three steps in a row, each writing
    its own latents and attending over them, captured in one CUDA graph and replayed, give the same outputs, LSEs
    and cache bytes as the same steps without the option, eager; after the latents and q change in place too; and
    a step whose writer stores nothing differs (the comparison can fail)."""
    from attnkit.mqa_decode import mqa_decode_step
    if not torch.cuda.get_device_capability()[0] >= 9:
        pytest.skip("programmatic dependent launch needs sm_90+ (not a pass)")
    inp = make_inputs(shapes.get(case), "cuda", 23)
    T = inp["q"].shape[0]
    slot = distinct_window_slots(inp["swa_idx"])
    g = torch.Generator().manual_seed(5)
    lats = [(torch.randn(T, 512, generator=g) * 2).bfloat16().cuda() for _ in range(3)]
    args = (inp["swa_cache"], inp["comp_cache"], inp["swa_idx"], inp["comp_idx"], inp["positions"], inp["cos_sin"],
            inp["sink"], inp["num_heads"], inp["softmax_scale"], inp["comp_format"])
    cache0 = inp["swa_cache"].clone()

    def steps(**kw):
        return [mqa_decode_step(lat, slot, inp["q"], *args, kernel=kernel, validate=False, pdl=True, **kw)
                for lat in lats]

    def expected():
        inp["swa_cache"].copy_(cache0)
        outs = [tuple(x.clone() for x in o) for o in steps()]
        return outs, inp["swa_cache"].clone()

    ref, ref_cache = expected()
    inp["swa_cache"].copy_(cache0)
    steps(writer_release_early=True)  # compiles the writer variant outside the capture
    graph = torch.cuda.CUDAGraph()
    inp["swa_cache"].copy_(cache0)
    with torch.cuda.graph(graph):
        got = steps(writer_release_early=True)
    for _ in range(2):
        inp["swa_cache"].copy_(cache0)
        graph.replay()
        torch.cuda.synchronize()
        assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(got, ref))
        assert torch.equal(inp["swa_cache"], ref_cache)
    for lat in lats:
        lat.mul_(-0.75)
    inp["q"].mul_(0.5)
    ref, ref_cache = expected()
    inp["swa_cache"].copy_(cache0)
    graph.replay()
    torch.cuda.synchronize()
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(got, ref))
    assert torch.equal(inp["swa_cache"], ref_cache)
    inp["swa_cache"].copy_(cache0)
    none = torch.full_like(slot, -1)
    bad = mqa_decode_step(lats[0], none, inp["q"], *args, kernel=kernel, validate=False, pdl=True,
                          writer_release_early=True)
    assert not torch.equal(bad[0], ref[0][0])


def test_writer_release_early_option(device, monkeypatch):
    """writer_release_early's grammar (ATTNKIT_MQA_WRITER_RELEASE_EARLY takes exactly "0" / "1"), off by default;
    without pdl (any CPU) it changes nothing: the same bytes."""
    from attnkit.mqa_decode import mqa_write_records
    from attnkit.mqa_decode.config import WRITER_RELEASE_EARLY
    assert WRITER_RELEASE_EARLY.default is False
    inp = make_inputs(shapes.get("mqa_decode-small-t2-h32-nvfp4"), device, 4)
    lat = inp["q"][:, 0].contiguous()
    slot = distinct_window_slots(inp["swa_idx"])
    a, b = inp["swa_cache"].clone(), inp["swa_cache"].clone()
    mqa_write_records(lat, inp["positions"], inp["cos_sin"], slot, a, "fp8", pdl=False)
    mqa_write_records(lat, inp["positions"], inp["cos_sin"], slot, b, "fp8", pdl=False, release_early=True)
    assert torch.equal(a, b)
    monkeypatch.setenv("ATTNKIT_MQA_WRITER_RELEASE_EARLY", "on")
    with pytest.raises(ValueError, match="ATTNKIT_MQA_WRITER_RELEASE_EARLY"):
        mqa_write_records(lat, inp["positions"], inp["cos_sin"], slot, b, "fp8", pdl=False)


@pytest.mark.cuda
def test_gluon_cluster_merge_replays_in_a_step():
    """The clustered attention captured as a step launches it (programmatic dependent launch, the query prepared
    before the wait, the caller's workspace) replays to the eager bits, also after the inputs change in place; the
    cluster merge writes the fp32 output (the MXFP8 path's input) too."""
    _gluon_or_skip()
    from attnkit.mqa_decode import mqa_decode_attention
    from attnkit.mqa_decode.interface import mqa_decode_workspace
    inp = make_inputs(shapes.get("mqa_decode-model-t5-h32-nvfp4-partial"), "cuda", 19)
    T, H = inp["q"].shape[0], inp["num_heads"]
    ws = mqa_decode_workspace(T, H, "cuda", window=inp["swa_idx"].shape[1], topk=inp["comp_idx"].shape[1],
                              kernel="swapab", comp_format="nvfp4", gluon=True)
    out = torch.empty(T, H, 512, dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(T, H, device="cuda")
    args = (inp["q"], inp["swa_cache"], inp["comp_cache"], inp["swa_idx"], inp["comp_idx"], inp["positions"],
            inp["cos_sin"], inp["sink"], H, inp["softmax_scale"], "nvfp4")
    kw = dict(kernel="swapab", gluon=True, gluon_cluster=True, validate=False, out=out, lse=lse, workspace=ws,
              pdl=True, pdl_early_inputs=True)
    mqa_decode_attention(*args, **kw)
    ref = out.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mqa_decode_attention(*args, **kw)
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, ref)
    inp["q"].mul_(0.5)
    graph.replay()
    eager, _, o32 = mqa_decode_attention(*args, kernel="swapab", gluon=True, gluon_cluster=True, _return_fp32=True)
    assert torch.equal(out, eager)
    assert torch.equal(o32.to(torch.bfloat16), eager)


def _ptx_run(asm: str, regs: dict) -> dict:
    """A PTX emulator for the instructions the e2m1 decode uses (mov, and, or, shr.u32, mul.lo.u32 and
    mul.rn.bf16x2), over numpy uint32 arrays: regs maps "$2" etc. to arrays; returns every register."""
    import re

    import numpy as np

    def bf16x2_mul(a, b):
        def halves(x):
            return [torch.from_numpy(((x >> (16 * i)) & 0xFFFF).astype(np.int32) << 16).view(torch.float32).double()
                    for i in (0, 1)]
        out = np.zeros_like(a)
        for i, (x, y) in enumerate(zip(halves(a), halves(b))):
            p = (x * y).to(torch.bfloat16)  # round to nearest even (every product here is exact)
            out |= (p.view(torch.int16).numpy().astype(np.uint32) & 0xFFFF) << (16 * i)
        return out

    env = dict(regs)
    val = lambda t: env[t] if t in env else np.uint32(int(t, 0))  # noqa: E731
    for line in asm.strip().strip("{}").split(";"):
        line = line.strip()
        if not line or line.startswith(".reg"):
            continue
        op, args = line.split(None, 1)
        d, *src = [a.strip() for a in args.split(",")]
        x = [np.asarray(val(s), dtype=np.uint64) for s in src]
        if op == "mov.b32":
            r = x[0]
        elif op == "and.b32":
            r = x[0] & x[1]
        elif op == "or.b32":
            r = x[0] | x[1]
        elif op == "shr.u32":
            r = x[0] >> x[1]
        elif op == "mul.lo.u32":
            r = (x[0] * x[1]) & 0xFFFFFFFF
        elif op == "mul.rn.bf16x2":
            r = bf16x2_mul(np.broadcast_to(x[0], x[1].shape if x[1].ndim else x[0].shape).astype(np.uint32),
                           np.broadcast_to(x[1], x[0].shape if x[0].ndim else x[1].shape).astype(np.uint32))
        else:
            raise NotImplementedError(op)
        assert re.fullmatch(r"\$?\w+", d), d
        env[d] = np.asarray(r, dtype=np.uint32)
    return env


def test_e2m1_bit_decode_is_exact():
    """The Gluon kernel's e2m1 decode from bits (option gluon_e2m1_bits; its PTX run by an emulator here, as the
    kernel holds it): every low and high nibble of every byte pair, in both halves of the 32-bit word, times every
    finite e4m3 scale, equals the reference decoder's value times the scale, bit for bit (signed zeros included)."""
    import numpy as np

    from attnkit.mqa_decode.kernel_swapab_gluon import E2M1_HI_ASM, E2M1_LO_ASM
    from attnkit.reference.mqa_decode import E4M3_VALUES, decode_e2m1

    pairs = np.arange(1 << 16, dtype=np.uint32)
    word = pairs | (pairs[::-1] << 16)  # bytes 0, 1 and (other values) bytes 2, 3 of the same word
    scales = E4M3_VALUES[~torch.isnan(E4M3_VALUES)]
    rng = np.random.default_rng(0)
    for sc in [scales[i] for i in (0, 1, 7, 8, 56, 126, 127, 128, 200, 253)] + list(rng.choice(scales.numpy(), 8)):
        sc = float(sc)
        s16 = np.uint32(torch.tensor(sc * 2.0 ** 63).to(torch.bfloat16).view(torch.int16).item() & 0xFFFF)
        assert torch.tensor(sc * 2.0 ** 63).to(torch.bfloat16).double().item() == sc * 2.0 ** 63  # exact
        s2 = np.full_like(word, s16 | (s16 << 16))
        for asm, shift in ((E2M1_LO_ASM, 0), (E2M1_HI_ASM, 4)):
            env = _ptx_run(asm.value, {"$2": word, "$3": s2, "$4": s2})
            for reg, w_bytes in (("$0", word & 0xFFFF), ("$1", word >> 16)):
                out = env[reg]
                for half in (0, 1):
                    nib = (w_bytes >> (8 * half + shift)) & 0xF
                    want = decode_e2m1(torch.from_numpy(nib.astype(np.int64))) * sc
                    bits = ((out >> (16 * half)) & 0xFFFF).astype(np.int32) << 16
                    got = torch.from_numpy(bits).view(torch.float32).double()
                    assert torch.equal(got, want), (sc, reg, half)
                    assert torch.equal(torch.signbit(got), torch.signbit(want)), (sc, reg, half)


def test_e2m1_bit_decode_emulator_catches_a_wrong_multiplier():
    """The check above can fail: the same PTX with the magnitude multiplier off by one bit position is wrong."""
    import numpy as np

    from attnkit.mqa_decode.kernel_swapab_gluon import E2M1_LO_ASM
    from attnkit.reference.mqa_decode import decode_e2m1

    bad = E2M1_LO_ASM.value.replace("0x4040", "0x8080")
    w = np.arange(1 << 16, dtype=np.uint32)
    one = np.uint32(0x5F00 | (0x5F00 << 16))  # scale 1 (times 2^63)
    out = _ptx_run(bad, {"$2": w, "$3": np.full_like(w, one), "$4": np.full_like(w, one)})["$0"]
    got = torch.from_numpy(((out & 0xFFFF).astype(np.int32) << 16)).view(torch.float32).double()
    assert not torch.equal(got, decode_e2m1(torch.from_numpy((w & 0xF).astype(np.int64))))


def test_triton_swapab_refuses_the_gluon_options(monkeypatch):
    """The Triton swap-AB kernel has none of the Gluon kernel's options: one asked for by keyword (a switch True,
    any count) is a ValueError naming it, not ignored; a switch False asks for nothing it does not do; a bad value in
    the environment raises as it would for the Gluon kernel."""
    from attnkit.mqa_decode import config as C
    asked = dict(gluon_warps=8, fused_merge=True, gluon_async=True, gluon_early=True, gluon_half=True,
                 gluon_banks=True, gluon_maxnreg=128, gluon_one_loop=True, gluon_loads_first=True, gluon_prologue=0,
                 gluon_wide=True)
    for key, value in asked.items():
        name = "gluon_fused" if key == "fused_merge" else key
        with pytest.raises(ValueError, match=f"^{name}: is an option of the Gluon swap-AB kernel"):
            C.swapab_plan(2, 16, 640, 132, None, "cuda", gluon=False, **{key: value})
        assert C.swapab_plan(2, 16, 640, 132, None, "cuda", gluon=True, **{key: value}).num_splits > 0
    off = {k: False for k, v in asked.items() if v is True}
    assert C.swapab_plan(2, 16, 640, 132, None, "cpu", **off) == C.swapab_plan(2, 16, 640, 132, None, "cpu")
    monkeypatch.setenv("ATTNKIT_MQA_GLUON_PROLOGUE", "two")
    with pytest.raises(ValueError, match="ATTNKIT_MQA_GLUON_PROLOGUE"):
        C.swapab_plan(2, 16, 640, 132, None, "cpu")
    monkeypatch.delenv("ATTNKIT_MQA_GLUON_PROLOGUE")
    if not torch.cuda.is_available():  # the op itself, where the Triton swap-AB kernel runs (the interpreter)
        inp = make_inputs(shapes.get("mqa_decode-small-t2-h32-nvfp4"), "cpu", 6)
        with pytest.raises(ValueError, match="^gluon_half"):
            mqa_headpad_call(inp, kernel="swapab", gluon_half=True)


_NAN_ROUTES = [("headpad", {}), ("swapab", {"gluon": False}), ("swapab", {}), ("swapab", {"gluon_cluster": True}),
               ("swapab", {"gluon_cluster": False, "gluon_fused": False})]


@pytest.mark.parametrize("kernel, opts", _NAN_ROUTES, ids=[f"{k}-{o}" for k, o in _NAN_ROUTES])
@pytest.mark.parametrize("case, where", [("mqa_decode-small-t2-h32-nvfp4", "window"),
                                         ("mqa_decode-small-t2-h32-nvfp4", "compressed"),
                                         ("mqa_decode-step-h16-t16-fp8", "window"),
                                         ("mqa_decode-step-h16-t16-fp8", "window scale")])
def test_a_nan_record_value_makes_every_row_that_reads_it_nan(case, where, kernel, opts, device):
    """Records are not scanned by the value checks (they are bytes the writer wrote), so a NaN there reaches the
    kernels: the e4m3 pattern 0x7F in a window record's value byte, or in an nvfp4 compressed record's block scale
    (what the writer stores for a NaN latent with validate=False), or the UE8M0 NaN 0xFF as an fp8 record's block
    scale (which the writer never stores; the kernels decode it as infinity, whose products with the block's codes
    and q make the scores NaN). Every (token, head) whose lists hold that slot comes out NaN, output and LSE, as the
    fp64 oracle says, and every other keeps the bits of the call without it; the MXFP8 output of the same call is NaN codes on those rows and no other. Before, the merges took a NaN
    denominator for an empty row (0 and LSE -inf): a plausible answer."""
    from attnkit._runtime import interpreting
    if interpreting():
        pytest.skip("Triton's interpreter decodes the e4m3 NaN pattern 0x7F as 480 (the GPU as NaN)")
    inp = make_inputs(shapes.get(case), device, 3)
    try:
        clean = mqa_headpad_call(inp, kernel=kernel, **opts)
    except ValueError as e:  # a Gluon route off sm_90, or an option this shape's plan refuses
        pytest.skip(f"not a route here: {e}")
    cache_key, idx_key, byte, nan = {"window": ("swa_cache", "swa_idx", 3, 0x7F),
                                     "compressed": ("comp_cache", "comp_idx", 259, 0x7F),  # block 3's e4m3 scale
                                     "window scale": ("swa_cache", "swa_idx", 513, 0xFF)}[where]  # block 1's UE8M0
    cache = inp[cache_key].clone()
    slot = int(inp[idx_key][0][inp[idx_key][0] >= 0][0])
    cache.view(-1, cache.shape[2])[slot, byte] = nan
    bad_inp = dict(inp, **{cache_key: cache})
    bad = mqa_headpad_call(bad_inp, kernel=kernel, **opts)
    got = nan_rows(*bad)
    ref, ref_lse = mqa_decode_oracle(bad_inp)
    want = torch.isnan(ref.cpu()).any(-1)
    assert want.any() and torch.equal(got, want)
    keep = ~got
    assert torch.equal(bad[0].cpu()[keep], clean[0].cpu()[keep])
    assert torch.equal(bad[1].cpu()[keep], clean[1].cpu()[keep])
    # the MXFP8 output of the same call: a NaN row is NaN codes (their sign apart), and no other row holds one
    T, H_pad, H = inp["q"].shape[0], inp["q"].shape[1], inp["num_heads"]
    q8 = torch.full((T, H_pad, 512), 0x5A, dtype=torch.uint8, device=device)
    sc = torch.full((T, H_pad, 16), 0xA5, dtype=torch.uint8, device=device)
    mqa_headpad_call(bad_inp, kernel=kernel, out_fp8=q8.view(torch.float8_e4m3fn), out_scale=sc, **opts)
    codes = q8[:, :H].cpu() & 0x7F
    assert (codes[got] == 0x7F).all() and not (codes[keep] == 0x7F).any()
    assert (q8[:, H:] == 0x5A).all() and (sc[:, H:] == 0xA5).all()
