"""memory_chain server: ``python server.py``, ``uvicorn server:app`` or ``memory-chain serve``.

Wiring only: settings are read when the app starts, everything else lives in ``memory_chain``.
"""

from __future__ import annotations

from memory_chain.api import create_app

app = create_app()

if __name__ == "__main__":
    from memory_chain.cli import serve

    serve()
