"""Where Triton kernels can run here, and the errors that say why not."""

from __future__ import annotations

import functools
import inspect

import torch

from .options import getenv


def interpreting() -> bool:
    return getenv("TRITON_INTERPRET") == "1"


def check_device(name: str, t: torch.Tensor) -> None:
    """A tensor handed to a Triton kernel must be on a CUDA device, or on the CPU under the interpreter."""
    if t.device.type == "cuda":
        return
    if t.device.type == "cpu" and interpreting():
        return
    raise ValueError(f"{name} is on {t.device}; attnkit kernels run on CUDA devices "
                     f"(or on the CPU with TRITON_INTERPRET=1 set before attnkit is imported)")


def on_device_of(arg: str):
    """Decorator of a public op: the op runs with the CUDA device of its argument `arg` (a tensor, or a device)
    current, so its kernels compile for that device and launch there, on its current stream, whichever device the
    caller has current (one process driving several GPUs; tests/test_devices.py). A no-op where that device is
    already current or is not a CUDA device. Switching while the caller's device captures a CUDA graph is a ValueError
    unless the argument's device captures too (the launch would run at once, outside the caller's graph)."""
    def deco(fn):
        pos = list(inspect.signature(fn).parameters).index(arg)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            t = args[pos] if pos < len(args) else kwargs.get(arg)
            if isinstance(t, torch.Tensor):
                index = t.get_device()  # -1 off CUDA
            elif isinstance(t, (torch.device, str)):
                d = torch.device(t)
                index = -1 if d.type != "cuda" or d.index is None else d.index
            else:
                index = -1  # not a tensor or a device: the op's own checks say so
            if index >= 0 and index != (caller := torch.cuda.current_device()):
                capturing = torch.cuda.is_current_stream_capturing()
                with torch.cuda.device(index):
                    if capturing and not torch.cuda.is_current_stream_capturing():
                        raise ValueError(
                            f"{arg}: on cuda:{index}, but a CUDA graph is being captured on cuda:{caller}'s current "
                            f"stream, and cuda:{index}'s current stream is not capturing: the op would launch on "
                            f"cuda:{index} outside the capture, not in the graph. Capture on a stream of cuda:{index} "
                            f"(torch.cuda.graph(g, stream=...) makes that stream's device current)")
                    return fn(*args, **kwargs)
            return fn(*args, **kwargs)
        wrapper.device_arg = arg
        return wrapper
    return deco


def require(cond: bool, name: str, msg: str) -> None:
    if not cond:
        raise ValueError(f"{name}: {msg}")


def forward_only(**tensors) -> None:
    """attnkit's kernels have no backward: with grad mode on, an input that requires grad would get a result cut off
    from autograd, its gradient silently missing. That is a ValueError naming the input (the custom ops instead
    raise at backward, as torch.library does for an op with no autograd formula)."""
    if torch.is_grad_enabled():
        for name, t in tensors.items():
            if isinstance(t, torch.Tensor) and t.requires_grad:
                raise ValueError(f"{name}: requires grad, but attnkit's kernels are forward-only (no backward): call "
                                 f"under torch.no_grad() or torch.inference_mode(), or pass {name}.detach()")


def to_host(*ts: torch.Tensor) -> list[torch.Tensor]:
    """The tensors `ts` on the host, copied with one synchronization for all of them (a call's value checks: one
    wait for the GPU instead of one per ``.item()`` / ``.cpu()``). CPU tensors come back as they are."""
    dev = next((t.device for t in ts if t.is_cuda), None)
    if dev is None:
        return list(ts)
    out = [t.to("cpu", non_blocking=True) if t.is_cuda else t for t in ts]  # into pinned memory, in stream order
    torch.cuda.current_stream(dev).synchronize()
    return out


def index_span(ix: torch.Tensor) -> torch.Tensor:
    """[min, max] of an index tensor as a 2-element tensor on its device (for to_host); [-1, -1], which every range
    check accepts, when it is empty."""
    return torch.stack(torch.aminmax(ix)) if ix.numel() else ix.new_full((2,), -1)


def _cuda_capability(device) -> tuple[int, int] | None:
    """The compute capability of `device` when kernels compile for it (a CUDA device, not Triton's interpreter),
    else None."""
    if interpreting() or getattr(device, "type", device) != "cuda":
        return None
    index = torch.device(device).index
    return _capability(torch.cuda.current_device() if index is None else index)


@functools.lru_cache(maxsize=None)
def _capability(index: int) -> tuple[int, int]:
    """Per CUDA device, asked once (every step asks)."""
    return torch.cuda.get_device_capability(index)


@functools.lru_cache(maxsize=None)
def _gluon_importable() -> bool:
    try:
        import triton.experimental.gluon  # noqa: F401
    except ImportError:
        return False
    return True


def gluon_runs(device) -> bool:
    """Whether a Gluon kernel for Hopper can run on `device`: a CUDA sm_90 GPU, not Triton's interpreter (Gluon
    has none)."""
    return _cuda_capability(device) == (9, 0) and _gluon_importable()


def pdl_runs(device) -> bool:
    """Whether programmatic dependent launch can be used on `device`: a CUDA GPU of compute capability 9.0 or
    newer, not Triton's interpreter (which has no griddepcontrol instructions)."""
    cap = _cuda_capability(device)
    return cap is not None and cap >= (9, 0)


def resolve_pdl(value, device, rule: bool = False) -> bool:
    """The ``pdl`` option (keyword, else ``ATTNKIT_PDL``, else `rule` where it can run: splitk.pdl_rule) for a
    step on `device`; asking for it where it cannot run is a ValueError."""
    from .splitk import PDL
    on = PDL.resolve(value)
    if on is None:
        return rule and pdl_runs(device)
    require(not on or pdl_runs(device), "pdl", "programmatic dependent launch needs a CUDA GPU of compute "
            "capability 9.0 or newer (not the interpreter)")
    return bool(on)


def pdl_launch(on: bool) -> dict:
    """The launch keywords of a kernel built with PDL=on."""
    return {"launch_pdl": True} if on else {}
