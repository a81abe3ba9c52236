"""Conversations, facts and store items in and out of memory_chain as JSON Lines.

``memory-chain export`` / ``import``: :mod:`.format` is the versioned line format (fact lines
in :mod:`.fact_lines`, store-item lines in :mod:`.items`, the typed field readers every kind
shares in :mod:`.fields`);
:mod:`.lines` reads and writes one line of any kind; :mod:`.plan` checks an import file as a
whole; :mod:`.jsonl` reads and writes files. The file format is documented in
``docs/cli.md``.
"""

from memory_chain.transfer.fact_lines import fact_from_json, fact_to_json
from memory_chain.transfer.fields import format_timestamp
from memory_chain.transfer.format import (
    FACT_FORMAT,
    FACT_VERSIONS,
    FORMAT,
    READABLE_VERSIONS,
    STORE_ITEM_FORMAT,
    STORE_ITEM_VERSIONS,
    VERSION,
    record_from_json,
    record_to_json,
)
from memory_chain.transfer.items import (
    check_store_item,
    store_item_from_json,
    store_item_to_json,
)
from memory_chain.transfer.jsonl import (
    Progress,
    TransferReport,
    atomic_text_file,
    export_jsonl,
    export_lines,
    import_jsonl,
    read_jsonl,
    user_export,
)
from memory_chain.transfer.lines import Line, export_line, line_from_json
from memory_chain.transfer.plan import ImportFileError

__all__ = [
    "FACT_FORMAT",
    "FACT_VERSIONS",
    "FORMAT",
    "READABLE_VERSIONS",
    "STORE_ITEM_FORMAT",
    "STORE_ITEM_VERSIONS",
    "VERSION",
    "ImportFileError",
    "Line",
    "Progress",
    "TransferReport",
    "atomic_text_file",
    "check_store_item",
    "export_jsonl",
    "export_line",
    "export_lines",
    "fact_from_json",
    "fact_to_json",
    "format_timestamp",
    "import_jsonl",
    "line_from_json",
    "read_jsonl",
    "record_from_json",
    "record_to_json",
    "store_item_from_json",
    "store_item_to_json",
    "user_export",
]
