"""One typed settings tree. Environment variables use the prefix ``HEARTH_`` and ``__`` between levels,
for example ``HEARTH_MODEL__CONTEXT_LENGTH=8192`` or ``HEARTH_SERVER__PORT=7861``. Loaded once, at start,
by :func:`load_settings`; never at import."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

from backends.base import DEFAULT_PASSAGE_RECOMPUTE
from models.shared.errors import HearthError

DEFAULT_SYSTEM_PROMPT = (
    "You are Hearth, a helpful assistant running entirely on this computer. Answer clearly and concisely."
)


def _empty_is_unset(value: Any) -> Any:
    """A path setting given as an empty string (`HEARTH_HOME=`) is unset, as each one's description says; pydantic
    would read it as Path(""), the current folder."""
    return None if isinstance(value, str) and not value.strip() else value


class ModelSettings(BaseModel):
    path: Path | None = Field(
        default=None, description="GGUF file to chat with. Empty means the embedded SmolLM2-135M-Instruct."
    )
    _empty_path = field_validator("path", mode="before")(_empty_is_unset)
    context_length: int = Field(
        default=4096,
        ge=256,
        le=1_048_576,
        description="Context window in tokens (capped at the model's own).",
    )
    recommended: str = Field(
        default="qwen2.5-coder-1.5b",
        description="The packaged model (a key of `hearth models available`) the Chat tab's first-run note offers "
        "to install and use, and the Models tab picks first: the one `make run` installs (its CHAT_MODEL).",
    )

    @field_validator("recommended")
    @classmethod
    def _packaged(cls, key: str) -> str:
        from models.catalog import CATALOG

        if key not in CATALOG:
            raise ValueError(f"{key!r} is not a packaged model; `hearth models available` lists them")
        return key


class BackendSettings(BaseModel):
    name: str = Field(
        default="auto",
        description="Inference backend; auto picks the best one for this machine (cuda: llama.cpp on NVIDIA GPUs; "
        "pipeline: llama.cpp with the model's layers split across the workers). The names: `hearth ui --help`.",
    )
    workers: list[str] = Field(
        default_factory=list,
        description="Paired `hearth worker` addresses (HOST:PORT) the pipeline backend splits a model's layers "
        "across; empty means every paired worker.",
    )
    device: str = Field(
        default="auto",
        pattern=r"^(auto|cpu|cuda|cuda:\d+|gpu|npu|(GPU|NPU)(\.\d+)?)$",
        description="Device: auto, cpu, cuda or cuda:N (NVIDIA), gpu or npu (Intel, through OpenVINO).",
    )
    gpu_layers: int | None = Field(
        default=None, ge=0, le=4096, description="Layers to put on the GPU; empty lets Hearth decide."
    )
    threads: int | None = Field(
        default=None, ge=1, le=1024, description="CPU threads; empty means one per physical core."
    )
    slots: int = Field(
        default=4,
        ge=1,
        le=64,
        description="Answers llama.cpp writes at once (chats, API calls); each has the whole context of its own, "
        "so each one adds a context cache to the memory the model needs. Hearth uses fewer if they do not fit.",
    )
    kv_cache_type: Literal["f16", "q8_0", "q4_0"] = Field(
        default="f16",
        description="How llama.cpp stores the context cache: f16 (2 bytes a value), q8_0 (about 1.06) or q4_0 "
        "(about 0.56); the quantized ones need flash attention, which Hearth then turns on.",
    )
    conversation_cache_mb: int = Field(
        default=2048,
        ge=0,
        le=1_048_576,
        description="Disk for conversations' llama.cpp caches, in the data folder: a follow-up after a restart, or "
        "after other chats took the model's slots, then reads only what is new. 0 keeps them in memory only.",
    )
    passage_cache_mb: int = Field(
        default=512,
        ge=0,
        le=1_048_576,
        description="Disk for kept passages' llama.cpp caches, in the data folder (with rag keep_passages): a "
        "passage read before a restart is joined after it, not read again. 0 keeps them in memory only.",
    )
    passage_cache_type: Literal["q8_0", "f16"] = Field(
        default="q8_0",
        description="How kept passages' llama.cpp caches are held, in memory and on disk: q8_0 (8 bits, about half "
        "the room, so twice the passages fit) or f16 (as llama.cpp computed them).",
    )
    prompt_lookup: Literal["auto", "off"] = Field(
        default="auto",
        description="Prompt-lookup decoding (llama.cpp): guess the next tokens from the prompt and the answer so "
        "far and check the guesses in the same step; auto while one answer is written at a time, off never.",
    )

    @field_validator("name")
    @classmethod
    def _a_known_backend(cls, name: str) -> str:
        from backends import registry

        if name not in registry.choice_names():
            raise PydanticCustomError(
                "backend", "Input should be one of {names}", {"names": ", ".join(registry.choice_names())}
            )
        return name


class GenerationSettings(BaseModel):
    system_prompt: str = Field(default=DEFAULT_SYSTEM_PROMPT, description="System prompt for new conversations.")
    temperature: float = Field(default=0.7, ge=0.0, le=2.0, description="Sampling temperature; 0 is greedy.")
    max_new_tokens: int = Field(default=512, ge=1, le=32_768, description="Longest answer, in tokens.")
    top_p: float = Field(default=0.95, gt=0.0, le=1.0, description="Nucleus sampling threshold.")
    seed: int | None = Field(default=None, description="Sampling seed; empty means a fresh one per answer.")
    repeat_penalty: float = Field(
        default=1.1, ge=1.0, le=2.0, description="Penalty for repeating recent tokens; 1.0 turns it off."
    )


class RagSettings(BaseModel):
    max_file_mb: int = Field(default=100, ge=1, le=100_000, description="Files larger than this are skipped.")
    max_text_chars: int = Field(
        default=5_000_000,
        ge=1_000,
        le=1_000_000_000,
        description="Files whose text is longer than this many characters (about 2,000 pages of prose by default) "
        "are skipped, whatever their size on disk: a small compressed file can expand to gigabytes of text.",
    )
    max_pdf_pages: int = Field(default=5_000, ge=1, le=1_000_000, description="PDFs with more pages are skipped.")
    read_timeout_s: float = Field(
        default=120.0,
        ge=1.0,
        le=86_400.0,
        description="Longest time reading one file (extracting its text) may take; a file that takes longer is "
        "stopped and skipped.",
    )
    read_memory_mb: int = Field(
        default=1024,
        ge=128,
        le=1_048_576,
        description="Memory the process that reads one file may use; a file that needs more is stopped and skipped.",
    )
    top_k: int = Field(
        default=3,
        ge=1,
        le=50,
        description="Passages retrieved for each question. 3 answered as many held-out questions right as 5 "
        "(53 and 52 of 57) with a third fewer prompt tokens: the first word comes in 0.62 of the time.",
    )
    excerpts: bool = Field(
        default=False,
        description="Give the best sentences of the first 8 passages found, in the room the first top_k passages "
        "would take, instead of those passages whole (rag/excerpts.py). Off: the default model did not answer better "
        "from them, and embedding every window of 8 passages takes about a second per question on a 2-core CPU.",
    )
    follow_up_search: Literal["question", "with-previous", "fused", "same-files"] = Field(
        default="question",
        description="What a follow-up in a conversation is searched with: its own words (question); the previous "
        "question's words before them (with-previous); both rankings taken in turns (fused); or its own words with "
        "the passages of the files the previous answer came from first (same-files). Its own words: on the "
        "conversation set the others gave the passages holding the answer to fewer follow-ups "
        "(bench/data/conversation-follow-up-search.json).",
    )
    keep_passages: bool = Field(
        default=True,
        description="Keep each passage's llama.cpp cache when it is first read (in memory and in the data folder) "
        "and join it when a later question retrieves the passage, reading only a fifth of it again, instead of "
        "reading it whole.",
    )
    read_ahead: bool = Field(
        default=False,
        description="After files are added on the page, read their passages with the chat model once, so that the "
        "first question that finds one joins its kept cache instead of reading it (as `hearth ingest --read-ahead` "
        "does). Only where passages are kept (keep_passages), and never on battery; off by "
        "default: each passage costs the CPU what reading it in a question would.",
    )
    passage_recompute: float = Field(
        default=DEFAULT_PASSAGE_RECOMPUTE,
        ge=0.0,
        lt=1.0,
        description="Of each passage joined from its kept cache, the share of its first tokens read again after the "
        "text now before it (as CacheBlend recomputes a share): 0 is quickest, more answers as reading would. The "
        "default was chosen on bench/passage_join.py and the tuning half of bench/data/debian-docs-reworded.jsonl.",
    )
    embedder_runtime: Literal["sentence-transformers", "openvino"] = Field(
        default="openvino",
        description="What runs the embedding model: OpenVINO on the CPU, which computes sentence-transformers' "
        "vectors (to float32's last bits) without importing sentence-transformers, torch or transformers in the "
        "process that embeds (a fresh process has its first vector in 0.73 s against 10.10 s: "
        "bench/data/embedder-runtime.txt); the model is converted once, with torch, into the cache folder "
        "(~/.cache/hearth/embedders). Or sentence-transformers (torch) itself. A model OpenVINO cannot run as "
        "sentence-transformers does stays with sentence-transformers.",
    )
    reranker_path: Path | None = Field(
        default=None,
        description="A local sentence-transformers cross-encoder folder (config.json, weights, tokenizer) that "
        "re-reads the best 3 x top_k fused passages with each question and re-orders them; it is loaded from disk "
        "only, never downloaded. Empty (the default) means no reranking: no cross-encoder ships with Hearth, and "
        "each one adds a model call per passage to every search (measure with bench/rag_retrieval.py --reranker).",
    )
    _empty_reranker = field_validator("reranker_path", mode="before")(_empty_is_unset)
    chroma_url: str | None = Field(
        default=None,
        description="A Chroma server (http://HOST:PORT, or https:// with TLS in front of it) that holds the "
        "collections made from now on, instead of the data folder; collections already in the data folder stay "
        "there and keep working. Empty (the default): every collection in the data folder.",
    )
    chroma_token_file: Path | None = Field(
        default=None,
        description="A file of this account's alone (chmod 600) holding the token a proxy in front of the Chroma "
        "server asks for; sent only over https:// or to this computer.",
    )
    chroma_ca_file: Path | None = Field(
        default=None,
        description="The certificate authority (PEM) that signed the Chroma server's TLS certificate, when the "
        "system's do not.",
    )
    _empty_chroma = field_validator("chroma_url", "chroma_token_file", "chroma_ca_file", mode="before")(_empty_is_unset)


class ToolsSettings(BaseModel):
    call_timeout_s: float = Field(
        default=60.0, gt=0.0, le=3_600.0, description="Longest an MCP server may take to start and answer one call."
    )
    max_calls: int = Field(default=8, ge=1, le=100, description="Most tool calls the model may make for one answer.")
    calculator: bool = Field(default=True, description="Offer the built-in calculator when tools are on.")
    search_documents: bool = Field(
        default=True,
        description="Offer search_documents (the model searches the collection itself) when tools are on with a "
        "collection (`hearth chat --tools -c NAME`, `hearth ask --tools`).",
    )
    fit_threshold: float = Field(
        default=0.06,
        ge=-1.0,
        le=1.0,
        description="Offer the model only the tools whose name and description are at least this similar to the "
        "request (cosine similarity of their embeddings): small models call any tool offered, even for 'Hello!'. "
        "-1 offers every tool. Chosen on the tuning half of the tool question set (bench/data/tool-relevance.json). "
        "Not applied when a call is asked for first ('Tools: call one first').",
    )


class ServerSettings(BaseModel):
    host: str = Field(default="127.0.0.1", description="Address the web UI binds to. Anything but loopback exposes it.")
    port: int = Field(default=7860, ge=1, le=65535, description="Port of the web UI and of the API under /v1.")
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="Web pages (origins such as http://localhost:3000) allowed to call the page and the API from a "
        "browser besides Hearth's own page. Empty by default; '*' is refused: any site could drive the chat.",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Extra host names this server answers to (besides 127.0.0.1, localhost, [::1] and the bind "
        "address), for example a name other machines use for it. Other Host headers are refused (DNS rebinding).",
    )
    idle_timeout_s: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="A connection that sends nothing for this long while Hearth waits for its request (or the rest "
        "of its body) is closed, so idle connections cannot pile up.",
    )

    @field_validator("allowed_origins")
    @classmethod
    def _no_wildcard(cls, origins: list[str]) -> list[str]:
        for origin in origins:
            if "*" in origin:
                raise ValueError("list each origin (scheme://host:port); '*' would let any web page drive Hearth")
            # "null" is refused too: every sandboxed frame on every site sends it.
            if "://" not in origin:
                raise ValueError(f"{origin!r} is not an origin; write it as scheme://host[:port]")
        return origins


class BenchSettings(BaseModel):
    users: str = Field(
        default="1,2,4,8",
        pattern=r"^[1-9][0-9]{0,2}(,[1-9][0-9]{0,2}){0,7}$",
        description="The Hardware tab's benchmark: answers at once, comma-separated (each a round).",
    )
    max_tokens: int = Field(default=64, ge=1, le=1024, description="The Hardware tab's benchmark: tokens per answer.")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HEARTH_", env_nested_delimiter="__", extra="ignore")

    home: Path | None = Field(
        default=None, description="Data directory (conversations, models). Empty means the platform default."
    )
    _empty_home = field_validator("home", mode="before")(_empty_is_unset)

    model: ModelSettings = Field(default_factory=ModelSettings, description="The chat model.")
    backend: BackendSettings = Field(default_factory=BackendSettings, description="Where the model runs.")
    generation: GenerationSettings = Field(default_factory=GenerationSettings, description="Answer defaults.")
    server: ServerSettings = Field(default_factory=ServerSettings, description="The local web UI.")
    rag: RagSettings = Field(default_factory=RagSettings, description="Documents and retrieval.")
    tools: ToolsSettings = Field(default_factory=ToolsSettings, description="Tools and MCP servers.")
    bench: BenchSettings = Field(default_factory=BenchSettings, description="The page's benchmark.")


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment, with ``overrides`` (from CLI flags) on top.

    Nested overrides are dicts: ``load_settings(model={"context_length": 2048})``.
    """
    try:
        base = Settings()
        if not overrides:
            return base
        merged = base.model_dump()
        for key, value in overrides.items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key].update(value)
            else:
                merged[key] = value
        return Settings.model_validate(merged)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors(include_url=False)
        )
        raise HearthError(
            f"Invalid setting — {problems}.",
            "Fix the HEARTH_… environment variable or command-line flag named above.",
        ) from None
