"""The embedding model on ONNX Runtime, without torch or sentence-transformers: for queries
and for the index's embedding worker.

Why: a cold `docgraph query` spent most of its time importing torch and sentence-transformers
(~3 s + ~5 s on the loaded 2-core machine) to embed one question; onnxruntime (which pymupdf
already brings) and `tokenizers` import in ~0.35 s. An index's worker loads in ~0.3 s
instead of ~6 s, holds ~325 MB instead of ~760, and embeds short texts (entity titles) ~25%
faster than torch. The model is exported to ONNX once (`ensure_exported`: torch is needed
only then), by the first index's embedding worker as it starts (or at the end of
`docgraph index`), into a per-user cache keyed by the model's files,
`$XDG_CACHE_HOME/docgraph/onnx/<key>/model.onnx`, so every index built with it shares it.
`query_embedder` and `index_embedder` use it when present, else the sentence-transformers
`Embedder` (same vectors, slower start).

The vectors are sentence-transformers' own: the model folder's tokenizer.json truncated at
its `max_seq_length`, the transformer's last hidden state, mean pooling over the attention
mask, L2 normalisation. Only that module layout (Transformer, mean Pooling, Normalize) is
exported; any other model keeps sentence-transformers.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.config import EmbeddingSettings
from pipeline.cpu import CpuMeter, usable_cpus
from pipeline.ids import sha256_hex
from pipeline.vectors.embed import (
    Embedder,
    get_embedder,
    no_load_bar,
    resolve_model,
    token_batches,
)

ONNX_FILE = "model.onnx"
# Beside it: every vocabulary token's last hidden state alone (pipeline.vectors.static_titles)
TOKEN_STATES_FILE = "token_states.npy"
# how often a stream paused for another process's sake looks again whether its core is free
PAUSE_S = 0.05
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_ST_MODULES = [
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
]


def cache_root() -> Path:
    """Where exported models live (beside remote mirrors: $XDG_CACHE_HOME/docgraph)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "docgraph" / "onnx"


def supported(model_dir: Path) -> bool:
    """A local sentence-transformers folder of Transformer + mean Pooling + Normalize, with a
    fast-tokenizer file: what OnnxEmbedder reproduces exactly."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
        pooling_dir = model_dir / next(m["path"] for m in modules if m["type"].endswith("Pooling"))
        pooling = json.loads((pooling_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, StopIteration):
        return False
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v}
    return (
        [m["type"] for m in modules] == _ST_MODULES
        and modes == {"pooling_mode_mean_tokens"}
        and (model_dir / "tokenizer.json").is_file()
    )


def onnx_path(model_id: str) -> Path | None:
    """Where the ONNX export of local model folder `model_id` lives (whether or not it is
    there yet); None for a model this module does not reproduce. The key covers the folder's
    path and its files' names, sizes and mtimes, so a changed model is exported anew."""
    folder = Path(model_id)
    if not folder.is_dir() or not supported(folder):
        return None
    files = [p for p in folder.iterdir() if p.is_file()]
    stats = sorted(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files)
    key = sha256_hex("\n".join([str(folder.resolve()), *stats]).encode("utf-8"))[:16]
    return cache_root() / key / ONNX_FILE


def max_length(model_dir: Path) -> int:
    try:
        config = json.loads((model_dir / "sentence_bert_config.json").read_text(encoding="utf-8"))
        return int(config["max_seq_length"])
    except (OSError, ValueError, KeyError):
        return 512


class OnnxEmbedder:
    """`Embedder`'s interface (model_id, dim, embed) over onnxruntime + tokenizers.

    Texts are tokenized once and run in batches of similar length (`token_batches`, as the
    torch Embedder), each padded to its longest text. The batches run side by side on up to
    `threads` streams, each a one-thread forward pass (onnxruntime releases the GIL): on the
    2-core machine 700 MuSiQue passages took 11.5 s so, against 13.2 s as one pass split
    over two threads, whose halves wait for each other at every operator. And a stream
    pauses while another process wants its core (`leave_cores_to`): two threads of one pass
    sharing a core with a busy process took 14% more CPU for the same texts and slowed that
    process by 19%."""

    def __init__(
        self,
        model_id: str,
        path: Path,
        threads: int = 1,
        batch_tokens: int = 1024,
        batch_size: int = 256,
    ):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self._model_id = model_id
        self.path = path
        self.batch_tokens, self.batch_size = batch_tokens, batch_size
        self.streams = max(1, threads)
        self._streams_now: Callable[[], int] = lambda: self.streams
        self._pool: ThreadPoolExecutor | None = None
        folder = Path(model_id)
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=max_length(folder))
        self.tokenizer.no_padding()
        pad = self.tokenizer.token_to_id("[PAD]")
        self._pad_id = 0 if pad is None else pad
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # a pass per stream (above); session.run is thread-safe
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._inputs = [i.name for i in self.session.get_inputs()]
        self._dim = int(self.session.get_outputs()[0].shape[-1])

    def leave_cores_to(self, pid: int) -> None:
        """Run one stream fewer for each core process `pid` keeps busy (at least one): the
        embedding worker and its parent, the index process, whose steps go on meanwhile."""
        meter = CpuMeter(pid)
        self._streams_now = lambda: max(1, self.streams - int(meter.cores() + 0.5))

    def _each(self, work: Callable[[Any], None], items: list) -> None:
        """`work(item)` for every item, on as many streams at once as `_streams_now` allows
        (checked before each item; a paused stream looks again every PAUSE_S)."""
        if self.streams == 1 or len(items) < 2:
            for item in items:
                work(item)
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.streams - 1, thread_name_prefix="onnx-stream")
        todo, lock, done = iter(items), threading.Lock(), threading.Event()

        def stream(k: int) -> None:
            try:
                while not done.is_set():
                    if k and k >= self._streams_now():
                        time.sleep(PAUSE_S)
                        continue
                    with lock:
                        item = next(todo, None)
                    if item is None:
                        break
                    work(item)
            finally:
                done.set()

        others = [self._pool.submit(stream, k) for k in range(1, self.streams)]
        try:
            stream(0)
        finally:  # a failed pass stops the others; none writes after this returns or raises
            for other in others:
                other.result()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(texts)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(texts))

        def run(rows: np.ndarray) -> None:
            out[rows] = self._run([encodings[i] for i in rows], int(lengths[rows].max()))

        self._each(run, token_batches(lengths, self.batch_tokens, self.batch_size))
        return out

    def _run(self, encodings: list, width: int) -> np.ndarray:
        ids = np.full((len(encodings), width), self._pad_id, dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, e in enumerate(encodings):  # at most batch_size rows, against a forward pass
            n = len(e.ids)
            ids[row, :n], mask[row, :n], types[row, :n] = e.ids, 1, e.type_ids
        return mean_pool(self._hidden(ids, mask, types), mask)

    def _hidden(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        return self.session.run(None, {k: feed[k] for k in self._inputs})[0]

    def token_states(self, rows: int = 512) -> np.ndarray:
        """(vocabulary + 1, dim) float32: row t is token t's last hidden state in a text of
        that token alone (with the tokenizer's own [CLS]/[SEP]-like specials around it); the
        last row is the specials' states, each averaged over the vocabulary, summed. One
        forward pass of `rows` three-token texts at a time: ~15 s for MiniLM's 30,522 tokens
        on 2 cores."""
        probe = self.tokenizer.encode("a")
        at = probe.special_tokens_mask.index(0)
        before, after = probe.ids[:at], probe.ids[at + 1 :]
        vocab = self.tokenizer.get_vocab_size()
        out = np.zeros((vocab + 1, self.dim), dtype=np.float32)
        specials: dict[int, np.ndarray] = {}

        def run(lo: int) -> None:
            ids = np.arange(lo, min(vocab, lo + rows), dtype=np.int64)
            text = np.zeros((len(ids), len(before) + 1 + len(after)), dtype=np.int64)
            text[:] = [*before, 0, *after]
            text[:, len(before)] = ids
            hidden = self._hidden(text, np.ones_like(text), np.zeros_like(text))
            out[ids] = hidden[:, len(before)]
            specials[lo] = np.delete(hidden, len(before), axis=1).sum(axis=1).sum(axis=0)

        starts = list(range(0, vocab, rows))
        self._each(run, starts)
        for lo in starts:  # summed in order: the same table whatever ran first
            out[vocab] += specials[lo]
        out[vocab] /= vocab
        return out


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' mean Pooling then Normalize (eps as torch's F.normalize)."""
    weights = mask[..., None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    pooled = summed / np.maximum(weights.sum(axis=1), 1e-9)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


_ONNX_EMBEDDERS: dict[tuple[str, int, int, int], OnnxEmbedder] = {}
_ONNX_LOCK = threading.Lock()


def query_embedder(settings: EmbeddingSettings) -> OnnxEmbedder | Embedder:
    """The embedder for queries: the ONNX export of the model when it was exported, on one
    thread (a query is one short text, and on a shared 2-core machine a second thread mostly
    waits for a core: pipeline.vectors.embed.SMALL_BATCH), else sentence-transformers."""
    return _exported_or_torch(settings, threads=1)


def index_embedder(settings: EmbeddingSettings, export: bool = False) -> OnnxEmbedder | Embedder:
    """The embedder an index runs (in its worker, or inline): the ONNX export on every CPU
    the process may use (`pipeline.cpu`) when the model was exported and runs on the CPU, else
    sentence-transformers. Same vectors (within 2e-7); it loads in ~0.3 s instead of ~6 s
    (no torch import) and embeds entity titles ~25% faster. `export`: export the model first
    when it is not yet (once per machine and model, ~10 s with torch's import), so that runs
    launched only from Dagster get it too; a failed export leaves sentence-transformers."""
    if settings.device != "cpu":
        return get_embedder(settings)
    if export:
        try:
            ensure_exported(settings)
        except Exception as exc:  # a speed-up, never a reason to fail the run
            _warn(f"embedding model not exported to ONNX (or its token states not written): {exc}")
    return _exported_or_torch(settings, threads=usable_cpus())


def _exported_or_torch(settings: EmbeddingSettings, threads: int) -> OnnxEmbedder | Embedder:
    """One OnnxEmbedder per (export, threads, batch sizes) per process; sentence-transformers
    when there is no export or onnxruntime cannot load it (a damaged file: removed, with a
    warning, so that the next index's worker exports the model again)."""
    model_id = resolve_model(settings.model)
    path = onnx_path(model_id)
    if path is None or not path.is_file():
        return get_embedder(settings)
    with _ONNX_LOCK:
        key = (str(path), threads, settings.batch_tokens, settings.batch_size)
        if key not in _ONNX_EMBEDDERS:
            try:
                _ONNX_EMBEDDERS[key] = OnnxEmbedder(
                    model_id, path, threads, settings.batch_tokens, settings.batch_size
                )
            except Exception as exc:
                path.unlink(missing_ok=True)
                _warn(f"removed the ONNX export {path}: it does not load ({exc})")
                return get_embedder(settings)
        return _ONNX_EMBEDDERS[key]


def _warn(message: str) -> None:
    """To stderr: a worker's stdout is its protocol, and a query's is its answer."""
    print(f"docgraph: warning: {message}", file=sys.stderr)


def ensure_exported(settings: EmbeddingSettings) -> Path | None:
    """Export the model to ONNX unless it already is (a torch import and ~8 s, once), and
    with `title_vectors: static` its token states beside it (~15 s, once); the export's path,
    or None for a model that is not exported (not a supported local folder)."""
    model_id = resolve_model(settings.model)
    path = onnx_path(model_id)
    if path is None:
        return None
    if not path.is_file():
        export(Path(model_id), path)
    states = path.with_name(TOKEN_STATES_FILE)
    if settings.title_vectors == "static" and not states.is_file():
        embedder = _exported_or_torch(settings, threads=usable_cpus())
        if isinstance(embedder, OnnxEmbedder):
            tmp = states.with_name(f".{states.name}.{os.getpid()}.tmp")
            try:
                with open(tmp, "wb") as f:  # np.save would add ".npy" to a name without it
                    np.save(f, embedder.token_states())
                os.replace(tmp, states)
            finally:
                tmp.unlink(missing_ok=True)
    return path


def export(model_dir: Path, target: Path) -> None:
    """Export the transformer of `model_dir` to `target` (written whole, then renamed) and
    check it against torch on a sample sentence before keeping it."""
    import warnings

    import torch
    from transformers import AutoModel

    no_load_bar()
    model = AutoModel.from_pretrained(str(model_dir)).eval()

    class Hidden(torch.nn.Module):  # positional inputs, one output: a plain ONNX signature
        def __init__(self, inner: torch.nn.Module):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    sample = torch.tensor([[101, 7592, 2088, 1010, 2023, 2003, 1037, 3231, 1012, 102]])
    args = (sample, torch.ones_like(sample), torch.zeros_like(sample))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    axes = {name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, "last_hidden_state")}
    with torch.no_grad():  # before the export, which leaves the traced module altered
        expected = Hidden(model)(*args).numpy()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's advice on ops it rewrites
            torch.onnx.export(
                Hidden(model),
                args,
                str(tmp),
                input_names=list(_INPUTS),
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )
        _check_export(tmp, args, expected)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _check_export(path: Path, args, expected: np.ndarray) -> None:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {n: a.numpy() for n, a in zip(_INPUTS, args, strict=True)})[0]
    if got.shape != expected.shape or not np.allclose(got, expected, atol=1e-4):
        raise RuntimeError(f"the ONNX export of the embedding model differs from torch: {path}")
