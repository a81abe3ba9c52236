"""A small server that speaks Ollama's HTTP API in front of an in-process llama.cpp model.

``ollama.Client`` and ``langchain_ollama.ChatOllama`` work against it unchanged, so the app can
run on the embedded model where no Ollama server is installed. Endpoints:

- ``GET /``, ``GET /api/version``, ``GET /api/tags``, ``POST /api/show``.
- ``POST /api/chat`` and ``POST /api/generate``, streamed (NDJSON, the default) or not. The last
  object has ``done: true``, ``done_reason``, ``prompt_eval_count``, ``eval_count`` and the
  durations. Honoured ``options``: temperature, top_k, top_p, min_p, repeat_penalty,
  num_predict, seed, stop; ``format``: ``"json"`` or a JSON schema. Other options are ignored.
- ``POST /api/embed`` and ``/api/embeddings`` answer 501: a chat model makes poor embeddings,
  and memory_chain embeds with sentence-transformers.

One server may serve several models (say the 0.5B for chat and the 1.5B for summaries), each
with its own engine: a request goes to the model it names. Only served names are accepted
(``:latest`` may be added): another name gets Ollama's 404, so a misconfigured client fails
loudly instead of silently getting another model. Requests with tools or thinking get a 400,
as Ollama answers for models without those capabilities. Malformed requests get a 400 with
``{"error": ...}``. Generations run one at a time per model.

Run it standalone, then point ``ChatOllama(base_url="http://127.0.0.1:11434",
model="qwen2.5-coder:0.5b")`` at it::

    python -m memory_chain.local_llm.ollama_api --port 11434
    python -m memory_chain.local_llm.ollama_api --model qwen2.5-coder:0.5b --model ~/my.gguf
    python -m memory_chain.local_llm.ollama_api --model-path my.gguf --model-name mine
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import threading
from collections.abc import Iterable, Mapping, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, cast

from memory_chain.errors import InvalidInputError
from memory_chain.local_llm.engine import (
    DEFAULT_N_CTX,
    DEFAULT_N_THREADS,
    GenerationOptions,
    LlamaEngine,
)
from memory_chain.local_llm.model import (
    DEFAULT_MODEL,
    default_models_dir,
    embedded_model,
    ensure_local_model,
)
from memory_chain.local_llm.protocol import (
    OLLAMA_API_VERSION,
    OllamaProtocol,
    RequestError,
    ServedModels,
)

logger = logging.getLogger(__name__)

#: Ollama's own port: clients set up for a local Ollama find this server there.
DEFAULT_PORT = 11434
_MAX_BODY = 8 * 1024 * 1024


class OllamaAPIServer:
    """Serve GGUF chat models over Ollama's API from a background thread.

    Example:
        >>> from langchain_ollama import ChatOllama
        >>> path = ensure_local_model(default_models_dir())  # doctest: +SKIP
        >>> with OllamaAPIServer(path) as server:  # doctest: +SKIP
        ...     llm = ChatOllama(base_url=server.url, model="qwen2.5-coder:0.5b", num_predict=32)
        ...     print(llm.invoke("Say hi").content)

    Args:
        model_path: The GGUF file (see :func:`~memory_chain.local_llm.model.ensure_local_model`).
        host: Address to bind; keep the loopback unless the port is firewalled.
        port: Port to bind; 0 picks a free one (read :attr:`url` after :meth:`start`).
        model_name: The name clients must ask for.
        n_threads: CPU threads for llama.cpp (each model's).
        n_ctx: Context window in tokens (prompt and answer), each model's.
        more_models: Other models to serve beside it, GGUF file by name (each loaded in
            full: the memory of each).
    """

    def __init__(
        self,
        model_path: Path | str,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        model_name: str = DEFAULT_MODEL.name,
        n_threads: int = DEFAULT_N_THREADS,
        n_ctx: int = DEFAULT_N_CTX,
        more_models: Mapping[str, Path | str] | None = None,
    ) -> None:
        paths = {model_name: Path(model_path)}
        paths.update((name, Path(path)) for name, path in (more_models or {}).items())
        self.models = ServedModels(
            [
                OllamaProtocol(LlamaEngine(path, n_ctx=n_ctx, n_threads=n_threads), name)
                for name, path in paths.items()
            ]
        )
        self.host, self.port = host, port
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL for clients, e.g. ``http://127.0.0.1:11434`` (the bound port once started)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def model_names(self) -> list[str]:
        """The served models' names, the first (``model_name``) first."""
        return [protocol.model_name for protocol in self.models.protocols]

    def start(self) -> str:
        """Load the models, bind the port and serve from a daemon thread.

        Returns:
            The base URL.
        """
        if self._httpd is None:
            for protocol in self.models.protocols:
                protocol.engine.load()
            self._httpd = _Server((self.host, self.port), self.models)
            self.port = self._httpd.server_address[1]
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, name="ollama-api", daemon=True
            )
            self._thread.start()
            logger.info("Ollama API for %s at %s", ", ".join(self.model_names), self.url)
        return self.url

    def stop(self) -> None:
        """Stop serving and free the models (a running generation ends at its next token)."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for protocol in self.models.protocols:
            protocol.engine.close()

    def __enter__(self) -> OllamaAPIServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], models: ServedModels) -> None:
        self.models = models
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; streams use chunked transfer encoding
    server_version = "memory-chain-ollama-api"

    @property
    def models(self) -> ServedModels:
        return cast(_Server, self.server).models

    def log_message(self, fmt: str, *args: Any) -> None:
        logger.debug("%s " + fmt, self.address_string(), *args)

    def do_HEAD(self) -> None:
        self._send(HTTPStatus.OK, b"", "text/plain; charset=utf-8")

    def do_GET(self) -> None:
        if self.path == "/":
            self._send(HTTPStatus.OK, b"Ollama is running", "text/plain; charset=utf-8")
        elif self.path == "/api/version":
            self._send_json(HTTPStatus.OK, {"version": OLLAMA_API_VERSION})
        elif self.path == "/api/tags":
            self._send_json(HTTPStatus.OK, self.models.tags())
        else:
            self._send_json(HTTPStatus.NOT_FOUND, {"error": f"{self.path} not found"})

    def do_POST(self) -> None:
        try:
            body = self._read_json()
            if self.path == "/api/show":
                self._send_json(HTTPStatus.OK, self.models.find(body).show())
            elif self.path in ("/api/chat", "/api/generate"):
                self._generate(self.path.removeprefix("/api/"), body)
            elif self.path in ("/api/embed", "/api/embeddings"):
                raise RequestError(
                    HTTPStatus.NOT_IMPLEMENTED,
                    "this server does not make embeddings: memory_chain embeds with "
                    "sentence-transformers",
                )
            else:
                raise RequestError(HTTPStatus.NOT_FOUND, f"{self.path} not found")
        except RequestError as exc:
            self._send_json(exc.status, {"error": str(exc)})
        except InvalidInputError as exc:
            self._send_json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
        except Exception as exc:
            logger.exception("%s failed", self.path)
            self.close_connection = True
            self._send_json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"server error: {exc}"})

    def _read_json(self) -> dict[str, Any]:
        length = self.headers.get("Content-Length", "0")
        if "Transfer-Encoding" in self.headers or not length.isdigit() or int(length) > _MAX_BODY:
            self.close_connection = True  # the body is not read: the connection is unusable
            raise RequestError(
                HTTPStatus.BAD_REQUEST, f"send a JSON body with a Content-Length up to {_MAX_BODY}"
            )
        try:
            body = json.loads(self.rfile.read(int(length)) or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RequestError(HTTPStatus.BAD_REQUEST, f"invalid JSON body: {exc}") from exc
        if not isinstance(body, dict):
            raise RequestError(HTTPStatus.BAD_REQUEST, "the body must be a JSON object")
        return body

    def _generate(self, endpoint: str, body: dict[str, Any]) -> None:
        protocol = self.models.find(body)
        model = protocol.check_model(body)
        prompt = protocol.prompt(endpoint, body)
        options = GenerationOptions.from_ollama(body.get("options"), body.get("format"))
        if prompt is None:
            done = {**protocol.line(endpoint, model, ""), "done": True, "done_reason": "load"}
            self._send_json(HTTPStatus.OK, done)
            return
        pieces = protocol.engine.generate(prompt, options)
        with contextlib.closing(pieces):
            if body.get("stream", True):
                self._stream(protocol.line(endpoint, model, p.text, p.stats) for p in pieces)
                return
            text: list[str] = []
            for piece in pieces:
                text.append(piece.text)
                if piece.stats is not None:
                    line = protocol.line(endpoint, model, "".join(text), piece.stats)
                    self._send_json(HTTPStatus.OK, line)

    def _stream(self, lines: Iterable[dict[str, Any]]) -> None:
        iterator = iter(lines)
        first = next(iterator)  # an error before the first token still gets a 4xx/5xx answer
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self._write_chunk(first)
            try:
                for line in iterator:
                    self._write_chunk(line)
            except (BrokenPipeError, ConnectionResetError):
                raise
            except Exception as exc:  # the status is sent: report in the stream, as Ollama does
                logger.exception("generation failed")
                self._write_chunk({"error": f"generation failed: {exc}"})
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            logger.info("the client left during a stream: generation stopped")
            self.close_connection = True

    def _write_chunk(self, obj: dict[str, Any]) -> None:
        data = json.dumps(obj).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _send_json(self, status: HTTPStatus, obj: dict[str, Any]) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json; charset=utf-8")

    def _send(self, status: HTTPStatus, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)


def main(argv: Sequence[str] | None = None) -> None:
    """Serve in the foreground until Ctrl-C or SIGTERM.

    Args:
        argv: Command-line arguments (default ``sys.argv[1:]``); see ``--help``.
    """
    parser = argparse.ArgumentParser(description="Serve embedded LLMs over Ollama's API.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--model-path", type=Path, help="a GGUF file, served as --model-name")
    parser.add_argument("--model-name", default=DEFAULT_MODEL.name)
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        help="an embedded model's name (qwen2.5-coder:0.5b, qwen2.5-coder:1.5b) or a .gguf "
        "path, assembled and checked; repeat to serve several (default: "
        f"{DEFAULT_MODEL.name} unless --model-path is given)",
    )
    parser.add_argument("--models-dir", type=Path, default=default_models_dir())
    parser.add_argument("--threads", type=int, default=DEFAULT_N_THREADS)
    parser.add_argument("--ctx", type=int, default=DEFAULT_N_CTX)
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(message)s")
    paths: dict[str, Path] = {}
    if args.model_path is not None:
        paths[args.model_name] = args.model_path
    for spec in args.model or ([] if paths else [DEFAULT_MODEL.name]):
        model = embedded_model(spec)
        paths[model.name] = ensure_local_model(args.models_dir, model=model)
    (first, path), *more = paths.items()
    server = OllamaAPIServer(
        path,
        args.host,
        args.port,
        model_name=first,
        n_threads=args.threads,
        n_ctx=args.ctx,
        more_models=dict(more),
    )
    stopped = threading.Event()

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        stopped.set()

    signal.signal(signal.SIGTERM, on_sigterm)
    with server, contextlib.suppress(KeyboardInterrupt):
        for name, served in paths.items():
            logger.info(
                "serving %s at %s: use ChatOllama(base_url=%r, model=%r)",
                served,
                server.url,
                server.url,
                name,
            )
        stopped.wait()
    logger.info("stopped")


if __name__ == "__main__":
    main()
