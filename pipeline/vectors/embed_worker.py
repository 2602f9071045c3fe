"""The embedding model in a child process of its own, so the indexing process never loads it.

torch and the model hold ~450 MB resident and fragment the heap of the process that runs
them; the index's corpus-wide stages (merge, communities, reports) then start from that
baseline. In a worker the model's memory is bounded (the model and one batch) and the index
process holds only its tables. `submit` returns a future, so a caller can queue texts and go
on with other work while the worker embeds them on the other cores.

Protocol: the parent writes pickled `(request id, texts)` to the child's stdin; the child
answers pickled `(request id, ok, vectors | error text)` on its original stdout (it moves its
own fd 1 to stderr first, so a library that prints cannot corrupt the stream). EOF on stdin
ends the child. Both ends are this package's code, so pickle carries no foreign data.
"""

from __future__ import annotations

import atexit
import itertools
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import numpy as np

from pipeline import progress
from pipeline.config import EmbeddingSettings
from pipeline.vectors.embed import KNOWN_DIMS, resolve_model
from pipeline.vectors.embed_onnx import cache_root

_DIM = None  # request payload asking for the model's width
# torch's OpenMP threads wait for each other by spinning: while the index process keeps a
# core busy (its steps run as the worker embeds), 800 MuSiQue passages took 42.4 s instead
# of 9.5 s alone; waiting passively, 18.2 s (one thread's speed), and 9.5 s alone.
_THREAD_ENV = {"OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
REQUEST_TEXTS = 4096


class EmbeddingWorker:
    """`Embedder`'s interface (model_id, dim, embed) over a child process, plus `submit`."""

    def __init__(self, settings: EmbeddingSettings):
        self.settings = settings
        self._model_id = resolve_model(settings.model)
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._pending: dict[int, Future] = {}
        self._outbox: queue.Queue = queue.Queue()
        self._ids = itertools.count()
        self._dim: int | None = KNOWN_DIMS.get(settings.model)

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.submit(_DIM).result())
        return self._dim

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = self._requests(texts)
        done = []
        with progress.track("embedding", len(texts)) as bar:
            for part in parts:
                done.append(part.result())
                bar.advance(len(done[-1]))
        return np.concatenate(done)

    def ready(self) -> None:
        """Wait until the worker has loaded its model: on a new machine it exports the model
        and writes its token states (pipeline.vectors.static_titles) first."""
        self.submit(_DIM).result()

    def warm(self) -> None:
        """Start the worker and load its model (~5.5 s here) without waiting for it."""
        self.submit(["warm up"])

    def queue(self, texts: list[str]) -> list[tuple[Future, int]]:
        """Queue `texts` without waiting for them: per text, the future of its request and
        its row in that request's vectors."""
        futures = self._requests(texts)
        return [(futures[i // REQUEST_TEXTS], i % REQUEST_TEXTS) for i in range(len(texts))]

    def _requests(self, texts: list[str]) -> list[Future]:
        """All requests queued at once (the worker never waits), each at most REQUEST_TEXTS
        texts: the worker's buffers (texts, vectors, the reply) stay that size."""
        return [
            self.submit(list(texts[at : at + REQUEST_TEXTS]))
            for at in range(0, len(texts), REQUEST_TEXTS)
        ]

    def submit(self, texts: list[str] | None) -> Future:
        """Queue `texts` (None: the model's width); the future gets an (n, dim) float32 array,
        or a RuntimeError when the worker failed or died."""
        future: Future = Future()
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            rid = next(self._ids)
            self._pending[rid] = future
            self._outbox.put((rid, texts))
        return future

    def close(self) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            self._outbox.put(None)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()

    # ---- parent side

    def _start(self) -> None:
        root = str(Path(__file__).resolve().parents[1])  # where `pipeline` imports from
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        proc = subprocess.Popen(
            [sys.executable, "-m", __name__, self.settings.model_dump_json()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": path, **_THREAD_ENV},
        )
        # each child has its own queue and pending requests: a dead one fails only its own
        self._proc, self._outbox, self._pending = proc, queue.Queue(), {}
        threading.Thread(target=self._write, args=(proc, self._outbox), daemon=True).start()
        threading.Thread(target=self._read, args=(proc, self._pending), daemon=True).start()

    @staticmethod
    def _write(proc: subprocess.Popen, outbox: queue.Queue) -> None:
        """Requests go out from a thread of their own: `submit` never blocks on a full pipe."""
        try:
            while (item := outbox.get()) is not None:
                pickle.dump(item, proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                proc.stdin.flush()
            proc.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the child died: the reader fails what is pending

    def _read(self, proc: subprocess.Popen, pending: dict[int, Future]) -> None:
        try:
            while True:
                rid, ok, value = pickle.load(proc.stdout)
                future = pending.pop(rid)
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(RuntimeError(f"embedding worker: {value}"))
        except (EOFError, OSError, pickle.UnpicklingError):
            pass
        code = proc.wait()
        with self._lock:
            lost = [pending.pop(r) for r in list(pending)]
        for future in lost:
            future.set_exception(RuntimeError(f"embedding worker exited with code {code}"))


_WORKERS: dict[tuple[str, str, str], EmbeddingWorker] = {}
_WORKERS_LOCK = threading.Lock()


def get_worker(settings: EmbeddingSettings) -> EmbeddingWorker:
    """One worker per (model, device, model cache) per process, started on its first
    request: a worker exports into (and reads) the cache of the environment it started in."""
    key = (settings.model, settings.device, str(cache_root()))
    with _WORKERS_LOCK:
        if key not in _WORKERS:
            _WORKERS[key] = EmbeddingWorker(settings)
        return _WORKERS[key]


@atexit.register
def _close_workers() -> None:
    for worker in list(_WORKERS.values()):
        worker.close()


# ---- child side


class _TextQueue(queue.Queue):
    """A queue whose size is the texts it holds (an item without texts counts one), so that
    `maxsize` bounds the texts read ahead of the model."""

    def _init(self, maxsize: int) -> None:
        super()._init(maxsize)
        self._texts = 0

    def _qsize(self) -> int:
        return self._texts

    def _put(self, item) -> None:
        super()._put(item)
        self._texts += _weight(item)

    def _get(self):
        item = super()._get()
        self._texts -= _weight(item)
        return item


def _weight(item: tuple | None) -> int:
    return 1 if item is None or item[1] is None else max(1, len(item[1]))


def _inbox(stream) -> queue.Queue:
    """Requests from the parent, read by a thread of their own as they arrive (None at EOF),
    at most 2 x REQUEST_TEXTS texts ahead of the model (the rest wait in the pipe): the
    server then takes every request waiting at once."""
    inbox = _TextQueue(maxsize=2 * REQUEST_TEXTS)

    def read() -> None:
        while True:
            try:
                inbox.put(pickle.load(stream))
            except (EOFError, OSError, pickle.UnpicklingError):
                inbox.put(None)
                return

    threading.Thread(target=read, daemon=True).start()
    return inbox


def _batches(inbox: queue.Queue) -> Iterator[list[tuple]]:
    """The requests in groups: each with the text requests already waiting behind it, up to
    REQUEST_TEXTS texts in all; ends at EOF."""
    held: list = []  # the request that did not fit the last group
    while (first := held.pop() if held else inbox.get()) is not None:
        batch, n = [first], 0 if first[1] is _DIM else len(first[1])
        while first[1] is not _DIM and n < REQUEST_TEXTS:
            try:
                item = inbox.get_nowait()
            except queue.Empty:
                break
            if item is None or item[1] is _DIM or n + len(item[1]) > REQUEST_TEXTS:
                held.append(item)
                break
            batch.append(item)
            n += len(item[1])
        yield batch


def _answer(embedder, batch: list[tuple]) -> list[tuple]:
    """Replies to `batch`'s requests, embedded in one pass: texts are sorted by length over
    all of them, so a shard's request pads less than alone (MuSiQue's units in 16 requests:
    34.2 s against 31.7 s in one). A failure is retried per request, so each gets its own."""
    if len(batch) > 1:
        try:
            vecs = embedder.embed([t for _, texts in batch for t in texts])
        except Exception:  # noqa: BLE001 - told to each request below
            return [r for item in batch for r in _answer(embedder, [item])]
        cuts = np.cumsum([len(texts) for _, texts in batch])[:-1]
        return [(rid, True, v) for (rid, _), v in zip(batch, np.split(vecs, cuts), strict=True)]
    rid, texts = batch[0]
    try:
        return [(rid, True, embedder.dim if texts is _DIM else embedder.embed(texts))]
    except Exception as exc:  # reported to the caller, the worker goes on
        return [(rid, False, f"{type(exc).__name__}: {exc}")]


def _serve(settings: EmbeddingSettings) -> None:
    from pipeline.vectors.embed_onnx import index_embedder

    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever prints from here on goes to stderr, not into the protocol
    embedder = index_embedder(settings, export=True)  # onnxruntime; torch if not exportable
    if hasattr(embedder, "leave_cores_to"):  # the index's steps go on while it embeds
        embedder.leave_cores_to(os.getppid())
    for batch in _batches(_inbox(sys.stdin.buffer)):
        for reply in _answer(embedder, batch):
            pickle.dump(reply, out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()


if __name__ == "__main__":
    _serve(EmbeddingSettings.model_validate_json(sys.argv[1]))
