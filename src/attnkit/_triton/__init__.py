"""@triton.jit code shared by the families. Host code lives outside this package."""
