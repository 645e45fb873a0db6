"""Summarize an Nsight Compute source view (`ncu --section SourceCounters --page source --print-source sass --csv`):
the warp stall samples by reason, the instructions with the most samples, and the shared-memory accesses whose
wavefronts exceed the ideal (bank conflicts). Usage: python benchmarks/experiments/ncu_source_summary.py CSV [TOP]"""

import collections
import csv
import sys


def summarize(path: str, top: int = 15) -> dict:
    rows = list(csv.reader(open(path)))
    hi = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    head = rows[hi]
    ix = {n: i for i, n in enumerate(head)}
    data = [r for r in rows[hi + 1:] if len(r) == len(head)]
    stalls = [n for n in head if n.startswith("stall_") and "Not Issued" not in n]
    total = collections.Counter()
    for r in data:
        for s in stalls:
            total[s] += int(r[ix[s]] or 0)
    n_samples = sum(total.values())
    by_line = sorted(((int(r[ix["Warp Stall Sampling (All Samples)"]] or 0), k, r[1].strip()) for k, r in
                      enumerate(data)), reverse=True)[:top]
    wf = ideal = 0
    conflicts = []
    for k, r in enumerate(data):
        w, i = int(r[ix["L1 Wavefronts Shared"]] or 0), int(r[ix["L1 Wavefronts Shared Ideal"]] or 0)
        wf, ideal = wf + w, ideal + i
        if w > i:
            conflicts.append((w - i, k, r[1].strip(), w, i))
    # the samples per stretch between thread-block cluster barriers (UCGABAR_ARV / UCGABAR_WAIT: the cluster merge's
    # partial stores and the attention before the first arrival, the barrier, the merge after the wait), by reason
    regions, cur = [], None
    for r in data:
        tag = "arrive" if "UCGABAR_ARV" in r[1] else "wait" if "UCGABAR_WAIT" in r[1] else None
        if cur is None or tag:
            cur = dict(start=tag or "entry", samples=0, reasons=collections.Counter(), instructions=0)
            regions.append(cur)
        cur["instructions"] += 1
        cur["samples"] += int(r[ix["Warp Stall Sampling (All Samples)"]] or 0)
        for st in stalls:
            cur["reasons"][st[6:]] += int(r[ix[st]] or 0)
    regions = [dict(start=g["start"], instructions=g["instructions"],
                    pct=round(100 * g["samples"] / max(1, n_samples), 1),
                    reasons={k: round(100 * v / max(1, n_samples), 1) for k, v in g["reasons"].most_common(4)})
               for g in regions]
    return dict(samples=n_samples, regions=regions,
                stalls={s[6:]: round(100 * v / max(1, n_samples), 1) for s, v in total.most_common(8)},
                top_lines=[(k, round(100 * n / max(1, n_samples), 1), src) for n, k, src in by_line],
                shared_wavefronts=wf, shared_ideal=ideal,
                conflicts=[dict(line=k, sass=src, wavefronts=w, ideal=i) for _, k, src, w, i in sorted(conflicts,
                                                                                                      reverse=True)[:top]])


if __name__ == "__main__":
    s = summarize(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 15)
    print(f"samples {s['samples']}: " + ", ".join(f"{k} {v} %" for k, v in s["stalls"].items()))
    if len(s["regions"]) > 1:
        for g in s["regions"]:
            print(f"  from {g['start']}: {g['instructions']} instructions, {g['pct']} % of samples: "
                  + ", ".join(f"{k} {v}" for k, v in g["reasons"].items()))
    for k, pct, src in s["top_lines"]:
        print(f"  line {k:5d} {pct:5.1f} %  {src[:90]}")
    print(f"shared wavefronts {s['shared_wavefronts']} (ideal {s['shared_ideal']})")
    for c in s["conflicts"]:
        print(f"  line {c['line']:5d} {c['wavefronts']} against {c['ideal']}  {c['sass'][:80]}")
