"""Numeric conventions shared by every family, as named constants.

Every kernel, oracle, gate and benchmark in attnkit follows these; nothing
restates them as literals.

- LSE is the natural logarithm of the softmax denominator, ``lse = m + log(l)``
  where ``m`` is the row maximum of the scores and ``l = sum(exp(s - m))``.
- A row that sees no key returns output 0 and LSE ``-inf``.
- A row whose scores or values hold a NaN (a NaN key or value in a cache, which
  the value checks do not scan) returns NaN output and LSE, never the empty row:
  every kernel, merge and oracle tests emptiness as ``l == 0``, not ``l <= 0``.
- ``-1`` in an index list marks an empty slot; it is skipped, never read.
- Split-K partials are *un-normalized*: per split the running maximum ``m``
  (``-inf`` for an empty split), the running sum ``l`` (0 for an empty split)
  and the accumulator ``acc = sum(exp(s - m) * v)`` (0 for an empty split).
  The merge is ``M = max m_s``, ``L = sum l_s exp(m_s - M)``,
  ``O = sum acc_s exp(m_s - M) / L``, ``LSE = M + log L``; an empty split
  contributes nothing, and a row whose splits are all empty is the empty row.
- Positions are bottom-right aligned: query ``i`` of a sequence with
  ``seqlen_q`` queries and ``seqlen_k`` keys sits at ``seqlen_k - seqlen_q + i``.
  A key ``j`` is visible to position ``pos`` when ``0 <= pos - j`` and, for a
  sliding window ``W``, ``pos - j < W`` (so ``W = 1`` sees only itself).
"""

from __future__ import annotations

import math

LSE_BASE = math.e
EMPTY_SLOT = -1
EMPTY_ROW_LSE = float("-inf")
EMPTY_ROW_OUT = 0.0

BIAS_BEYOND_MODES = ("zero", "clamp")

# Record layouts of mqa_decode (byte-exact).
MQA_DIM = 512
MQA_ROPE_DIM = 64
FP8_RECORD_BYTES = 528  # 512 e4m3 values + 16 UE8M0 scales (one per 32 dims)
FP8_BLOCK = 32
NVFP4_RECORD_BYTES = 288  # 256 bytes of e2m1 pairs + 32 e4m3 scales (one per 16 dims)
NVFP4_BLOCK = 16
E4M3_MAX = 448.0
E2M1_MAX = 6.0
UE8M0_BIAS = 127


def visible(dist, window):
    """Visibility of a key at distance ``dist = pos - j`` (works on ints and tensors)."""
    if window is None:
        return dist >= 0
    return (dist >= 0) & (dist < window)


def default_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)
