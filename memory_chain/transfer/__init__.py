"""Conversations and facts in and out of memory_chain as JSON Lines (``export``/``import``).

:mod:`.format` is the versioned line format; :mod:`.jsonl` reads and writes files with it.
The file format is documented in ``docs/cli.md``.
"""

from memory_chain.transfer.format import (
    FACT_FORMAT,
    FACT_VERSIONS,
    FORMAT,
    READABLE_VERSIONS,
    VERSION,
    fact_from_json,
    fact_to_json,
    format_timestamp,
    line_from_json,
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
    "FACT_FORMAT",
    "FACT_VERSIONS",
    "FORMAT",
    "READABLE_VERSIONS",
    "VERSION",
    "ImportFileError",
    "Progress",
    "TransferReport",
    "atomic_text_file",
    "export_jsonl",
    "fact_from_json",
    "fact_to_json",
    "format_timestamp",
    "import_jsonl",
    "line_from_json",
    "read_jsonl",
    "record_from_json",
    "record_to_json",
]
