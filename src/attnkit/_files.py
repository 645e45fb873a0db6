"""Files the tools write while a run may be stopped (check results, bench artifacts, shard status)."""

from __future__ import annotations

import os
from pathlib import Path


def write_whole(path, text: str) -> None:
    """Write `text` to a temporary file beside `path`, then rename it over `path`: a reader, or a run stopped
    mid-write, sees the previous version or this one whole, never a cut file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
