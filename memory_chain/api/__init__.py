"""The HTTP layer: FastAPI app factory, routers and error mapping. Business logic lives below."""

from memory_chain.api.app import create_app

__all__ = ["create_app"]
