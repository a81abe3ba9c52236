"""``python -m memory_chain.cli``: the ``memory-chain`` command."""

from memory_chain.cli import app

app(prog_name="memory-chain")
