"""What clients send, as typed models. Fields OpenAI defines but Hearth cannot honour are refused by name (a
silently ignored ``n=3`` or ``logprobs`` would hand the client something other than what it asked for); fields that
only tune what Hearth does not do (``user``, ``logit_bias``, penalties) are accepted and ignored, so ordinary
clients work unchanged."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from app.api.errors import RequestInvalid

# OpenAI allows up to four stop strings; a few more cost nothing here, a thousand would cost every token.
MAX_STOP_STRINGS = 16
MAX_EMBEDDING_INPUTS = 2048
# Files one request may carry (content parts and hearth.attachments together).
MAX_REQUEST_FILES = 20

RequestT = TypeVar("RequestT", bound=BaseModel)


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class TextPart(_Request):
    type: Literal["text"]
    text: str


class ImagePart(_Request):
    """Recognised only to be refused with a clear message: the models Hearth runs read text."""

    type: Literal["image_url", "input_audio", "image"]


class AttachedFile(_Request):
    """A file sent with a question, as OpenAI's ``file`` content part carries it: its name and its bytes as a
    base64 data URL (``data:application/pdf;base64,...``) or plain base64."""

    filename: str = Field(min_length=1, max_length=255)
    file_data: str | None = None
    file_id: str | None = None

    @model_validator(mode="after")
    def _has_data(self) -> AttachedFile:
        if self.file_data is None:
            raise ValueError("send the file's bytes in file_data (Hearth keeps no uploaded files to name by id)")
        return self


class FilePart(_Request):
    type: Literal["file"]
    file: AttachedFile


ContentPart = Annotated[TextPart | ImagePart | FilePart, Field(discriminator="type")]


class CalledFunction(_Request):
    name: str = Field(min_length=1, max_length=64)
    arguments: str = Field(default="{}", description="The arguments as JSON text, as the model wrote them.")


class CalledTool(_Request):
    """A call an earlier assistant message made (sent back with the history)."""

    id: str = Field(min_length=1, max_length=128)
    type: Literal["function"] = "function"
    function: CalledFunction


class Message(_Request):
    # "developer" is the newer OpenAI name for the system role; clients built for o-series models send it.
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    tool_calls: list[CalledTool] | None = None  # assistant: the calls it made
    tool_call_id: str | None = Field(default=None, max_length=128)  # tool: the call this is the result of

    @model_validator(mode="after")
    def _tool_fields(self) -> Message:
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs tool_call_id, the id of the call it answers")
        if self.tool_calls and self.role != "assistant":
            raise ValueError("only assistant messages carry tool_calls")
        return self

    @field_validator("content")
    @classmethod
    def _text_only(cls, value: str | list[ContentPart] | None) -> str | list[ContentPart] | None:
        if isinstance(value, list) and any(isinstance(part, ImagePart) for part in value):
            raise ValueError("only text and file parts are supported; the model reads text, not images or audio")
        return value

    @property
    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content if isinstance(part, TextPart))

    @property
    def files(self) -> list[AttachedFile]:
        if not isinstance(self.content, list):
            return []
        return [part.file for part in self.content if isinstance(part, FilePart)]


class StreamOptions(_Request):
    include_usage: bool = False


class HearthOptions(_Request):
    """The ``hearth`` extension field: answer from a collection, with ``top_k`` passages, and from files sent
    with the request (``attachments``, the same as ``file`` content parts)."""

    collection: str | None = None
    top_k: int | None = Field(default=None, ge=1, le=50)
    attachments: list[AttachedFile] = Field(default_factory=list, max_length=MAX_REQUEST_FILES)


class JsonSchemaFormat(_Request):
    """``response_format.json_schema``: the schema the answer must follow, as OpenAI's clients send it."""

    name: str = Field(default="response", min_length=1, max_length=64)
    description: str | None = None
    body: dict[str, Any] = Field(alias="schema", description="A JSON Schema object.")
    strict: bool | None = None  # every answer follows the schema here, strict or not


class ResponseFormat(_Request):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_given(self) -> ResponseFormat:
        if self.type == "json_schema" and self.json_schema is None:
            raise ValueError("type json_schema needs the json_schema field, with the schema in json_schema.schema")
        return self


FUNCTION_NAME = r"^[A-Za-z0-9_.-]{1,64}$"
MAX_TOOLS = 128
# The tools' parameter schemas together, as JSON: as much as one response_format schema may be. Turning them into a
# grammar takes time that grows with their size, and real tool sets (dozens of functions) use a fraction of it.
MAX_TOOLS_SCHEMA_CHARS = 64_000


class FunctionDef(_Request):
    name: str = Field(pattern=FUNCTION_NAME)
    description: str = Field(default="", max_length=8_000)
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool | None = None  # every call follows its schema here, strict or not


class ToolDef(_Request):
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(_Request):
    name: str = Field(min_length=1, max_length=64)


class NamedTool(_Request):
    type: Literal["function"]
    function: NamedFunction


class _Generation(_Request):
    model: str = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, ge=0.0, le=1.0)
    # 0 is refused (there would be nothing to answer); larger than the context allows is clamped to what is left.
    max_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int = Field(default=1, ge=1, le=1, description="Hearth writes one answer per request.")

    @field_validator("stop")
    @classmethod
    def _few_stops(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list) and len(value) > MAX_STOP_STRINGS:
            raise ValueError(f"at most {MAX_STOP_STRINGS} stop strings are supported")
        return value

    @property
    def stop_strings(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        stops = [self.stop] if isinstance(self.stop, str) else self.stop
        return tuple(s for s in stops if s)

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


class ChatRequest(_Generation):
    messages: list[Message] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    hearth: HearthOptions | None = None
    response_format: ResponseFormat | None = None
    tools: list[ToolDef] | None = Field(default=None, max_length=MAX_TOOLS)
    tool_choice: Literal["auto", "none", "required"] | NamedTool | None = None
    parallel_tool_calls: bool = True
    functions: list[Any] | None = None
    logprobs: bool | None = None

    @field_validator("tools")
    @classmethod
    def _bounded_tools(cls, tools: list[ToolDef] | None) -> list[ToolDef] | None:
        total = 0
        for tool in tools or ():
            total += len(json.dumps(tool.function.parameters))
            if total > MAX_TOOLS_SCHEMA_CHARS:
                raise ValueError(
                    f"the functions' parameter schemas reach {MAX_TOOLS_SCHEMA_CHARS:,} characters at "
                    f"{tool.function.name!r}; send fewer tools or shorter schemas"
                )
        return tools

    @model_validator(mode="after")
    def _supported(self) -> ChatRequest:
        if self.functions:
            raise ValueError("the old functions field is not supported; send the same definitions in tools")
        if self.tools and self.response_format is not None and self.response_format.type != "text":
            raise ValueError("send tools or response_format, not both")
        if isinstance(self.tool_choice, NamedTool) and not any(
            t.function.name == self.tool_choice.function.name for t in self.tools or []
        ):
            raise ValueError(f"tool_choice names {self.tool_choice.function.name!r}, which is not among the tools")
        if self.logprobs:
            raise ValueError("logprobs are not supported; leave the field out")
        return self

    @model_validator(mode="after")
    def _few_files(self) -> ChatRequest:
        if len(self.files) > MAX_REQUEST_FILES:
            raise ValueError(f"at most {MAX_REQUEST_FILES} files may be sent with one request")
        return self

    @property
    def files(self) -> list[AttachedFile]:
        """The files sent with the request: those in the messages' content parts, then ``hearth.attachments``."""
        parts = [file for message in self.messages for file in message.files]
        return parts + (list(self.hearth.attachments) if self.hearth else [])

    @property
    def answer_tokens(self) -> int | None:
        """The newer ``max_completion_tokens`` wins over ``max_tokens``, as at OpenAI."""
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


class CompletionRequest(_Generation):
    prompt: str | list[str]
    echo: bool = False
    suffix: str | None = None
    logprobs: int | None = None

    @field_validator("prompt")
    @classmethod
    def _one_prompt(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list) and len(value) != 1:
            raise ValueError("send exactly one prompt per request")
        return value

    @model_validator(mode="after")
    def _supported(self) -> CompletionRequest:
        if self.echo:
            raise ValueError("echo is not supported; the prompt is yours already")
        if self.suffix:
            raise ValueError("suffix (fill-in-the-middle) is not supported")
        if self.logprobs:
            raise ValueError("logprobs are not supported; leave the field out")
        return self

    @property
    def text(self) -> str:
        return self.prompt if isinstance(self.prompt, str) else self.prompt[0]

    @property
    def answer_tokens(self) -> int | None:
        return self.max_tokens


class EmbeddingRequest(_Request):
    model: str = Field(min_length=1)
    input: str | list[str] = Field(description="Text, or a list of texts (token arrays are not accepted).")
    encoding_format: Literal["float", "base64"] = "float"

    @field_validator("input")
    @classmethod
    def _texts(cls, value: str | list[str]) -> str | list[str]:
        texts = [value] if isinstance(value, str) else value
        if not texts:
            raise ValueError("send at least one text")
        if len(texts) > MAX_EMBEDDING_INPUTS:
            raise ValueError(f"send at most {MAX_EMBEDDING_INPUTS} texts per request")
        if any(not text.strip() for text in texts):
            raise ValueError("every text must contain something besides spaces")
        return value

    @property
    def texts(self) -> list[str]:
        return [self.input] if isinstance(self.input, str) else list(self.input)


def parse_request(model: type[RequestT], body: bytes) -> RequestT:
    """``body`` as ``model``, or :class:`RequestInvalid` naming the field and what is wrong with it."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise invalid_request(exc) from None


def invalid_request(exc: ValidationError) -> RequestInvalid:
    errors = exc.errors(include_url=False)
    first = errors[0]
    if first["type"] == "json_invalid":
        reason = first.get("ctx", {}).get("error", "")
        return RequestInvalid(
            f"The request body is not valid JSON{f' ({reason})' if reason else ''}.",
            "Send one JSON object with Content-Type: application/json.",
            code="invalid_json",
        )
    if first["type"] == "model_type" and not first["loc"]:
        return RequestInvalid(
            "The request body must be a JSON object.", "Send one JSON object, like the OpenAI API reference shows."
        )
    problems = [_problem(error) for error in errors[:3]]
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return RequestInvalid(
        f"{'; '.join(problems)}{more}.",
        "Fix the field named above and send again.",
        param=_location(first["loc"]) or None,
        code="missing_field" if first["type"] == "missing" else "invalid_value",
    )


def _problem(error: Any) -> str:
    where = _location(error["loc"])
    if error["type"] == "missing":
        return f"{where} is required"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def _location(loc: tuple[int | str, ...]) -> str:
    """``("messages", 1, "content", "str")`` -> ``messages[1].content``: the path a client would write. Pydantic
    adds the name of the union member it tried ("str", "list[...]", the tag), which means nothing to a client."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in ("str", "list", "int", "float", "bool") or "[" in part or part in _TAGS:
            continue
        else:
            path += f".{part}" if path else part
    return path


_TAGS = frozenset({"text", "image_url", "input_audio", "file", "image", "function-after", "function-before"})
