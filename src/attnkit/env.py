"""The environment record written beside every gate result and benchmark artifact."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
from pathlib import Path

import torch


def git_sha() -> str:
    """HEAD of the checkout (``-dirty`` with uncommitted changes); ATTNKIT_GIT_SHA overrides it for a
    copy of the tree that has no .git."""
    if os.environ.get("ATTNKIT_GIT_SHA"):
        return os.environ["ATTNKIT_GIT_SHA"]
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=5)
        if sha.returncode == 0:
            return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def source_digest(root: Path | None = None) -> str:
    """A digest of the library's source as it ran: sha256 over every .py file under ``root`` (default: the attnkit
    package), each as its path relative to root and its bytes, in sorted order; the first 16 hex digits. Unlike
    git_sha it does not depend on a .git directory or on ATTNKIT_GIT_SHA being right: an artifact's digest can be
    checked against a commit by computing it over that commit's tree (``attnkit env``)."""
    import hashlib
    root = Path(root) if root is not None else Path(__file__).resolve().parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        if "__pycache__" in f.parts:
            continue
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def device_kind() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def record() -> dict:
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:  # pragma: no cover
        triton_version = None
    env = {
        "time_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "git_sha": git_sha(),
        "src_digest": source_digest(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton_version,
        "interpreter": os.environ.get("TRITON_INTERPRET", "0") == "1",
        "device": device_kind(),
        # tuning options set in the environment (they change what ran; see attnkit.options)
        "options": {k: v for k, v in sorted(os.environ.items()) if k.startswith("ATTNKIT_") and k != "ATTNKIT_GIT_SHA"},
    }
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        env.update(device_name=p.name, capability=f"{p.major}.{p.minor}", sm_count=p.multi_processor_count,
                   l2_bytes=getattr(p, "L2_cache_size", None), memory_bytes=p.total_memory,
                   cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())
    else:
        env.update(device_name=platform.processor() or platform.machine(), capability=None)
    return env


def kernel_paths() -> list[dict]:
    """Which kernel paths exist and whether they can run here."""
    cuda = torch.cuda.is_available()
    interp = os.environ.get("TRITON_INTERPRET", "0") == "1"
    where = "GPU" if cuda else ("CPU via Triton's interpreter" if interp else "CPU: set TRITON_INTERPRET=1")
    try:
        from torch.nn.attention import flex_attention  # noqa: F401
        flex = "GPU (compiled)" if cuda else "CPU (eager)"
    except ImportError:
        flex = "unavailable"
    from ._runtime import gluon_runs
    gluon = cuda and gluon_runs(torch.device("cuda"))  # our Gluon kernels are built for sm_90 alone
    from .status import KERNEL_PATHS
    rows = [{"path": f"{fam}: {path}", "status": status, "runs": where if status == "implemented" else "-"}
            for fam, paths in KERNEL_PATHS.items() for path, status in paths]
    return rows + [
        {"path": "peer: FlexAttention", "status": "available" if flex != "unavailable" else "unavailable", "runs": flex},
        {"path": "peer: SDPA cuDNN / flash", "status": "available" if cuda else "GPU only", "runs": "GPU" if cuda else "-"},
        {"path": "peer: PyTorch gather + dequantize + SDPA", "status": "available", "runs": "GPU" if cuda else "CPU"},
        {"path": "gluon (Hopper dialect)", "status": "available" if gluon else "unavailable here", "runs": "GPU sm_90"},
    ]


def tuning_options() -> list[dict]:
    """Every tuning option (attnkit.options.Switch / IntOption) the ops read: keyword, variable, default,
    the value in this environment (or the error a bad one raises), and what it does."""
    import importlib

    from .options import IntOption, Switch
    out = []
    for mod in ("attnkit.relbias.config", "attnkit.sparse_int8.config", "attnkit.mqa_decode.config", "attnkit.splitk",
                "attnkit._callcache"):
        m = importlib.import_module(mod)
        for obj in vars(m).values():
            if isinstance(obj, (Switch, IntOption)) and not obj.name.startswith("_"):
                try:
                    now = obj.resolve()
                except ValueError as e:
                    now = f"error: {e}"
                fam = mod.split(".")[1]
                out.append(dict(family="every op" if fam == "_callcache" else fam, keyword=obj.name, env=obj.env,
                                default=obj.default,
                                now=now, what=obj.what))
    return out
