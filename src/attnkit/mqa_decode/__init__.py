"""mqa_decode: small-head decode over packed FP8 / NVFP4 KV records. See docs/mqa_decode.md."""

from .interface import (mqa_decode_attention, mqa_decode_step, mqa_decode_warmup, mqa_decode_workspace,
                        mqa_write_records)

__all__ = ["mqa_decode_attention", "mqa_decode_step", "mqa_decode_warmup", "mqa_decode_workspace",
           "mqa_write_records"]
