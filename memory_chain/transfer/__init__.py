"""Conversations in and out of memory_chain as JSON Lines (``memory-chain export``/``import``).

:mod:`.format` is the versioned line format; :mod:`.jsonl` reads and writes files with it.
The file format is documented in ``docs/cli.md``.
"""

from memory_chain.transfer.format import (
    FORMAT,
    READABLE_VERSIONS,
    VERSION,
    format_timestamp,
    record_from_json,
    record_to_json,
)
from memory_chain.transfer.jsonl import (
    ImportFileError,
    Progress,
    TransferReport,
    atomic_text_file,
    export_jsonl,
    import_jsonl,
    read_jsonl,
)

__all__ = [
    "FORMAT",
    "READABLE_VERSIONS",
    "VERSION",
    "ImportFileError",
    "Progress",
    "TransferReport",
    "atomic_text_file",
    "export_jsonl",
    "format_timestamp",
    "import_jsonl",
    "read_jsonl",
    "record_from_json",
    "record_to_json",
]
