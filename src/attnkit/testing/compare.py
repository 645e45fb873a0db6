"""The one compare rule, and output poisoning.

Rule (after FlashAttention-4's tests): the kernel's error against the fp64 oracle is at most
``FACTOR`` times the error of the same computation done by PyTorch in the input precision (the
*baseline*), plus a stated floor. It is applied to two norms:

- max-abs error:  max|out - ref| <= FACTOR * max|base - ref| + floor_abs
- relative RMS:   ||out - ref|| / ||ref|| <= FACTOR * (||base - ref|| / ||ref||) + floor_rel

The floors cover a baseline that happens to land closer than rounding allows: ``floor_abs`` is one
ulp of the output dtype at the oracle's largest magnitude (one final rounding of the largest element
can cost that much), ``floor_rel`` is half an ulp of the output dtype (the RMS of one final
rounding is below that). NaN anywhere fails. The LSE, where both sides give one, obeys the same rule
on its finite entries, and its -inf entries (empty rows) must match exactly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

FACTOR = 2.0
_ULP = {torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10, torch.float32: 2.0 ** -23, torch.float64: 2.0 ** -52}
_POISON_BYTE = 0xA5


def ulp(dtype: torch.dtype) -> float:
    return _ULP.get(dtype, 2.0 ** -7)


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill an output buffer so that an element the kernel does not write shows: NaN for floats,
    0xA5 bytes otherwise."""
    if t.dtype.is_floating_point and t.element_size() > 1:
        t.fill_(float("nan"))
    else:
        t.view(torch.uint8).fill_(_POISON_BYTE)
    return t


def unwritten(t: torch.Tensor) -> int:
    """Elements still holding the poison (NaN for floats)."""
    if t.dtype.is_floating_point and t.element_size() > 1:
        return int(torch.isnan(t).sum())
    return int((t.view(torch.uint8) == _POISON_BYTE).sum())


def nan_rows(out: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    """Per output row (all axes but the last): whether it is NaN, on the CPU. A NaN row must be NaN whole: every
    dim of out and its LSE (asserted)."""
    o = out.float().cpu()
    rows = torch.isnan(o).any(-1)
    assert torch.equal(rows, torch.isnan(o).all(-1)), "a row NaN in some dims only"
    assert torch.equal(rows, torch.isnan(lse.cpu())), "NaN rows and NaN LSE differ"
    return rows


def error_stats(x: torch.Tensor, ref: torch.Tensor):
    """(relative RMS error, max-abs error) of x against ref, in fp64; NaN-aware (NaN -> inf)."""
    d = x.to(torch.float64) - ref.to(torch.float64)
    if d.numel() == 0:
        return 0.0, 0.0
    if not torch.isfinite(d).all():
        return float("inf"), float("inf")
    den = float(ref.to(torch.float64).norm())
    num = float(d.norm())
    rel = num / den if den > 0 else (0.0 if num == 0 else float("inf"))
    return rel, float(d.abs().max())


@dataclass
class Comparison:
    ok: bool
    rel_rms: float
    max_abs: float
    base_rel_rms: float
    base_max_abs: float
    bound_rel_rms: float
    bound_max_abs: float
    lse_max_abs: float | None = None
    lse_bound: float | None = None
    reason: str = ""

    @property
    def worst_ratio(self) -> float:
        """Largest error / bound over the checked norms (<= 1 passes)."""
        rs = [self.max_abs / self.bound_max_abs if self.bound_max_abs > 0 else (0.0 if self.max_abs == 0 else float("inf")),
              self.rel_rms / self.bound_rel_rms if self.bound_rel_rms > 0 else (0.0 if self.rel_rms == 0 else float("inf"))]
        if self.lse_max_abs is not None and self.lse_bound:
            rs.append(self.lse_max_abs / self.lse_bound)
        return max(rs)

    def as_dict(self):
        d = asdict(self)
        d["worst_ratio"] = self.worst_ratio
        return d


def _lse_check(lse, lse_ref, lse_base, factor, floor):
    lse = lse.to(torch.float64)
    lse_ref = lse_ref.to(torch.float64)
    empty_ref = torch.isneginf(lse_ref)
    if not torch.equal(torch.isneginf(lse), empty_ref) or torch.isnan(lse).any():
        return float("inf"), 0.0, "LSE: empty rows (-inf) differ from the oracle's, or NaN"
    fin = ~empty_ref
    if not fin.any():
        return 0.0, 0.0, ""
    err = float((lse[fin] - lse_ref[fin]).abs().max())
    if lse_base is not None:
        lb = lse_base.to(torch.float64)
        lb = torch.where(torch.isfinite(lb), lb, lse_ref)
        base = float((lb[fin] - lse_ref[fin]).abs().max())
    else:
        base = 0.0
    scale = float(lse_ref[fin].abs().max())
    bound = factor * base + floor * max(1.0, scale)
    return err, bound, ""


def compare(out, ref, base, *, out_dtype=None, lse=None, lse_ref=None, lse_base=None, factor: float = FACTOR,
            floor_abs: float | None = None, floor_rel: float | None = None) -> Comparison:
    """Apply the rule. ``base`` is the PyTorch-in-input-precision result of the same computation."""
    dt = out_dtype or out.dtype
    refmax = float(ref.to(torch.float64).abs().max()) if ref.numel() else 0.0
    fa = ulp(dt) * refmax if floor_abs is None else floor_abs
    fr = 0.5 * ulp(dt) if floor_rel is None else floor_rel
    rel, mx = error_stats(out, ref)
    brel, bmx = error_stats(base, ref)
    if brel == float("inf"):  # a baseline that produced NaN (e.g. SDPA on an empty row) bounds nothing
        brel, bmx = 0.0, 0.0
    c = Comparison(ok=True, rel_rms=rel, max_abs=mx, base_rel_rms=brel, base_max_abs=bmx,
                   bound_rel_rms=factor * brel + fr, bound_max_abs=factor * bmx + fa)
    reasons = []
    if mx > c.bound_max_abs:
        reasons.append(f"max-abs {mx:.3e} > bound {c.bound_max_abs:.3e}")
    if rel > c.bound_rel_rms:
        reasons.append(f"rel-RMS {rel:.3e} > bound {c.bound_rel_rms:.3e}")
    if lse is not None and lse_ref is not None:
        err, bound, why = _lse_check(lse, lse_ref, lse_base, factor, 2.0 ** -14)
        c.lse_max_abs, c.lse_bound = err, bound
        if why:
            reasons.append(why)
        elif err > bound:
            reasons.append(f"LSE max-abs {err:.3e} > bound {bound:.3e}")
    c.ok = not reasons
    c.reason = "; ".join(reasons)
    return c
