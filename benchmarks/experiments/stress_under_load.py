"""Stress check of the GPU kernels under concurrent load: several processes calling kernels side by side on one GPU.

Usage: python benchmarks/experiments/stress_under_load.py OUT.json [--seconds S] [--device cuda|cpu] [JOB ...]
  JOB = SUBJECT@CASE, CASE a shape id of attnkit.testing.shapes, SUBJECT either
  - a gate name (attnkit check's, e.g. sparse_int8/gluon): each call's outputs are compared byte for byte with the
    process's first call (every kernel of the library is deterministic), or
  - relbias:VARIANT, VARIANT a key of RELBIAS_VARIANTS below: each call compared with the Triton forward kernel
    (gated against the fp64 oracle) on the same inputs; a row is wrong when its largest absolute difference exceeds
    0.01, when it holds a NaN, or when its LSE is not finite.
  - mqa-step:VARIANT, VARIANT a key of MQA_STEP_VARIANTS below: a whole step under programmatic dependent launch
    with pdl_early_inputs (the record writer writes each token's newest window record, alternating between two sets
    of latents call by call, then the attention reads it), each call compared byte for byte with the plain launches'
    step (no PDL) for the same latents: an attention that read a record before the writer had written it shows as a
    wrong call ("swapab-nowait" never waits, and shows wrong calls only now and then; with a writer that spins
    before it writes, "swapab-nowait-slow-writer", on nearly every call: so this check can fail). Variants with
    "_q_writer" launch before the step a kernel that rewrites q (two sets, alternating with the latents) after a
    20 us spin, under PDL releasing its dependents before it writes (the caller writer_release_early's contract
    excludes) or plainly: the check of that contract.
  Default: DEFAULT_JOBS (the dispatched relbias warp-specialized kernel, without its consumers' turns since the
  fix of its turn barriers, on prefill 8K, on chunks of 128 rows and on a decode-shaped case; the kernel with the
  turns; the kernel without them as it was before the fix (which must show wrong rows, so this check can fail); and
  a Gluon kernel of sparse_int8 and of mqa_decode).

Every job runs in its own process (spawned), all at the same time, for S seconds, so the GPU is shared the way a
serving host with several engines shares it; a kernel that is right alone and wrong under load shows here and not
in the gates. A process that faults is recorded with the number of calls it made. Writes OUT.json (the environment,
the jobs, per job: calls, calls with a difference, examples) and prints one line per job, then the failures. Exit
status 1 when a job that is not wrong by design (WRONG_BY_DESIGN) faulted, made no call or made a wrong call; 2 on
a malformed job or --device cuda without a CUDA device. A job wrong by design shows the check can fail by a wrong call
or a fault; the record says whether it did (wrong_by_design_shown_failing).

Runs: at c9db574 (as benchmarks/experiments/relbias_ws_stress.py, relbias jobs only, written VARIANT:CASE; its
"ws-no-turns*" variants then ran the kernel as "-unused-turns" runs it now): benchmarks/experiments/
relbias-ws-stress-h200-c9db574.json. At 9e5c820 (the turns then the default; "ws-no-turns*" reached through a
diagnostic argument since removed, the same kernel): benchmarks/experiments/stress-h200-9e5c820.json. At 0e19896 (the
mqa-step jobs, five processes for 30 s): benchmarks/experiments/stress-h200-0e19896-pdl-early.json. At the commit
named in its file (the writer_release_early variants beside the plain ones): benchmarks/experiments/
stress-h200-*-release-early.json. At 5c40b98 (the slow-writer variants, six processes for 30 s):
benchmarks/experiments/stress-h200-5c40b98-slow-writer.json. At 73b3b4d (the q-writer variants):
benchmarks/experiments/stress-h200-73b3b4d-release-early-contract.json. At 58f9ec6 on an H100 80GB HBM3 (the
default jobs, 20 s): benchmarks/experiments/stress-h100-58f9ec6.json: every job 0 wrong calls; the relbias kernel with
unused turns (wrong by design) faulted at its first call (an illegal memory access) where the H200 had shown wrong
rows; that run's "failed" list predates the rule that a job wrong by design fails no run. At 4deffb2 on an H100
80GB HBM3 (the same jobs, 20 s): benchmarks/experiments/stress-h100-4deffb2.json: every job 0 wrong calls, the
by-design job faulted at its first call again, recorded as the check shown failing, and the run exited 0.
"""

import argparse
import json
import multiprocessing as mp
import sys
import time

RELBIAS_VARIANTS = {
    "dispatched": dict(gluon=True),  # the rule: on long global D 128 sequences the warp-specialized kernel
    "ws": dict(gluon=True, gluon_ws=True),  # the warp-specialized kernel with its defaults (no turns, key release)
    "ws-turns": dict(gluon=True, gluon_ws=True, gluon_pingpong=True),  # its consumers taking turns
    "ws-nokrel": dict(gluon=True, gluon_ws=True, gluon_k_release=False),
    # without the consumers' turns: since the fix of the turn barriers (made only with the turns; gluon_pingpong
    # False is the default since), and, "-unused-turns", as before it (made and not used: the memory the compiler
    # then hands to other buffers), which must show wrong rows
    "ws-no-turns": dict(gluon=True, gluon_ws=True, gluon_pingpong=False),
    "ws-no-turns-nokrel": dict(gluon=True, gluon_ws=True, gluon_pingpong=False, gluon_k_release=False),
    "ws-no-turns-nokrel-unused-turns": dict(gluon=True, gluon_ws=True, gluon_pingpong=False,
                                            gluon_k_release=False, _ws_unused_turns=True),
    "one-warpgroup": dict(gluon=True, gluon_ws=False),
}
MQA_STEP_VARIANTS = {
    "swapab": dict(kernel="swapab", gluon=True),
    "headpad": dict(kernel="headpad"),
    "swapab-nowait": dict(kernel="swapab", gluon=True, _pdl_skip_wait=True),  # wrong by design
    # the writer releasing the attention before it waits for the kernel before it (writer_release_early)
    "swapab-release-early": dict(kernel="swapab", gluon=True, writer_release_early=True),
    "headpad-release-early": dict(kernel="headpad", writer_release_early=True),
    # the same without the attention's early inputs (it then reads nothing before its wait)
    "swapab-release-early-late": dict(kernel="swapab", gluon=True, writer_release_early=True, pdl_early_inputs=False),
    # a slow writer (each program spins 20 us before its loads and stores): the attention that never waits then
    # reads the window records before they are written on nearly every call, so the check shows it can fail; the
    # attentions that wait must still show no wrong call
    "swapab-nowait-slow-writer": dict(kernel="swapab", gluon=True, _pdl_skip_wait=True, _writer_delay_ns=20000),
    "swapab-slow-writer": dict(kernel="swapab", gluon=True, _writer_delay_ns=20000),
    "swapab-release-early-slow-writer": dict(kernel="swapab", gluon=True, writer_release_early=True,
                                             _writer_delay_ns=20000),
    "headpad-slow-writer": dict(kernel="headpad", _writer_delay_ns=20000),
    # the step after a kernel that writes q (two sets, alternating with the latents) and spins 20 us first: under PDL
    # it lets its dependents launch at entry, before it writes (a caller that breaks writer_release_early's
    # contract, which must show wrong calls), or it is launched plainly (the contract kept); the default writer, which
    # waits before it releases the attention, is safe after either
    "swapab-release-early-after-pdl-q-writer": dict(kernel="swapab", gluon=True, writer_release_early=True,
                                                    _q_writer="pdl"),
    "swapab-release-early-after-plain-q-writer": dict(kernel="swapab", gluon=True, writer_release_early=True,
                                                      _q_writer="plain"),
    "swapab-after-pdl-q-writer": dict(kernel="swapab", gluon=True, _q_writer="pdl"),
    "headpad-release-early-after-pdl-q-writer": dict(kernel="headpad", writer_release_early=True, _q_writer="pdl"),
}
# the variants that are wrong by design (each shows the check can fail): their wrong calls or faults fail no run
WRONG_BY_DESIGN = frozenset({"relbias:ws-no-turns-nokrel-unused-turns", "mqa-step:swapab-nowait",
                             "mqa-step:swapab-nowait-slow-writer", "mqa-step:swapab-release-early-after-pdl-q-writer",
                             "mqa-step:headpad-release-early-after-pdl-q-writer"})
DEFAULT_JOBS = ("relbias:dispatched@relbias-model-prefill-8k-global",
                "relbias:dispatched@relbias-tune-chunk128-b8-8k",
                "relbias:ws-turns@relbias-model-prefill-8k-global",
                "relbias:ws-no-turns-nokrel-unused-turns@relbias-model-prefill-8k-global",
                "relbias:ws-no-turns@relbias-model-decode-b32-64k",
                "sparse_int8/gluon@sparse_int8-model-decode-r8-c32k",
                "mqa_decode/gluon_swapab@mqa_decode-step-h16-t16-fp8")


def _tensors(x):
    """The tensors of a subject's result, in order (tuples and lists flattened, None left out)."""
    import torch
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for y in x for t in _tensors(y)]
    return []


def _subject(spec: str):
    """(call(inp) -> result, check(result) -> (n_wrong, example or None)) for the job's subject."""
    import torch

    from attnkit.gate import registry
    from attnkit.gate.specs import relbias_kernel_call
    from attnkit.testing import shapes
    subject, case_id = spec.split("@", 1)
    case = shapes.get(case_id)
    if subject.startswith("relbias:"):
        kw = RELBIAS_VARIANTS[subject.split(":", 1)[1]]
        ref = {}

        def call(inp):
            if not ref:
                ref["out"] = relbias_kernel_call(inp, force="fwd", gluon=False)[0]
            return relbias_kernel_call(inp, force="fwd", **kw)

        def check(res):
            o, lse = res
            d = (o.float() - ref["out"].float()).abs().amax(-1)
            wrong = (d > 0.01) | torch.isnan(d) | ~torch.isfinite(lse)
            n = int(wrong.sum())
            return n, (dict(rows=n, first=wrong.nonzero()[:6].tolist(),
                            max_abs=float(torch.nan_to_num(d, nan=float("inf")).max())) if n else None)
        return case, call, check
    if subject.startswith("mqa-step:"):
        return (case,) + _mqa_step_subject(MQA_STEP_VARIANTS[subject.split(":", 1)[1]])
    gate = next(g for g in registry.gates() if g.name == subject)
    first = []

    def call(inp):
        return gate.call(inp, None, case)

    def check(res):
        got = [t.detach().contiguous().view(-1).view(torch.uint8) for t in _tensors(res)]
        if not first:
            first.extend(t.clone() for t in got)
            return 0, None
        diff = [int((a != b).sum()) for a, b in zip(first, got)]
        n = sum(diff)
        return n, (dict(bytes_differing=diff) if n else None)
    return case, call, check


def _mqa_step_subject(kw):
    """(call, check) of an mqa-step job: the writer then the attention with pdl and pdl_early_inputs, the latents
    alternating between two sets; each call's bits against the plain step's for the same set."""
    import warnings

    import torch

    from attnkit.gate.specs import mqa_headpad_call
    from attnkit.mqa_decode import mqa_write_records
    from attnkit.testing.inputs import distinct_window_slots
    warnings.simplefilter("ignore", RuntimeWarning)  # the no-wait variant says it is wrong by design
    st = dict(n=0, ref=None)

    def step(inp, lat, pdl, k):
        slot = st["slot"]
        extra = dict(kw) if pdl else {a: v for a, v in kw.items() if a != "_pdl_skip_wait"}
        q_writer = extra.pop("_q_writer", None)
        q_delay = extra.pop("_q_delay_ns", 20000)
        if q_writer:  # q rewritten by the kernel before the step (set k)
            from attnkit.testing.pdl_probe import q_writer_kernel
            src, dst = st["q"][k], inp["q"]
            q_pdl = pdl and q_writer == "pdl"
            q_writer_kernel[(1,)](src, dst, dst.numel(), PDL=q_pdl, DELAY_NS=q_delay, BLOCK=1024,
                                  **({"launch_pdl": True} if q_pdl else {}))
        early = extra.pop("writer_release_early", None)
        early = early if pdl else None
        delay = extra.pop("_writer_delay_ns", 0)
        mqa_write_records(lat, inp["positions"], inp["cos_sin"], slot, inp["swa_cache"], "fp8", validate=False, pdl=pdl,
                          release_early=early, _diag_delay_ns=delay)
        early_inputs = extra.pop("pdl_early_inputs", pdl) and pdl
        return mqa_headpad_call(inp, pdl=pdl, pdl_early_inputs=early_inputs, validate=False, **extra)

    def call(inp):
        if st["ref"] is None:
            st["slot"] = distinct_window_slots(inp["swa_idx"])
            g = torch.Generator().manual_seed(7)
            st["lat"] = [torch.randn(len(st["slot"]), 512, generator=g).bfloat16().to(inp["q"].device) * s
                         for s in (1, -2)]
            st["q"] = [inp["q"].clone(), (torch.randn(inp["q"].shape, generator=g) * 2).to(inp["q"])]
            st["ref"] = [[t.clone() for t in _tensors(step(inp, lat, False, k))] for k, lat in enumerate(st["lat"])]
        k = st["n"] % 2
        st["n"] += 1
        return k, step(inp, st["lat"][k], True, k)

    def check(res):
        k, out = res
        got = [t.detach().contiguous().view(-1).view(torch.uint8) for t in _tensors(out)]
        ref = [t.contiguous().view(-1).view(torch.uint8) for t in st["ref"][k]]
        diff = [int((a != b).sum()) for a, b in zip(ref, got)]
        n = sum(diff)
        return n, (dict(latents=k, bytes_differing=diff) if n else None)
    return call, check


def _job(spec: str, seed: int, seconds: float, queue, device: str = "cuda") -> None:
    import torch

    from attnkit.testing import inputs
    res = dict(job=spec, seed=seed, calls=0, wrong_calls=0, examples=[], fault=None)
    try:
        case, call, check = _subject(spec)
        inp = inputs.make_inputs(case, device=device, seed=seed)
        t0 = time.time()
        while time.time() - t0 < seconds:
            n, ex = check(call(inp))
            res["calls"] += 1
            if n:
                res["wrong_calls"] += 1
                if len(res["examples"]) < 4:
                    res["examples"].append(ex)
        if device == "cuda":
            torch.cuda.synchronize()
    except Exception as e:  # a fault (illegal memory access) is a result, with the calls made before it
        res["fault"] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    queue.put(res)


def _check_job(spec: str) -> str | None:
    """Why JOB is malformed, or None (checked before any process starts)."""
    if "@" not in spec:
        return "SUBJECT@CASE"
    subject, case_id = spec.split("@", 1)
    from attnkit.gate import registry
    from attnkit.testing import shapes
    if subject.startswith("relbias:"):
        if subject.split(":", 1)[1] not in RELBIAS_VARIANTS:
            return f"relbias:VARIANT with VARIANT in {sorted(RELBIAS_VARIANTS)}"
    elif subject.startswith("mqa-step:"):
        if subject.split(":", 1)[1] not in MQA_STEP_VARIANTS:
            return f"mqa-step:VARIANT with VARIANT in {sorted(MQA_STEP_VARIANTS)}"
    elif subject not in {g.name for g in registry.gates()}:
        return "SUBJECT: a gate name (attnkit check's), relbias:VARIANT or mqa-step:VARIANT"
    try:
        shapes.get(case_id)
    except KeyError:
        return f"CASE {case_id!r}: not a shape id of attnkit.testing.shapes"
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("jobs", nargs="*", default=list(DEFAULT_JOBS))
    ap.add_argument("--seconds", type=float, default=45.0)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                    help="cuda (the check); cpu runs the same path in Triton's interpreter (a smoke test, no load)")
    a = ap.parse_args(argv)
    for spec in a.jobs:
        why = _check_job(spec)
        if why:
            ap.error(f"job {spec!r}: {why}")
    if a.device == "cuda":
        import torch
        if not torch.cuda.is_available():
            ap.error("--device cuda: no CUDA device here (the load check needs a GPU; --device cpu runs the same "
                     "path in Triton's interpreter, with TRITON_INTERPRET=1, as a smoke test)")
    from attnkit.env import record
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_job, args=(spec, i + 1, a.seconds, q, a.device)) for i, spec in enumerate(a.jobs)]
    for p in procs:
        p.start()
    results = [q.get() for _ in procs]
    for p in procs:
        p.join()
    results.sort(key=lambda r: a.jobs.index(r["job"]))
    for r in results:
        r["wrong_by_design"] = r["job"].split("@", 1)[0] in WRONG_BY_DESIGN
    failed = failures(results)
    shown = shown_failing(results)
    json.dump(dict(kind="stress-under-load", env=record(), seconds=a.seconds, relbias_variants=RELBIAS_VARIANTS,
                   results=results, failed=failed, wrong_by_design_shown_failing=shown), open(a.out, "w"), indent=1)
    for r in results:
        print(f"{r['job']:70s} calls {r['calls']:6d}  wrong {r['wrong_calls']:6d}"
              + ("  (wrong by design)" if r["wrong_by_design"] else "")
              + (f"  FAULT {r['fault']}" if r["fault"] else ""))
    print(f"stress: {len(results)} jobs, {len(failed)} failed" + "".join(f"\n  {f}" for f in failed)
          + (f"; wrong by design, shown failing: {sum(shown.values())} of {len(shown)}" if shown else ""))
    return 1 if failed else 0


def failures(results) -> list[str]:
    """Why each failing job failed: a fault, no call made, or a wrong call. The variants wrong by design fail no
    run: their wrong calls or their fault (a race in a kernel's shared memory may corrupt an address: on an H100 the
    relbias kernel with unused turns faulted at its first call where the H200 showed wrong rows) show the check can
    fail, and a run where they showed nothing only did not show it (shown_failing says which)."""
    out = []
    for r in results:
        if r["wrong_by_design"]:
            continue
        if r["fault"]:
            out.append(f"{r['job']}: fault after {r['calls']} calls ({r['fault']})")
        elif r["calls"] == 0:
            out.append(f"{r['job']}: no call made in the time given")
        elif r["wrong_calls"]:
            out.append(f"{r['job']}: {r['wrong_calls']} of {r['calls']} calls wrong")
    return out


def shown_failing(results) -> dict:
    """For each job wrong by design: whether this run showed it wrong (a wrong call or a fault)."""
    return {r["job"]: bool(r["wrong_calls"] or r["fault"]) for r in results if r["wrong_by_design"]}


if __name__ == "__main__":
    sys.exit(main())
