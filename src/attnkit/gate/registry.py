"""Gate specifications: what is checked against which oracle, on which shape families, and which
deliberate perturbations each gate must catch (its power checks).

A gate's ``subject(inp, perturb)`` runs the code under test on one input dictionary; ``perturb=None``
is the honest run, any name from ``perturbations`` a deliberately wrong variant. A perturbation is
*caught* when the compare rule fails on at least one of the gate's cases. A gate whose perturbation
is never caught fails: it has not been seen failing, so it is not known to be a gate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch


@dataclass(frozen=True)
class Perturbation:
    name: str
    what: str
    applies: Callable = lambda case: True  # noqa: E731


@dataclass(frozen=True)
class Gate:
    name: str
    family: str  # family of the oracle and inputs: relbias | sparse_int8 | mqa_decode | merge
    groups: tuple  # shape families covered
    subject: Callable  # (inp, perturb) -> (out, lse | None)
    what: str
    perturbations: tuple = field(default_factory=tuple)
    needs: str = "any"  # "any": CPU (interpreter / eager) or GPU; "cuda": GPU only; "sm90": Hopper GPU only (Gluon)
    out_dtype: torch.dtype = torch.bfloat16
    wants_case: bool = False  # subject(inp, perturb, case=case)
    applies: Callable = lambda case: True  # noqa: E731  (cases of the groups this gate takes)
    oracle: Callable | None = None  # (inp) -> (out, lse); default: the family's fp64 oracle
    exact: bool = False  # bytes must equal the oracle's (writers); else the compare rule
    kind: str = "kernel"  # "kernel": ours, an exception fails the case; "peer": an exception on a shape
    #                       means the peer cannot take it ("unsupported", recorded with its error)

    def call(self, inp, perturb, case):
        return self.subject(inp, perturb, case=case) if self.wants_case else self.subject(inp, perturb)

    def available(self, device: str):
        if self.needs in ("cuda", "sm90") and device != "cuda":
            return False, "needs a CUDA GPU"
        if self.needs == "sm90":
            from .._runtime import gluon_runs
            if not gluon_runs(torch.device("cuda")):
                return False, "needs an sm_90 GPU (a Gluon kernel)"
        return True, ""


_GATES: list[Gate] = []


def register(g: Gate) -> Gate:
    if any(x.name == g.name for x in _GATES):
        raise ValueError(f"duplicate gate {g.name}")
    _GATES.append(g)
    return g


def gates(family: str | None = None) -> list[Gate]:
    _load()
    return [g for g in _GATES if family is None or g.family == family or g.name.split("/")[0] == family]


_LOADED = False


def _load():
    global _LOADED
    if not _LOADED:
        _LOADED = True
        from . import specs  # noqa: F401  (registers the gates)
