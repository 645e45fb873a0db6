"""What exists, per family: the kernel paths and whether they are implemented. ``attnkit report``
renders this into the README; keep it true (the tests check that an implemented path has a gate)."""

KERNEL_PATHS = {
    "sparse_int8": [
        ("prefill (many rows; interpreter only, not yet run on a GPU)", "implemented"),
        ("split-K decode (1-16 rows) + merge (interpreter only, not yet run on a GPU)", "implemented"),
    ],
    "mqa_decode": [
        ("head-padded (heads on M, padded to 64; interpreter only, not yet run on a GPU)", "implemented"),
        ("swap-AB (slots on M, 16 / 32 live heads on N; interpreter only, not yet run on a GPU; the dispatch "
         "cutoff is not measured, so only an explicit kernel='swapab' selects it)", "implemented"),
        ("record writer (fp8 / nvfp4; interpreter only, not yet run on a GPU)", "implemented"),
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
