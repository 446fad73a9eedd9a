"""Helpers shared by tests: fixture inventories and the skip-or-fail rule for real components."""

from __future__ import annotations

import fcntl
import os
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.services.serving.instance import process_alive
from app.services.serving.runtime import EngineFactory
from backends.base import Backend, LoadOptions
from backends.engine.client import EngineExit
from backends.engine.local import LocalEngine
from backends.hardware import GpuDevice, HardwareInventory, LlamaCppBuild, OpenVinoDevice
from models.gguf import ModelInfo

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
CHROMIUM = Path("/usr/bin/chromium")


def run_hearth(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``hearth ARGS`` as a user runs it, with ``home`` as its data folder; its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        env={**os.environ, "HEARTH_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def start_worker(home: Path, port: int, *flags: str) -> subprocess.Popen[str]:
    """``hearth worker --port PORT FLAGS`` on loopback with ``home`` as its data folder, as on another machine: what it
    prints (where it serves, its pairing code) can be read from its stdout; its servers' log lines are dropped."""
    return subprocess.Popen(
        [sys.executable, "-m", "app", "worker", "--port", str(port), *flags],
        env={**os.environ, "HEARTH_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def require(available: bool, component: str, remedy: str) -> None:
    """Skip when a real component is missing on a developer machine; fail in CI, where it must be there."""
    if available:
        return
    message = f"{component} is not available ({remedy})"
    if IN_CI:
        pytest.fail(f"CI requires {message}", pytrace=False)
    pytest.skip(message)


# What the account helpers below keep between the suite's processes: a folder of this account's alone, so that no
# other account can plant a name for root to delete or a link for root to write through.
ACCOUNTS_STATE = Path("/tmp") / f"hearth-test-accounts-{os.getuid()}"
ACCOUNT_PREFIX = "hearth-test-"  # the only accounts these helpers make, and so the only ones they delete


def _accounts_state() -> Path:
    """The state folder, made owner-only; refused when it is a link, another account's, or open to others."""
    ACCOUNTS_STATE.mkdir(mode=0o700, exist_ok=True)
    found = ACCOUNTS_STATE.lstat()
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o077:
        raise RuntimeError(f"{ACCOUNTS_STATE} is not a folder of this account's alone; remove it and run again")
    return ACCOUNTS_STATE


def _id_of(name: str, flag: str) -> int | None:
    found = subprocess.run(["id", flag, name], capture_output=True, text=True, check=False)
    return int(found.stdout) if found.returncode == 0 else None


RUN_VARIABLE = "HEARTH_TEST_RUN"  # the process id of a test run's main process; its parallel workers inherit it


def this_run() -> int:
    """The test run this process belongs to: its main process, whose id the workers inherit (``tests/conftest.py``
    sets it when a run starts)."""
    return int(os.environ.get(RUN_VARIABLE, os.getpid()))


def ensure_account(name: str) -> tuple[int, int]:
    """``name``'s uid and gid, made as an account without a home or a shell when there is none. The suite's
    workers, and whole runs (`make test` runs the browser tests beside the others), may run side by side, so this
    happens under a lock, and each run that uses an account the helpers made writes down its name with the run's
    process id, for ``remove_made_accounts`` to delete when the last run using it ends (not when the first worker's
    module ends, or the first of two runs, while another may still use it)."""
    assert name.startswith(ACCOUNT_PREFIX), name
    state = _accounts_state()
    with (state / "lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _id_of(name, "-u") is None:
            subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
        with (state / "made").open("a") as made:
            made.write(f"{name} {this_run()}\n")
        uid, gid = _id_of(name, "-u"), _id_of(name, "-g")
    assert uid is not None and gid is not None, f"the account {name} vanished as it was made"
    return uid, gid


def remove_made_accounts() -> None:
    """Deletes the accounts ``ensure_account`` made or used (called once, by a run's main process as it ends)
    unless another run still going uses them; only names these helpers make are ever deleted."""
    made = ACCOUNTS_STATE / "made"
    if not ACCOUNTS_STATE.is_dir() or ACCOUNTS_STATE.is_symlink() or not made.is_file():
        return
    with (ACCOUNTS_STATE / "lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        users: dict[str, set[int]] = {}
        for line in made.read_text().splitlines():
            name, _, run = line.partition(" ")
            users.setdefault(name, set()).add(int(run) if run.isdigit() else 0)
        me = this_run()
        others = {name: {r for r in runs if r not in (me, 0) and process_alive(r)} for name, runs in users.items()}
        for name, still_used in others.items():
            if name.startswith(ACCOUNT_PREFIX) and not still_used:  # also one a run that died left behind
                subprocess.run(["userdel", name], capture_output=True, check=False)
        kept = [f"{name} {run}" for name, runs in others.items() for run in sorted(runs)]
        made.write_text("".join(line + "\n" for line in kept))


def make_inventory(
    ram_available_gib: float = 16.0,
    physical_cores: int = 4,
    llama: bool = True,
    flags: frozenset[str] | None = None,
    *,
    ram_total_gib: float | None = None,
    gpus: tuple[tuple[str, float, float], ...] = (),
    cuda: bool | None = None,
    gpu_problem: str | None = None,
    openvino: tuple[tuple[str, str], ...] | None = None,
    cpu_model: str = "Test CPU",
) -> HardwareInventory:
    """A fixture machine. ``gpus``: (name, total GiB, free GiB) per NVIDIA GPU; ``cuda``: whether llama.cpp was
    built with CUDA (default: when there are GPUs); ``openvino``: (device id, full name) per OpenVINO device."""
    gib = 1 << 30
    with_cuda = bool(gpus) if cuda is None else cuda
    backends = ("cpu", "cuda", "rpc") if with_cuda else ("cpu", "rpc")
    return HardwareInventory(
        cpu_model=cpu_model,
        physical_cores=physical_cores,
        logical_cores=physical_cores * 2,
        isa_flags=flags if flags is not None else frozenset({"avx2", "fma"}),
        ram_total_bytes=int((ram_total_gib or max(ram_available_gib, 1) * 2) * gib),
        ram_available_bytes=int(ram_available_gib * gib),
        os="Linux test",
        llama_cpp=LlamaCppBuild("0.3.36", backends, True) if llama else None,
        gpus=tuple(
            GpuDevice(i, name, int(total * gib), int(free * gib), (8, 9), "560.35")
            for i, (name, total, free) in enumerate(gpus)
        ),
        gpu_problem=gpu_problem,
        openvino=None
        if openvino is None
        else tuple(OpenVinoDevice(dev, name, dev.split(".")[0]) for dev, name in openvino),
        openvino_version="2026.4.1" if openvino is not None else "",
    )


def synthetic_model(
    name: str,
    *,
    architecture: str = "llama",
    layers: int,
    layer_mib: float,
    embed_mib: float,
    output_mib: float,
    embedding: int,
    heads: int,
    kv_heads: int,
    trained_context: int = 4096,
    quantization: str = "Q4_K_M",
    tensor_types: frozenset[str] = frozenset({"Q4_K", "Q8_0", "F32"}),
    vocab: int = 32000,
) -> ModelInfo:
    """Metadata of a real-sized model, without the file: for planning and selection tests."""
    mib = 1 << 20
    layer_bytes = int(layer_mib * mib)
    other = int((embed_mib + output_mib) * mib)
    head_dim = embedding // heads
    return ModelInfo(
        path=Path(f"/models/{name}.gguf"),
        file_size_bytes=layer_bytes * layers + other + 8 * mib,
        gguf_version=3,
        architecture=architecture,
        name=name,
        quantization=quantization,
        parameter_count=0,
        trained_context_length=trained_context,
        block_count=layers,
        embedding_length=embedding,
        head_count=heads,
        head_count_kv=kv_heads,
        head_dim_k=head_dim,
        head_dim_v=head_dim,
        vocab_size=vocab,
        chat_template=None,
        bos_token="<s>",
        eos_token="</s>",
        add_bos_token=True,
        license=None,
        layer_bytes=(layer_bytes,) * layers,
        other_bytes=other,
        output_bytes=int(output_mib * mib),
        tensor_types=tensor_types,
    )


def write_tiny_gguf(
    path: Path,
    *,
    context_length: int = 2048,
    chat_template: str | None = None,
    tensors: int = 2,
    extra: dict[str, int] | None = None,
    split_max_tensors: int = 0,
) -> Path:
    """A small but well-formed llama-architecture GGUF, written with the gguf package's own writer; with
    ``split_max_tensors``, split into parts of that many tensors as llama.cpp names them (the first part's path is
    returned)."""
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama", split_max_tensors=split_max_tensors)
    writer.add_name("tiny test model")
    writer.add_context_length(context_length)
    writer.add_block_count(2)
    writer.add_embedding_length(64)
    writer.add_feed_forward_length(128)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(["<s>", "</s>", "hello", "world"])
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(1)
    if chat_template is not None:
        writer.add_chat_template(chat_template)
    for key, value in (extra or {}).items():
        writer.add_uint32(key, value)
    for index in range(tensors):
        writer.add_tensor(f"blk.{index}.attn_q.weight", np.full((8, 64), index, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    parts = -(-tensors // split_max_tensors) if split_max_tensors else 1
    return path.with_name(f"{path.stem}-00001-of-{parts:05d}.gguf") if parts > 1 else path


def copy_gguf_with_chat_template(source: Path, target: Path, chat_template: str) -> Path:
    """A copy of a real GGUF (one that llama.cpp loads) whose ``tokenizer.chat_template`` is ``chat_template``.

    Only the header changes: the template's string is replaced, the header is padded again to the file's
    alignment, and the tensor data is copied as it is (tensor offsets count from the start of the data)."""
    import shutil
    import struct

    import gguf

    reader = gguf.GGUFReader(str(source))
    field = reader.fields["tokenizer.chat_template"]
    # A string field's parts: key length, key, value type, value length, value.
    value_start = field.offset + sum(int(part.nbytes) for part in field.parts[:3])
    value_end = field.offset + sum(int(part.nbytes) for part in field.parts)
    header_end = max(t.field.offset + sum(int(part.nbytes) for part in t.field.parts) for t in reader.tensors)
    alignment, data_offset = reader.alignment, reader.data_offset
    del reader
    encoded = chat_template.encode("utf-8")
    with source.open("rb") as src, target.open("wb") as out:
        head = src.read(header_end)
        out.write(head[:value_start] + struct.pack("<Q", len(encoded)) + encoded + head[value_end:])
        out.write(b"\0" * (-out.tell() % alignment))
        src.seek(data_offset)
        shutil.copyfileobj(src, out)
    return target


def write_pdf(path: Path, pages: list[str]) -> Path:
    """A small, valid PDF with one line of real text per page (Helvetica), written by hand."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    kids = []
    for text in pages:
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode("latin-1")
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        content_ref = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (content_ref, 0)
        )
        kids.append(len(objects))
    font_ref = len(objects) + 1
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    objects = [o.replace(b"/F1 0 0 R", b"/F1 %d 0 R" % font_ref) for o in objects]
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids),
        len(kids),
    )
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return path


def write_docx(path: Path, paragraphs: list[str]) -> Path:
    """A minimal Word document: the parts docx2txt (and Word) need."""
    import zipfile
    from xml.sax.saxutils import escape

    body = "".join(f"<w:p><w:r><w:t>{escape(p)}</w:t></w:r></w:p>" for p in paragraphs)
    document = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        f"<w:body>{body}</w:body></w:document>"
    )
    content_types = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Override PartName="/word/document.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
    )
    rels = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
        'officeDocument" Target="word/document.xml"/></Relationships>'
    )
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("[Content_Types].xml", content_types)
        archive.writestr("_rels/.rels", rels)
        archive.writestr("word/document.xml", document)
    return path


GEMMA3_270M = "gemma-3-270m"
QWEN25_CODER_05B = "qwen2.5-coder-0.5b"


def assembled_model(key: str) -> Path:
    """A packaged model's GGUF (see pyproject's test-models extra), joined once into ~/.cache/hearth/test-models
    and checked against its SHA-256. Nothing is downloaded: a missing package is reported like any component."""
    from models import catalog

    model = catalog.find(key)
    missing = catalog.missing_distributions(model)
    require(not missing, model.file_name, f"{', '.join(missing)} not installed; run `make setup-test`")
    target = Path.home() / ".cache" / "hearth" / "test-models" / model.file_name
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.with_name(f".{target.name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the suite's parallel workers join it once, not each into one file
        return catalog.assemble(model, target)


def local_engines(make_backend: Callable[[], Backend]) -> EngineFactory:
    """An engine factory that runs each new backend in the test's own process (unit tests of pure logic)."""

    def make(_name: str, model: ModelInfo, options: LoadOptions, _on_exit: Callable[[EngineExit], None]) -> LocalEngine:
        return LocalEngine(make_backend(), model, options)

    return make


def write_bookmarked_pdf(path: Path) -> Path:
    """A three-page lighthouse manual whose pages 2 and 3 sit under the bookmarks "Care › Lamps"."""
    from pypdf import PdfWriter

    long_line = "The keeper trims the wick and polishes the lens every evening before dusk. " * 3
    pages = [
        "Lighthouse manual",
        "Lamps " + long_line,
        "Lamps continued: spare bulbs are kept in the store room.",
    ]
    plain = write_pdf(tmp := path.with_suffix(".plain.pdf"), pages)
    writer = PdfWriter(clone_from=plain)
    care = writer.add_outline_item(title="Care", page_number=1)
    writer.add_outline_item(title="Lamps", page_number=1, parent=care)
    writer.write(path)
    tmp.unlink()
    return path


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_process(process: subprocess.Popen[Any]) -> None:
    """Ask a process the test started to end (SIGTERM), and kill it if it has not within 15 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


class MemoryGuard:
    """Watches a process's resident memory while a test asks it for something that once exhausted memory: the
    process is stopped (SIGKILL) as soon as it has grown by more than ``limit_bytes``, long before the machine's
    OOM killer would act, and :attr:`grew_bytes` says how far it went. Use it as a context manager."""

    def __init__(self, pid: int, limit_bytes: int, every_s: float = 0.02) -> None:
        import psutil

        self._process = psutil.Process(pid)
        self._limit = limit_bytes
        self._every_s = every_s
        self._start = self._process.memory_info().rss
        self.grew_bytes = 0
        self.killed = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="memory-guard", daemon=True)

    def __enter__(self) -> MemoryGuard:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        import psutil

        while not self._done.wait(self._every_s):
            try:
                grew = self._process.memory_info().rss - self._start
            except psutil.Error:
                return
            self.grew_bytes = max(self.grew_bytes, grew)
            if grew > self._limit:
                self.killed = True
                self._process.kill()
                return
