"""Ollama's API, the part without HTTP: request checks and response bodies for its models.

:mod:`memory_chain.local_llm.ollama_api` moves these bodies over HTTP. Field names and error
texts follow Ollama's server, since ``ollama.Client`` and ``ChatOllama`` parse them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

from memory_chain.local_llm.engine import GenerationStats, LlamaEngine

#: Ollama version this server imitates (clients only display it).
OLLAMA_API_VERSION = "0.12.0"
_ROLES = frozenset({"system", "user", "assistant", "tool"})


class RequestError(Exception):
    """A request the server refuses, with the HTTP status to answer (body ``{"error": ...}``)."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def now() -> str:
    """Timestamp in Ollama's format (RFC 3339, UTC)."""
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def requested_model(body: dict[str, Any]) -> str:
    """The model a request names (``model``, or ``name`` as older clients send).

    Raises:
        RequestError: 400 without a name.
    """
    name = body.get("model") or body.get("name")
    if not isinstance(name, str) or not name:
        raise RequestError(HTTPStatus.BAD_REQUEST, "model is required")
    return name


class OllamaProtocol:
    """Ollama's request and response shapes for one model served by a :class:`LlamaEngine`.

    Example:
        >>> protocol = OllamaProtocol(engine, "qwen2.5-coder:0.5b")  # doctest: +SKIP
        >>> protocol.check_model({"model": "llama3"})  # doctest: +SKIP
        Traceback (most recent call last):
        RequestError: model "llama3" not found, try pulling it first

    Args:
        engine: The loaded model.
        model_name: The only name requests may ask for (``:latest`` may be added or left out).
    """

    def __init__(self, engine: LlamaEngine, model_name: str) -> None:
        self.engine = engine
        self.model_name = model_name

    def serves(self, name: str) -> bool:
        """Whether ``name`` is this model's (``:latest`` may be added or left out)."""
        return name.removesuffix(":latest") == self.model_name.removesuffix(":latest")

    def check_model(self, body: dict[str, Any]) -> str:
        """Return the requested model name if it is the served one.

        Raises:
            RequestError: 400 without a name, 404 (Ollama's words) for another model.
        """
        name = requested_model(body)
        if not self.serves(name):
            raise RequestError(
                HTTPStatus.NOT_FOUND, f'model "{name}" not found, try pulling it first'
            )
        return name

    def tags(self) -> dict[str, Any]:
        """Body of ``GET /api/tags`` for this model alone."""
        stat = self.engine.model_path.stat()
        model = {
            "name": self.model_name,
            "model": self.model_name,
            "modified_at": datetime.fromtimestamp(stat.st_mtime, UTC).isoformat(),
            "size": stat.st_size,
            "digest": "",
            "details": self._details(),
        }
        return {"models": [model]}

    def show(self) -> dict[str, Any]:
        """Body of ``POST /api/show``."""
        meta = self.engine.metadata
        return {
            "modelfile": f"FROM {self.engine.model_path}\n",
            "parameters": f"num_ctx {self.engine.n_ctx}",
            "template": meta.get("tokenizer.chat_template", ""),
            "details": self._details(),
            "model_info": {k: v for k, v in meta.items() if not k.startswith("tokenizer.")},
            "capabilities": ["completion"],
        }

    def _details(self) -> dict[str, Any]:
        meta = self.engine.metadata
        family = meta.get("general.architecture", "")
        return {
            "parent_model": "",
            "format": "gguf",
            "family": family,
            "families": [family] if family else None,
            "parameter_size": meta.get("general.size_label", ""),
            "quantization_level": "Q4_K_M" if meta.get("general.file_type") == "15" else "",
        }

    def prompt(self, endpoint: str, body: dict[str, Any]) -> str | None:
        """Check a ``/api/chat`` or ``/api/generate`` request and render its prompt.

        Args:
            endpoint: ``"chat"`` or ``"generate"``.
            body: The request.

        Returns:
            The prompt, or None when there is nothing to answer (no messages, empty prompt):
            Ollama then only loads the model and answers ``done_reason: "load"``.

        Raises:
            RequestError: The request is malformed, or asks for tools or thinking.
        """
        self.check_model(body)
        for feature, key in (("tools", "tools"), ("thinking", "think")):
            if body.get(key):
                raise RequestError(
                    HTTPStatus.BAD_REQUEST, f"{self.model_name} does not support {feature}"
                )
        if endpoint == "generate":
            prompt, system = body.get("prompt") or "", body.get("system") or ""
            if not isinstance(prompt, str) or not isinstance(system, str):
                raise RequestError(HTTPStatus.BAD_REQUEST, "prompt and system must be strings")
            if not prompt or body.get("raw"):
                return prompt or None
            messages = [{"role": "user", "content": prompt}]
            if system:
                messages.insert(0, {"role": "system", "content": system})
            return self.engine.render_chat(messages)
        raw = body.get("messages") or []
        if not isinstance(raw, list) or not all(
            isinstance(m, dict)
            and m.get("role") in _ROLES
            and isinstance(m.get("content") or "", str)
            for m in raw
        ):
            raise RequestError(
                HTTPStatus.BAD_REQUEST,
                "messages must be a list of {role, content} objects, role one of system, user, "
                "assistant, tool, and content a string",
            )
        chat = [{"role": m["role"], "content": m.get("content") or ""} for m in raw]
        return self.engine.render_chat(chat) if chat else None

    @staticmethod
    def line(
        endpoint: str, model: str, text: str, stats: GenerationStats | None = None
    ) -> dict[str, Any]:
        """One response object: a streamed piece, or the final one when ``stats`` is given.

        The final object carries ``done: true``, ``done_reason``, the token counts and the
        durations; ChatOllama reads the usage from it.
        """
        out: dict[str, Any] = {"model": model, "created_at": now()}
        if endpoint == "chat":
            out["message"] = {"role": "assistant", "content": text}
        else:
            out["response"] = text
        out["done"] = stats is not None
        if stats is not None:
            out.update(asdict(stats), load_duration=0)
        return out


class ServedModels:
    """The models one server offers, each with its engine: a request goes to the one it names.

    Args:
        protocols: One per model, the first listed first by ``/api/tags``.
    """

    def __init__(self, protocols: Sequence[OllamaProtocol]) -> None:
        if not protocols:
            raise ValueError("serve at least one model")
        self.protocols = list(protocols)

    def find(self, body: dict[str, Any]) -> OllamaProtocol:
        """The model a request names.

        Raises:
            RequestError: 400 without a name, 404 (Ollama's words) for a model not served.
        """
        name = requested_model(body)
        for protocol in self.protocols:
            if protocol.serves(name):
                return protocol
        raise RequestError(HTTPStatus.NOT_FOUND, f'model "{name}" not found, try pulling it first')

    def tags(self) -> dict[str, Any]:
        """Body of ``GET /api/tags``: every served model."""
        return {"models": [m for p in self.protocols for m in p.tags()["models"]]}
