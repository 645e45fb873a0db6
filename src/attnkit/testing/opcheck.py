"""One checker for every custom op: ``torch.library.opcheck``, ``torch.compile(fullgraph=True)``
against eager, and (on CUDA tensors) CUDA-graph capture and replay against eager, including a replay
after the inputs change in place."""

from __future__ import annotations

import torch


def _clone(args):
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def _outputs(res, args, mutated):
    if res is None:
        return [args[i] for i in mutated]
    return list(res) if isinstance(res, (tuple, list)) else [res]


def _same(a, b) -> bool:
    return all(torch.equal(torch.nan_to_num(x.float(), 7.0), torch.nan_to_num(y.float(), 7.0))
               for x, y in zip(a, b))


def check_custom_op(op, args, *, mutated=(), refresh=None, compile_backend=None) -> dict:
    """Run the checks; raises AssertionError on the first that fails and returns what ran.

    op: the OpOverloadPacket (e.g. torch.ops.attnkit.merge_partials).
    mutated: positions of arguments the op writes (its outputs for an out= op).
    refresh: callable(args) that rewrites the inputs in place with fresh values (graph replay check).
    """
    ran = {}
    torch.library.opcheck(op, tuple(_clone(args)))
    ran["opcheck"] = True

    eager_args = _clone(args)
    eager = _outputs(op(*eager_args), eager_args, mutated)

    on_cuda = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
    backend = compile_backend or ("inductor" if on_cuda else "aot_eager")
    torch._dynamo.reset()
    fn = torch.compile(lambda *a: op(*a), fullgraph=True, backend=backend)
    c_args = _clone(args)
    compiled = _outputs(fn(*c_args), c_args, mutated)
    assert _same(eager, compiled), "torch.compile(fullgraph=True) result differs from eager"
    ran["compile"] = backend

    if on_cuda:
        static = _clone(args)
        op(*static)  # warm-up (compilation) outside the capture
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            res = op(*static)
        outs = _outputs(res, static, mutated)
        g.replay()
        torch.cuda.synchronize()
        assert _same(eager, outs), "CUDA-graph replay differs from eager"
        if refresh is not None:
            refresh(static)
            g.replay()
            torch.cuda.synchronize()
            again = _outputs(op(*_clone(static)), static, mutated)
            assert _same(again, outs), "CUDA-graph replay after an in-place input change differs from eager"
        ran["cuda_graph"] = True
    else:
        ran["cuda_graph"] = "skipped: no CUDA tensors"
    return ran
