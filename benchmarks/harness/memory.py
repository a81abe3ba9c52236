"""A process's memory: resident set (VmRSS) and its heap and mapped-file parts."""

from __future__ import annotations

from pathlib import Path

import psutil

MB = 1024 * 1024


def rss_mb(pid: int | None = None) -> float:
    """Resident memory (VmRSS) of this process or of ``pid``, in MB."""
    return float(psutil.Process(pid).memory_info().rss) / MB


def memory_mb(pid: int | str = "self") -> dict[str, float]:
    """VmRSS and its parts from ``/proc/<pid>/status``, in MB (Linux; VmRSS alone elsewhere).

    ``anon`` (``RssAnon``) is the heap, what a leak grows; ``file`` (``RssFile``) is file
    pages mapped in, such as the embedded vector index's segments, which the kernel can drop
    under pressure.
    """
    fields = {"VmRSS": "rss", "RssAnon": "anon", "RssFile": "file", "RssShmem": "shmem"}
    found: dict[str, float] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in fields:
                found[fields[key]] = int(value.split()[0]) / 1024  # kB
    except OSError:
        pass
    if "rss" not in found:
        found["rss"] = rss_mb(None if pid == "self" else int(pid))
    return found


def heap_mb(pid: int | str = "self") -> float:
    """The heap (``RssAnon``) of this process or of ``pid``, in MB (Linux only).

    Raises:
        RuntimeError: Where ``/proc/<pid>/status`` has no ``RssAnon`` (not Linux).
    """
    found = memory_mb(pid).get("anon")
    if found is None:
        raise RuntimeError(f"no RssAnon in /proc/{pid}/status (Linux only)")
    return found
