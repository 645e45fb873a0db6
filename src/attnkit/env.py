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


# the modules whose Switch / IntOption objects the ops read (a test checks that no other module defines one)
OPTION_MODULES = ("attnkit.relbias.config", "attnkit.sparse_int8.config", "attnkit.mqa_decode.config",
                  "attnkit.splitk", "attnkit._callcache")


def _option_objects():
    """(family, option) for every Switch / IntOption of OPTION_MODULES, in module order then definition order;
    diagnostics options (a keyword starting with "_": wrong results by design) included."""
    import importlib

    from .options import IntOption, Switch
    for mod in OPTION_MODULES:
        fam = mod.split(".")[1]
        for obj in vars(importlib.import_module(mod)).values():
            if isinstance(obj, (Switch, IntOption)):
                yield ("every op" if fam == "_callcache" else fam), obj


def tuning_options() -> list[dict]:
    """Every tuning option (attnkit.options.Switch / IntOption) the ops read: keyword, variable, default,
    the value in this environment (or the error a bad one raises), and what it does."""
    out = []
    for fam, obj in _option_objects():
        if obj.name.startswith("_"):
            continue
        try:
            now = obj.resolve()
        except ValueError as e:
            now = f"error: {e}"
        out.append(dict(family=fam, keyword=obj.name, env=obj.env, default=obj.default, now=now, what=obj.what))
    return out


def _option_keywords() -> dict:
    """(family, keyword) -> the public ops of that family that take it as a keyword argument (by their signatures;
    mqa_decode_step forwards mqa_decode_attention's and takes the writer's as writer_*; mqa_write_records names the
    writer's without it)."""
    import inspect

    from .mqa_decode import interface as mqa
    from .relbias import interface as rb
    from .sparse_int8 import interface as si
    ops = [si.sparse_int8_attention, mqa.mqa_decode_attention, mqa.mqa_decode_step, mqa.mqa_decode_warmup,
           mqa.mqa_write_records, rb.relbias_attention, rb.relbias_write_kv]
    alias = {("mqa_write_records", "loads_first"): "writer_loads_first",
             ("mqa_write_records", "release_early"): "writer_release_early"}
    out: dict = {}
    for op in ops:
        names = [n for n, p in inspect.signature(op).parameters.items() if p.kind is p.KEYWORD_ONLY]
        if op is mqa.mqa_decode_step:
            names += [n for n, p in inspect.signature(mqa.mqa_decode_attention).parameters.items()
                      if p.kind is p.KEYWORD_ONLY and n != "pdl_early_inputs"]  # (the step sets it)
            names += ["writer_loads_first", "writer_release_early"]
        for n in names:
            key = alias.get((op.__name__, n), n)
            label = op.__name__ if key == n else f"{op.__name__} (as `{n}`)"
            fam = op.__module__.split(".")[1]
            if label not in out.setdefault((fam, key), []):
                out[(fam, key)].append(label)
    return out


def options_reference() -> str:
    """docs/options.md, generated from the option objects themselves (`attnkit report` writes it; a test checks
    that the committed file is what this returns): every option's keyword, variable, default, accepted values and
    description, per family; the diagnostics options apart."""
    import textwrap

    from .options import Switch

    def cell(x) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    kw = _option_keywords()

    def row(fam, obj) -> str:
        fams = (fam,) if fam in ("relbias", "sparse_int8", "mqa_decode") else ("sparse_int8", "mqa_decode", "relbias")
        ops = ", ".join(o for f in fams for o in kw.get((f, obj.name), [])) or "none: the environment variable only"
        if isinstance(obj, Switch):
            default = "the rule" if obj.default is None else ("on" if obj.default else "off")
            accepts = "`True` / `False`, `\"0\"` / `\"1\"`"
        else:
            default = "the rule" if obj.default is None else str(obj.default)
            accepts = f"a whole integer in [{obj.lo}, {obj.hi}]"
        return f"| `{obj.name}` | `{obj.env}` | {default} | {accepts} | {ops} | {cell(obj.what)} |"

    head = ("| keyword | environment variable | default | accepts | keyword argument of | what it does |\n"
            "|---|---|---|---|---|---|")
    intro = ("Generated by `attnkit report` from the option objects in `attnkit/*/config.py`, `attnkit/splitk.py` "
             "and `attnkit/_callcache.py`; do not edit. Each option is an environment variable and, where the column "
             "says so, a keyword argument of those ops; an explicit argument beats the variable, the variable the "
             "default. A switch accepts exactly `\"0\"` or `\"1\"` (or a bool), an integer option a whole decimal "
             "integer in its range (some accept only the values their description names); anything else raises a "
             "`ValueError` naming the option when the op is configured. \"The rule\": decided per launch by the "
             "family's launch rule, whose evidence is written beside it in the family's `config.py`. `attnkit env` "
             "lists the same options with their values in the current environment.")
    lines = ["# Tuning options", "", *textwrap.wrap(intro, 110, break_on_hyphens=False), ""]
    fams: dict = {}
    diag = []
    for fam, obj in _option_objects():
        (diag if obj.name.startswith("_") else fams.setdefault(fam, [])).append((fam, obj))
    for fam, objs in fams.items():
        lines += [f"## {fam}", "", head] + [row(f, o) for f, o in objs] + [""]
    if diag:
        lines += ["## Diagnostics (wrong results by design: for timing where a kernel's time goes, never for "
                  "serving)", "", "| family " + head.split("\n")[0], "|---" + head.split("\n")[1]]
        lines += [f"| {fam} " + row(fam, o) for fam, o in diag] + [""]
    return "\n".join(lines)
