"""Every kernel, in the variants its dispatcher launches, compiles for sm_90 (Hopper) here, without a GPU:
Triton lowers it and the ptxas in Triton's package assembles a cubin. Catches what the interpreter lets
through. Run in a subprocess because the interpreter, set for the rest of the suite, replaces kernels."""

import json
import os
import subprocess
import sys


def _compiled(expr: str, timeout: int = 900):
    """The JSON value of `expr` (over attnkit.testing.compile_check imported as cc) computed in a subprocess without
    the interpreter."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = f"import json; from attnkit.testing import compile_check as cc; print(json.dumps({expr}))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_all_kernels_compile_for_sm90():
    results = _compiled("cc.compile_all(log=lambda *a: None)", timeout=1200)
    names = {x["name"].split()[0] for x in results}
    assert {"merge", "relbias_fwd", "relbias_decode", "relbias_write", "sparse_int8", "mqa_write", "mqa_headpad",
            "mqa_swapab", "mqa_mxfp8_out", "relbias_fwd_gluon", "relbias_fwd_gluon_ws",
            "relbias_fwd_gluon_ws_persistent", "sparse_int8_gluon", "mqa_swapab_gluon", "relbias_decode_gluon"} <= names
    assert all(x["cubin_bytes"] > 0 for x in results)
    # no initialized mbarrier's memory handed to another buffer (compile_check.mbarrier_reuse), but in the variant
    # kept as the bug was (the warp-specialized kernel's turn barriers made and not used), which it must flag
    flagged = {x["name"] for x in results if x["mbarriers_reused"]}
    assert flagged == {n for n in (x["name"] for x in results) if "unused-turns" in n} and flagged, flagged
    # compiled as launched (16-byte aligned pointers and strides): the forward kernel's K and V loads are
    # software-pipelined into shared memory (without the specialization nothing was, and registers differed)
    fwd = [x for x in results if x["name"].startswith("relbias_fwd D128 paged0") and "bm64" in x["name"]]
    assert fwd and all(x["shared"] >= 64 * 1024 for x in fwd), fwd
    # the Gluon fp8 decode rule's variant (relbias.config: 128-key tiles, a ring of 2, keys in registers) was timed
    # at two programs per SM with no spill: it must keep both (2 x (shared + 1 KB reserved) <= 228 KB on sm_90)
    rule = [x for x in results if x["name"] == "relbias_decode_gluon D128 rows8 cvt3 s2 tma bias_async kreg bn128"]
    assert rule and rule[0]["stack_bytes"] == 0 and 2 * (rule[0]["shared"] + 1024) <= 228 * 1024, rule


def test_sass_census_counts_a_loop_and_its_tensor_core_instructions():
    """compile_check --census: the sparse_int8 split kernel (D 64) has a candidate loop whose SASS holds the tile's
    MMAs (two score products and two value products per tile, the hi / lo splits), and no loop is invented where a
    kernel has none (the record writer)."""
    out = _compiled("cc.compile_all(names=['sparse_int8 D64', 'mqa_write nvfp40'], log=lambda *a: None, census=True)",
                    timeout=600)
    results = {x["name"].split()[0]: x for x in out}
    loops = results["sparse_int8"]["loops"]
    assert loops and all(lp["instructions"] >= 100 for lp in loops)
    top = dict(loops[0]["top"])
    assert top.get("HMMA", 0) > 0, top
    assert results["mqa_write"]["loops"] == []


def test_pdl_variants_wait_before_any_global_memory_access():
    """With PDL on, a kernel must wait for the previous grid before it reads or writes global memory: in the SASS of
    a merge, an attention kernel of each family (Triton and Gluon) and a record writer, the grid-dependency wait
    comes before the first global memory instruction, and the release of the next grid follows it. The plain
    variant (PDL off) has neither instruction, which the same check rejects."""
    names = ["merge", "sparse_int8_gluon D64 direct0", "relbias_decode D128 g8 paged1 fp80 r16 bn128 w4 s2 split",
             "mqa_write nvfp40"]
    *orders, plain = _compiled(f"[cc.pdl_entry_order(x) for x in {names!r}] + [cc.pdl_entry_order({names[0]!r}, pdl=False)]")

    def rule_holds(o):
        return (o["wait"] is not None and o["release"] is not None and o["first_global"] is not None
                and o["wait"] < o["release"] and o["wait"] < o["first_global"])

    for name, o in zip(names, orders):
        assert rule_holds(o), (name, o)
    assert not rule_holds(plain) and plain["wait"] is None


def test_gluon_p_smem_keeps_the_value_product_in_flight_during_the_softmax():
    """The relbias Gluon forward kernel's overlap (the value product of tile j - 1 running during tile j's softmax)
    as ptxas schedules it for sm_90: with P in shared memory (gluon_p_smem), or with lazy rescaling
    (gluon_lazy_rescale, whose program-wide flag is reduced before the wait; also with the bias starting the score
    product, gluon_bias_acc), the wait for the last product group comes after the first exponential of the softmax; in the default (P in registers) ptxas puts it before all of
    them, so nothing of the softmax overlaps that product, which the same check rejects."""
    names = ["relbias_fwd_gluon D128 bn64 w4 s2 pipe1 psmem", "relbias_fwd_gluon D64 bn64 w4 s2 pipe1 early psmem",
             "relbias_fwd_gluon D128 bn64 w4 s2 pipe1 early psmem lazy window clamp",
             "relbias_fwd_gluon D128 bn64 w4 s2 pipe1 lazy",
             "relbias_fwd_gluon D128 bn64 w4 s2 pipe1 lazy acc",
             "relbias_fwd_gluon D64 bn64 w4 s2 pipe1 psmem lazy acc window clamp",
             "relbias_fwd_gluon D128 bn64 w4 s2 pipe1"]
    *psmem, regs = _compiled(f"[cc.wgmma_wait_order(x) for x in {names!r}]")

    def overlapped(o):
        last_wait = max(j for j, left in o["waits"] if left == 0)
        return last_wait > o["first_ex2"]

    for name, o in zip(names, psmem):
        assert overlapped(o), (name, o)
    assert not overlapped(regs), regs


def test_ws_interior_loop_waits_for_the_value_product_before_the_softmax():
    """The relbias warp-specialized kernel as dispatched before gluon_bias_ahead (128-key tiles, key slots released
    early), as ptxas schedules it for sm_90 (what config.py's note on the removed gluon_ws_mask_interior cites): in the interior loop
    of each consumer warpgroup no exponential issues between the wait that leaves the value product running and the
    wait for it, while in the masked loops all 64 of a thread's do."""
    loops = _compiled('cc.softmax_overlap("relbias_fwd_gluon_ws D128 bn128 s2 acc krel")')
    steps = [(x["instructions"], x["ex2_in_flight"][0]) for x in loops if len(x["ex2_in_flight"]) == 1]
    interior = min(n for n, _ in steps)
    assert sorted(e for n, e in steps if n < interior + 50) == [0, 0], steps  # the two consumers' interior loops
    assert all(e == 64 for n, e in steps if n > 1000 and n < 1300), steps  # their masked loops


def test_ws_bias_ahead_loads_the_next_strip_during_the_products_and_overlaps_the_softmax():
    """With gluon_bias_ahead the strip of tile j + 1 is loaded among tile j's products, not before them: in the
    interior loop no global load precedes the first warpgroup MMA (without the option both strip loads do, and the
    shared-memory store of the strip waits for them before the MMA), and ptxas then keeps the value product in flight
    through all 64 exponentials of a thread in both consumers' interior loops (0 without the option, the test above)."""
    expr = ('[[cc._OPCODE.match(b).group(1) for b in body] for body in cc._loop_bodies('
            'cc.compile_named("{}")[0].asm["cubin"]) if any("HGMMA" in x for x in body) '
            'and any("MUFU.EX2" in x for x in body)]')

    def interior(name):
        loops = _compiled(expr.format(name))
        return min(loops, key=len)

    for name, loads_first in (("relbias_fwd_gluon_ws D128 bn128 s2 acc krel ahead", False),
                              ("relbias_fwd_gluon_ws D128 bn128 s2 acc krel", True)):
        ops = interior(name)
        first_mma = next(i for i, o in enumerate(ops) if o.startswith("HGMMA"))
        ldg = [i for i, o in enumerate(ops) if o.startswith("LDG")]
        assert len(ldg) == 2, (name, ldg)
        assert all(i < first_mma for i in ldg) == loads_first, (name, ldg, first_mma)
    loops = _compiled('cc.softmax_overlap("relbias_fwd_gluon_ws D128 bn128 s2 acc krel ahead")')
    steps = [(x["instructions"], x["ex2_in_flight"][0]) for x in loops if len(x["ex2_in_flight"]) == 1]
    shortest = min(n for n, _ in steps)
    assert sorted(e for n, e in steps if n < shortest + 50) == [64, 64], steps


def test_ws_bias_diag_loads_each_distinct_distance_once_and_unroll_drops_the_copies_of_p():
    """gluon_bias_diag: in the interior loop of the warp-specialized kernel (strips ahead) a thread's 64 bias values
    take 34 shared-memory loads, one per distinct distance (63 without the option: the gather's addresses for (r, c)
    and (r + 8, c + 8) were not seen to be equal). gluon_ws_unroll on top: two tiles a loop iteration with fewer
    instructions than two single tiles and little local-memory traffic (10 loads and stores per two tiles; 70 local
    loads without gluon_bias_diag, whose hoisted gather addresses took the registers)."""
    expr = ('[[cc._OPCODE.match(b).group(1) for b in body] for body in cc._loop_bodies('
            'cc.compile_named("{}")[0].asm["cubin"]) if any("HGMMA" in x for x in body) '
            'and any("MUFU.EX2" in x for x in body)]')

    def loops(name):
        return sorted(_compiled(expr.format(name)), key=len)

    one = {}
    for name, lds in (("relbias_fwd_gluon_ws D128 bn128 s2 acc krel ahead", 63),
                      ("relbias_fwd_gluon_ws D128 bn128 s2 acc krel ahead diag", 34)):
        ops = loops(name)[0]
        assert sum(o.startswith("LDS") for o in ops) == lds, (name, len(ops))
        one[name] = len(ops)
    two = [ops for ops in loops("relbias_fwd_gluon_ws D128 bn128 s2 acc krel ahead diag unroll2")
           if sum(o.startswith("HGMMA") for o in ops) == 32]
    assert two, "no loop of two tiles"
    ops = min(two, key=len)
    assert len(ops) < 2 * one["relbias_fwd_gluon_ws D128 bn128 s2 acc krel ahead diag"], len(ops)
    assert sum(o.startswith(("LDL", "STL")) for o in ops) <= 12, [o for o in ops if o.startswith(("LDL", "STL"))]


# The relbias warp-specialized kernel without turns as it compiled before its unused turn barriers were left out:
# the barriers initialized at 163840 and 163848, then the partitions' captured arguments stored there and the first
# consumer's layout scratch read and written from there.
_REUSED_PTX = """
	mov.b32 	%r3848, global_smem;
	add.s32 	%r3795, %r3848, 180224;
	@%p486 mbarrier.init.shared::cta.b64 [%r3795], 1;
	add.s32 	%r3801, %r3848, 163840;
	@%p486 mbarrier.init.shared::cta.b64 [%r3801], 1;
	add.s32 	%r3802, %r3848, 163848;
	@%p486 mbarrier.init.shared::cta.b64 [%r3802], 1;
	fence.proxy.async.shared::cta;
	st.shared.v4.b32 	[global_smem+163840], {%r3791, %r203, %r204, %r206};
	st.shared.v4.b32 	[%r7068+163840], {%r7072, %r7071, %r7070, %r7069};
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r6899, %r6900, %r6901, %r6902}, [%r7096+163840];
	@%p486 mbarrier.arrive.shared::cta.b64 _, [%r3795];
"""


def test_mbarrier_reuse_check_sees_a_reused_barrier():
    """compile_check.mbarrier_reuse flags the broken kernel's pattern, and not the same code once the reused barriers
    are gone or invalidated (the barrier at 180224, used only by mbarrier instructions, is never flagged)."""
    from attnkit.testing.compile_check import mbarrier_reuse
    r = mbarrier_reuse(_REUSED_PTX)
    assert r == dict(barriers=[163840, 163848, 180224], reused=[163840])
    fixed = "\n".join(ln for ln in _REUSED_PTX.splitlines() if "%r3801" not in ln and "%r3802" not in ln)
    assert mbarrier_reuse(fixed) == dict(barriers=[180224], reused=[])
    # invalidated before the reuse (as Triton's pipelined TMA loops do): not flagged
    inval = _REUSED_PTX.replace("\tfence.proxy", "\tmbarrier.inval.shared::cta.b64 [%r3801];\n"
                                "\tmbarrier.inval.shared::cta.b64 [%r3802];\n\tfence.proxy")
    assert mbarrier_reuse(inval)["reused"] == []


def test_pdl_early_inputs_wait_before_the_records_and_every_store():
    """The mqa_decode option pdl_early_inputs (PDL_EARLY): the attention kernels release the next grid at entry, load
    and prepare the query (and, in the Gluon kernel, the first slot ids) before the grid-dependency wait, and wait
    before the first loop (where the slot tiles' records are loaded) and before any global store; likewise the
    merge with merge_early (the sink, position and cos / sin before the wait, the partials after it). The same check
    rejects the plain PDL variant, whose wait comes before every load."""
    names = ["mqa_swapab_gluon H16 nvfp40 warps8 fused0 async0 early", "mqa_swapab_gluon H32 nvfp42 warps8 fused0 async0 early",
             "mqa_swapab_gluon H16 nvfp40 warps8 fused0 async0 early one_loop",
             "mqa_swapab_gluon H32 nvfp42 warps8 fused0 async0 early banks one_loop",
             "mqa_swapab_gluon H16 nvfp40 warps8 fused1 async0", "mqa_headpad out_dc512 nvfp40",
             "mqa_headpad out_dc512 nvfp41"]
    *orders, merge, plain = _compiled(f"[cc.pdl_early_order(x) for x in {names!r}] + "
                                      "[cc.pdl_early_order('mqa_merge', flag='EARLY'), "
                                      f"cc.pdl_entry_order({names[0]!r})]")

    def rule_holds(o):
        return (None not in (o["release"], o["wait"], o["first_load"], o["first_store"], o["first_loop"])
                and o["release"] < o["first_load"] and o["loads_before_wait"] > 0
                and o["wait"] < o["first_loop"] and o["wait"] < o["first_store"])

    for name, o in zip(names, orders):
        assert rule_holds(o), (name, o)
    # the mqa_decode merge with merge_early (its EARLY): the sink, position and cos / sin loads before the wait, the
    # wait before the loop over the splits (the partials' loads) and every store
    assert rule_holds(merge), merge
    # the plain PDL entry: the wait comes before every global memory instruction, so no load precedes it
    assert plain["wait"] < plain["first_global"]
    assert not rule_holds(dict(plain, first_load=plain["first_global"], first_store=plain["first_global"],
                               first_loop=plain["first_global"] + 1, loads_before_wait=0))


def test_one_loop_keeps_the_mma_descriptors_uniform():
    """gluon_one_loop (mqa_decode): with both slot lists in one loop, every warpgroup MMA's shared-memory descriptor
    stays in uniform registers (a few R2UR per loop, none per MMA) and the loop is shorter than the second of the two
    list loops, which rebuilds them per MMA in ordinary registers (more R2UR than MMAs: the check fails there)."""
    names = ["mqa_swapab_gluon H16 nvfp40 warps8 fused0 async0 early",
             "mqa_swapab_gluon H32 nvfp42 warps8 fused0 async0 early banks"]
    two = _compiled(f"[cc.mma_descriptor_moves(x) for x in {names!r}]")
    one = _compiled(f"[cc.mma_descriptor_moves(x + ' one_loop') for x in {names!r}]")
    for name, loops2, loops1 in zip(names, two, one):
        assert len(loops2) == 2 and len(loops1) == 1, (name, loops2, loops1)
        window, comp = loops2
        assert window["r2ur"] < window["hgmma"] <= comp["r2ur"], (name, loops2)  # the second loop: per MMA
        assert loops1[0]["r2ur"] < loops1[0]["hgmma"], (name, loops1)
        if "nvfp40" in name:  # fp8 lists: the one loop's body is one tile's path, shorter than the compressed loop
            assert loops1[0]["instructions"] < comp["instructions"] - 150, (name, loops1, comp)


def test_loads_first_issues_every_record_load_before_the_first_barrier():
    """gluon_loads_first (mqa_decode): every wide record load of a tile comes before the tile's first barrier, in
    both list loops, at 16 / 32 heads, fp8 / nvfp4; without it some come after (chunks 2 and 3 behind the first
    chunks' store barriers: the check fails there)."""
    names = ["mqa_swapab_gluon H16 nvfp40 warps8 fused0 async0 early",
             "mqa_swapab_gluon H32 nvfp42 warps8 fused0 async0 early banks"]
    plain = _compiled(f"[cc.loads_before_first_barrier(x) for x in {names!r}]")
    first = _compiled(f"[cc.loads_before_first_barrier(x + ' loads_first') for x in {names!r}]")
    for name, loops0, loops1 in zip(names, plain, first):
        assert len(loops0) == len(loops1) == 2, (name, loops0, loops1)
        assert all(lp["after"] > 0 for lp in loops0), (name, loops0)
        assert all(lp["after"] == 0 and lp["before"] >= 8 for lp in loops1), (name, loops1)


def test_prologue_issues_the_first_loads_before_the_first_barrier():
    """gluon_prologue (mqa_decode), up to the first warpgroup MMA: at level 0 query loads come after the first
    barrier (the later blocks' behind the first blocks' store barriers: the check fails there); at level 1 every
    query load comes before it and the first tile's record loads after it; at level 2 those too come before it."""
    names = ["mqa_swapab_gluon H16 nvfp40 warps8 fused0 async0 early loads_first",
             "mqa_swapab_gluon H32 nvfp42 warps8 fused0 async0 early banks loads_first"]
    got = _compiled(f"[[cc.loads_by_barrier(x + s) for s in ('', ' prologue1', ' prologue2')] for x in {names!r}]")
    for name, (lv0, lv1, lv2) in zip(names, got):
        assert sum(lv0[1:3]) > 8, (name, lv0)  # query loads behind the first two barriers
        assert sum(lv1[1:3]) == 0 and lv1[0] >= lv0[0] + 8 and lv1[3] >= 8, (name, lv1)
        assert sum(lv2[1:]) <= 2 and lv2[0] >= lv1[0] + 8, (name, lv2)  # (2: the next tile's slot ids)


def test_ids_early_issues_the_first_ids_before_the_first_barrier():
    """ids_early (sparse_int8): the first two tiles' id loads come before the first barrier (with the query's), in
    the 1-row decode's plain loop and the Gluon kernel; without it they wait behind the query fold's barriers (16
    of them: the check fails there)."""
    names = ["sparse_int8 D256 direct0 i8 bn32 w8 s2", "sparse_int8_gluon D256 direct0"]
    got = _compiled(f"[[cc.loads_by_barrier(x + s) for s in ('', ' ids_early')] for x in {names!r}]")
    for name, (plain, early) in zip(names, got):
        assert early[0] >= plain[0] + 16 and sum(early[1:]) + 16 <= sum(plain[1:]), (name, plain, early)


def test_gluon_overlap_issues_the_score_product_before_the_value_conversion():
    """gluon_overlap (sparse_int8's Gluon kernel): in the query-digit loop's SASS the integer MMA is issued before
    the value conversion's first shared-memory store, behind the copy wait's barriers only; without the option it
    comes after the conversion and its barriers (the check fails there)."""
    pairs = [("sparse_int8_gluon D256 direct0 ids_early", "sparse_int8_gluon D256 direct0 ids_early overlap"),
             ("sparse_int8_gluon D256 direct1", "sparse_int8_gluon D256 direct1 ids_early overlap")]
    got = _compiled(f"[[cc.score_mma_vs_conversion(x) for x in p] for p in {pairs!r}]")
    for (name, _), (plain, ov) in zip(pairs, got):
        assert plain["igmma"] > plain["first_sts"] and plain["barriers_before"] >= 4, (name, plain)
        assert ov["igmma"] < ov["first_sts"] and ov["barriers_before"] <= 2, (name, ov)


def test_gluon_v_regs_reads_the_value_codes_into_registers_and_stores_no_value_tile():
    """gluon_v_regs (sparse_int8's Gluon kernel): the query-digit loop writes no bf16 value tile (no 16-byte shared
    stores, four barriers fewer; D = 128 too) and at D = 256 reads each tile's value codes with one 8-byte shared
    load per candidate a thread holds (16 a tile); without the option the conversion's stores are there and its
    loads are 16 bytes wide (the check fails)."""
    names = ["sparse_int8_gluon D256 direct1", "sparse_int8_gluon D256 direct1 ids_early v_regs",
             "sparse_int8_gluon D256 direct0 ids_early", "sparse_int8_gluon D256 direct0 ids_early v_regs",
             "sparse_int8_gluon D128 direct0", "sparse_int8_gluon D128 direct0 ids_early v_regs"]
    got = _compiled(f"[cc.digit_loop_shared_ops(x) for x in {names!r}]")
    for i in range(0, len(names), 2):
        plain, vr = got[i], got[i + 1]
        assert plain.get("STS.128", 0) >= 8 and vr.get("STS.128", 0) == 0, (names[i], plain, vr)
        assert vr["BAR"] <= plain["BAR"] - 4, (names[i], plain, vr)
        if "D256" in names[i]:
            assert vr.get("LDS.64", 0) == 16 and plain.get("LDS.64", 0) == 0, (names[i], plain, vr)


def test_gluon_fallback_scores_both_query_halves_in_one_product():
    """sparse_int8's Gluon fallback (the split-bf16 query): the score is one product against both halves as 2 R = 32
    columns, so the loop's bf16 warpgroup MMAs are all 64x32x16 (the score's D / 16 and the value product's as many
    again), and none has the R = 16 columns of one half. The two chained products it replaced read the key tile twice:
    32 HGMMA.64x16x16 beside the value product's 16 (the check fails there)."""
    names = ["sparse_int8_gluon D256 direct1", "sparse_int8_gluon D256 direct0 ids_early v_regs",
             "sparse_int8_gluon D64 direct0 ids_early v_regs"]
    got = _compiled(f"[cc.fallback_loop_mmas(x) for x in {names!r}]")
    for name, mmas, d in zip(names, got, (256, 256, 64)):
        assert mmas == {"HGMMA.64x32x16.F32.BF16": 2 * d // 16}, (name, mmas)


def test_writer_loads_first_takes_two_load_round_trips_not_three():
    """writer_loads_first (mqa_decode's record writer): in the sm_90 SASS a row's loads take two dependent round trips
    (the slot with the position; then the latent with cos / sin), where without the option they take three (the
    slot; then the position; then the rest): compile_check.load_round_trips, which fails on the plain variant."""
    names = ["mqa_write nvfp40", "mqa_write nvfp41"]
    got = _compiled(f"[[cc.load_round_trips(x + s) for s in ('', ' loads_first')] for x in {names!r}]")
    assert got == [[3, 2], [3, 2]], got


def test_writer_release_early_releases_before_it_waits():
    """writer_release_early: with PDL the record writer releases the next grid (PREEXIT) before it waits for the
    grid before it (ACQBULK), and still waits before its first global memory instruction; the plain writer waits
    first (the check fails there)."""
    got = _compiled("[cc.pdl_entry_order(x) for x in ('mqa_write nvfp40', 'mqa_write nvfp40 release_early')]")
    plain, early = got
    assert plain["wait"] < plain["release"] <= plain["first_global"], plain
    assert early["release"] < early["wait"] < early["first_global"], early


def test_gluon_one_tile_compiles_no_list_loop():
    """gluon_one_tile (every split one tile of one list, prologue level 2): the mqa_decode Gluon kernel as the
    cluster merge compiles it at one tile per split has no loop issuing warpgroup MMAs and less than 60 % of the
    instructions; the kernel without the option has its two list loops (the check fails there)."""
    base = "mqa_swapab_gluon H16 nvfp42 warps8 fused0 async0 early banks loads_first prologue2 cluster16"
    got = _compiled(f"[(len(cc._mma_loops(x)), len(cc._sass_opcodes(cc.compile_named(x)[0].asm['cubin']))) "
                    f"for x in ({base!r}, {base + ' one_tile'!r})]")
    (loops, n), (loops1, n1) = got
    assert loops == 2 and loops1 == 0 and n1 < 0.6 * n, got


def test_slow_writer_spins_before_it_touches_memory():
    """The stress check's slow writer (mqa_write_records' _diag_delay_ns): a loop over global-timer reads that ends
    before the writer's first global memory instruction, so its stores come at least the delay after its start; the
    plain writer reads no timer (the check fails there)."""
    slow, plain = _compiled("[cc.timer_spin_order(x) for x in ('mqa_write nvfp40 slow', 'mqa_write nvfp40')]")
    assert slow["timer_reads"] >= 2 and slow["loops_back"], slow
    assert 0 <= slow["first_timer"] < slow["first_global"], slow
    assert plain["timer_reads"] == 0 and not plain["loops_back"], plain


def test_headpad_ids_early_issues_the_first_ids_before_the_first_barrier():
    """headpad_ids_early (mqa_decode's head-padded kernel): both lists' first slot ids load before the first barrier,
    with the query's; without it the first tile's ids wait behind the query's layout barriers (the check fails
    there), at 256 and 512 output dims, fp8 and nvfp4."""
    names = ["mqa_headpad out_dc256 nvfp40", "mqa_headpad out_dc512 nvfp41"]
    got = _compiled(f"[[cc.loads_by_barrier(x + s) for s in ('', ' ids_early')] for x in {names!r}]")
    for name, (plain, early) in zip(names, got):
        assert plain[0] <= 17 and early[0] >= plain[0] + 16, (name, plain, early)
        assert sum(early[1:]) <= sum(plain[1:]), (name, plain, early)


def test_cluster_merge_of_five_ctas_orders_its_barrier():
    """The cluster merge as it compiles at 16 tokens (5 splits, a cluster of 5 CTAs, the first 4 merging 128 dims
    each), with two 64-slot tiles per split and with the rule's one wide tile (gluon_wide, 128 slots): one cluster
    barrier after every partial store, released at GPU scope, L1 invalidated
    after the wait, and the merge's loads after it (only the splits that exist: 5 per element, the split count a
    constexpr), then the output's stores. (At 32 heads ptxas interleaves some of the 60 loads with the first
    exponentials, so the one-round-trip order of the 16-CTA form is not asserted here.) The split count as a runtime
    value (before aaa09d2) loads all 8 splits of the merge's tile and fails it."""
    names = ["mqa_swapab_gluon H16 nvfp40 warps8 fused0 async0 early loads_first prologue1 cluster5",
             "mqa_swapab_gluon H32 nvfp42 warps8 fused0 async0 early banks loads_first prologue1 cluster5"]
    names += [x + " wide" for x in names]
    got = _compiled(f"[cc.cluster_barrier_order(x) for x in {names!r}]")
    for name, cl, loads in zip(names, got, (30, 60, 30, 60)):
        assert cl["arrivals"] == cl["waits"] == 1 and cl["release"] and cl["l1_invalidated"], (name, cl)
        assert cl["stores_before"] >= 16 and cl["stores_after"] >= 1, (name, cl)
        assert loads // 3 <= cl["loads_after"] <= loads, (name, cl)  # 48 / 96 with the tile's 8 splits all loaded


def test_cluster_merge_stores_its_partials_before_the_cluster_barrier_and_reads_them_after():
    """gluon_cluster (mqa_decode): one cluster barrier; every partial store comes before its arrival, which a GPU-scope
    release (MEMBAR.ALL.GPU) precedes; the wait's acquire invalidates L1 (CCTL.IVALL), and the merge's loads all come
    after it and before the merge's first exponential (issued at once: one round trip), followed only by the output's
    and the LSE's stores; the kernel without the option has no cluster barrier (the check fails there)."""
    names = ["mqa_swapab_gluon H16 nvfp40 warps8 fused0 async0 early loads_first prologue2",
             "mqa_swapab_gluon H32 nvfp42 warps8 fused0 async0 early banks loads_first prologue2"]
    got = _compiled(f"[[cc.cluster_barrier_order(x + s) for s in ('', ' cluster16')] for x in {names!r}]")
    for name, (plain, cl) in zip(names, got):
        assert plain == dict(arrivals=0, waits=0), (name, plain)
        assert cl["arrivals"] == cl["waits"] == 1 and cl["release"], (name, cl)
        assert cl["stores_before"] >= 16 and 1 <= cl["stores_after"] <= 3, (name, cl)
        assert cl["l1_invalidated"] and cl["loads_after"] >= 16 and 0 < cl["last_load"] < cl["first_exp"], (name, cl)
