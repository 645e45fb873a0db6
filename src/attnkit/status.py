"""What exists, per family: the kernel paths and whether they are implemented. ``attnkit report``
renders this into the README; keep it true (the tests check that an implemented path has a gate)."""

KERNEL_PATHS = {
    "sparse_int8": [
        ("prefill (many rows; gated on the H200 at e3c66a8, 3.9 ms at 2048 rows: the 0.45 ms target is not met)",
         "implemented"),
        ("split-K decode (1-16 rows) + merge (gated on the H200 at e3c66a8; 11 / 26 us at 1 / 8 rows: the "
         "6 / 8 us targets are not met)", "implemented"),
    ],
    "mqa_decode": [
        ("head-padded (heads on M, padded to 64; gated on the H200 at e3c66a8; the dispatched path)", "implemented"),
        ("swap-AB (slots on M, 16 / 32 live heads on N; gated on the H200 at e3c66a8, measured slower than "
         "head-padded at every shape, so the dispatch cutoff is none and only kernel='swapab' selects it)",
         "implemented"),
        ("record writer (fp8 / nvfp4; byte-exact gate on the H200 at e3c66a8)", "implemented"),
    ],
    "relbias": [
        ("forward: prefill / chunked / varlen / paged / fp8 (Triton)", "implemented"),
        ("decode / verify: split-K with GQA packing + Triton merge", "implemented"),
        ("paged KV writer (fp8 quantizing; run in the interpreter only, not yet on a GPU)", "implemented"),
    ],
    "merge": [
        ("Triton split-K merge (shared by the decode kernels)", "implemented"),
    ],
}
