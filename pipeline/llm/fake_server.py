"""A small OpenAI-compatible chat server on 127.0.0.1, for tests and for trying LLM mode without
a key (`docgraph fake-llm`).

Answers are deterministic functions of the messages (a pluggable responder; the default one,
which knows the project's prompts, is `pipeline.llm.fake_answers`: extraction answers as long
as a real model's, or with `answers="verbose"` the whole offline graph). Like a real
server it enforces the request's `max_tokens` (the answer is cut there and `finish_reason` is
"length") and can require an API key (401 otherwise). Faults (429 with Retry-After, 500, a
stall of `stall_s` seconds — a real timeout when it outlasts the client's, malformed JSON
content in a 200) are drawn per request from an RNG seeded by (seed, request body, how many
times that body was seen), so a run's faults do not depend on the order in which concurrent
requests arrive. Stdlib only (no openai SDK).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pipeline.llm.accounting import STAGE_HEADER
from pipeline.llm.fake_answers import (
    Responder,
    check_answers,
    default_responder,
    message_text,
)
from pipeline.tokens import count_tokens, truncate_tokens

FAULTS = ("429", "500", "timeout", "malformed")


def default_stall_s() -> float:
    """The `docgraph fake-llm` stall: 5 s past the client's default timeout, so an injected
    "timeout" fault is a real timeout for a client with default settings."""
    from pipeline.config import LlmSettings

    return float(LlmSettings.model_fields["timeout_s"].default) + 5.0


def malform(answer: str, rng: random.Random, repairable: float = 0.5) -> str:
    """A broken rendering of a JSON answer: fenced with a trailing comma (repairable; a
    `repairable` share of them) or truncated (not). A text answer is returned unchanged (text
    cannot be malformed JSON)."""
    stripped = answer.strip()
    if not stripped.startswith(("{", "[")):
        return answer
    if rng.random() < repairable and stripped.endswith("}"):
        return "Here is the JSON:\n```json\n" + stripped[:-1] + ",}\n```"
    return stripped[: max(1, len(stripped) // 2)]


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # one response per connection: SSE needs no chunked encoding

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        if not self.server.fake.quiet:
            super().log_message(format, *args)

    def _send_json(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        if self.path.rstrip("/").endswith("/models"):
            model = {"id": "fake-model", "object": "model", "created": 0, "owned_by": "docgraph"}
            self._send_json(200, {"object": "list", "data": [model]})
        else:
            self._send_json(404, {"error": {"message": "not found", "type": "not_found"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        fake = self.server.fake
        fake._enter()
        try:
            self._chat(fake)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout): nothing to answer
        finally:
            fake._leave()

    def _chat(self, fake: FakeLlm) -> None:
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": "not found", "type": "not_found"}})
            return
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if fake.require_key is not None:
            auth = self.headers.get("Authorization", "")
            if auth != f"Bearer {fake.require_key}":
                self._send_json(401, {"error": {"message": "bad key", "type": "auth_error"}})
                return
        try:
            body = json.loads(raw)
            messages = body["messages"]
        except (ValueError, KeyError, TypeError):
            self._send_json(400, {"error": {"message": "bad request", "type": "invalid_request"}})
            return
        refusal = fake._refusal(body, messages)
        if refusal is not None:
            self._send_json(*refusal)
            return
        stage = self.headers.get(STAGE_HEADER, "")
        rng, fault = fake._draw(raw, stage)
        if fault == "429":
            err = {"error": {"message": "rate limited (fake)", "type": "rate_limit_error"}}
            self._send_json(429, err, {"Retry-After": f"{fake.retry_after:g}"})
            return
        if fault == "500":
            self._send_json(500, {"error": {"message": "server error (fake)", "type": "server"}})
            return
        if fault == "timeout":
            time.sleep(fake.stall_s)
        answer = fake.responder(messages)
        if fault == "malformed":
            answer = malform(answer, rng, fake.repairable)
        if fake.latency_s:
            time.sleep(fake.latency_s)
        answer, finish = fake._limit(answer, body)
        model = str(body.get("model") or "fake-model")
        prompt_tokens = sum(count_tokens(message_text(m)) for m in messages)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": count_tokens(answer),
            "total_tokens": prompt_tokens + count_tokens(answer),
        }
        ident = "chatcmpl-" + hashlib.sha256(raw).hexdigest()[:24]
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(ident, model, answer, finish, usage if include_usage else None)
            return
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": answer},
            "finish_reason": finish,
            "logprobs": None,
        }
        self._send_json(
            200,
            {
                "id": ident,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [choice],
                "usage": usage,
            },
        )

    def _stream(self, ident: str, model: str, answer: str, finish: str, usage: dict | None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        created = int(time.time())

        def chunk(delta: dict, finish: str | None, extra: dict | None = None) -> None:
            obj = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
                if delta is not None
                else [],
                **(extra or {}),
            }
            self.wfile.write(b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n")
            self.wfile.flush()

        pieces = re.findall(r"\S+\s*|\s+", answer) or [""]
        chunk({"role": "assistant", "content": ""}, None)
        for piece in pieces:
            chunk({"content": piece}, None)
        chunk({}, finish)
        if usage is not None:
            chunk(None, None, {"usage": usage})  # type: ignore[arg-type]
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    # socketserver's default listen backlog is 5: at client concurrency 16+ connections were
    # reset and retried, a fault no real endpoint has (measured by benchmarks/llm_rate.py)
    request_queue_size = 1024
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    fake: FakeLlm


class FakeLlm:
    """OpenAI-compatible chat server: `with FakeLlm() as srv: OpenAI(base_url=srv.base_url)`.

    `answers`: how the default responder answers extraction — "model" (as long as a real
    extractor's answer) or "verbose" (the whole offline graph: answers cut at max_tokens, for
    the truncation tests); a given `responder` replaces it;
    `stall_s`: how long a "timeout" fault stalls before answering (past the client's timeout,
    it times out for real); `require_key`: answer 401 unless the request carries this key;
    `models`: answer 404 (model_not_found) for any other model (None: any model);
    `context_tokens`: answer 400 when prompt + max_tokens exceed it, as vLLM does;
    `enforce_max_tokens`: cut an answer longer than the request's `max_tokens` (or
    `max_completion_tokens`) there, with finish_reason "length", as a real server does.

    Counters (read them under no lock; they are ints updated under one): `requests`,
    `by_fault`, `by_stage` (from the X-Docgraph-Stage header), `by_body` (sha256 of the request
    body -> times seen, to prove no call is repeated), `truncated` (answers cut at the limit),
    `in_flight`, `max_in_flight`.
    `queue_faults("429", None, ...)` forces the next requests' faults in arrival order.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        answers: str = "model",
        fault_rate: float = 0.0,
        faults: Iterable[str] = FAULTS,
        seed: int = 0,
        repairable: float = 0.5,
        host: str = "127.0.0.1",
        port: int = 0,
        retry_after: float = 0.0,
        stall_s: float = 2.0,
        latency_s: float = 0.0,
        require_key: str | None = None,
        models: Iterable[str] | None = None,
        context_tokens: int | None = None,
        enforce_max_tokens: bool = True,
        quiet: bool = True,
    ) -> None:
        default = partial(default_responder, answers=check_answers(answers))
        self.responder: Responder = responder or default
        self.fault_rate = fault_rate
        self.faults = tuple(faults)
        unknown = set(self.faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {FAULTS}")
        self.seed = seed
        self.repairable = repairable  # share of malformed answers a client can repair
        self.host, self.port = host, port
        self.retry_after = retry_after
        self.stall_s = stall_s
        self.latency_s = latency_s
        self.require_key = require_key
        self.models = frozenset(models) if models is not None else None
        self.context_tokens = context_tokens
        self.enforce_max_tokens = enforce_max_tokens
        self.quiet = quiet
        self._lock = threading.Lock()
        self._queued: list[str | None] = []
        self.reset_counters()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def reset_counters(self) -> None:
        with self._lock:
            self.requests = 0
            self.by_fault: Counter[str] = Counter()
            self.by_stage: Counter[str] = Counter()
            self.by_body: Counter[str] = Counter()
            self.truncated = 0
            self.in_flight = 0
            self.max_in_flight = 0

    def queue_faults(self, *faults: str | None) -> None:
        """Force the faults of the next requests (None: no fault), then back to the RNG."""
        with self._lock:
            self._queued.extend(faults)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def _enter(self) -> None:
        with self._lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _draw(self, raw: bytes, stage: str) -> tuple[random.Random, str | None]:
        digest = hashlib.sha256(raw).hexdigest()
        with self._lock:
            self.by_body[digest] += 1
            if stage:
                self.by_stage[stage] += 1
            rng = random.Random(f"{self.seed}:{digest}:{self.by_body[digest]}")
            if self._queued:
                fault = self._queued.pop(0)
            elif self.faults and rng.random() < self.fault_rate:
                fault = rng.choice(self.faults)
            else:
                fault = None
            self.by_fault[fault or "none"] += 1
        return rng, fault

    def _refusal(self, body: dict, messages: list[dict]) -> tuple[int, dict] | None:
        """(status, error body) for a request a real server would refuse, else None."""
        model = str(body.get("model") or "")
        if self.models is not None and model not in self.models:
            message = f"The model `{model}` does not exist or you do not have access to it."
            return 404, {"error": {"message": message, "type": "invalid_request_error"}}
        if self.context_tokens is None:
            return None
        prompt = sum(count_tokens(message_text(m)) for m in messages)
        asked = prompt + int(body.get("max_tokens") or 0)
        if asked <= self.context_tokens:
            return None
        message = (
            f"This model's maximum context length is {self.context_tokens} tokens. However, "
            f"you requested {asked} tokens ({prompt} in the messages, "
            f"{asked - prompt} in the completion)."
        )
        return 400, {"error": {"message": message, "type": "invalid_request_error"}}

    def _limit(self, answer: str, body: dict) -> tuple[str, str]:
        """(answer, finish_reason): cut at the request's token limit when enforced."""
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        if not self.enforce_max_tokens or not isinstance(limit, int) or limit <= 0:
            return answer, "stop"
        if count_tokens(answer) <= limit:
            return answer, "stop"
        with self._lock:
            self.truncated += 1
        return truncate_tokens(answer, limit), "length"

    def start(self) -> FakeLlm:
        count_tokens("warm up")  # load the encoding now, not inside the first timed request
        self._server = _Server((self.host, self.port), _Handler)
        self._server.fake = self
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fake-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeLlm:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
