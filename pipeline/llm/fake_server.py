"""A small OpenAI-compatible chat server on 127.0.0.1, for tests and for trying LLM mode without
a key (`docgraph fake-llm`).

Answers are deterministic functions of the messages (a pluggable responder). Like a real
server it enforces the request's `max_tokens` (the answer is cut there and `finish_reason` is
"length") and can require an API key (401 otherwise). Faults (429 with Retry-After, 500, a
stall of `stall_s` seconds — a real timeout when it outlasts the client's, malformed JSON
content in a 200) are drawn per request from an RNG seeded by (seed, request body, how many
times that body was seen), so a run's faults do not depend on the order in which concurrent
requests arrive. Stdlib only.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pipeline.tokens import count_tokens, truncate_tokens

FAULTS = ("429", "500", "timeout", "malformed")
STAGE_HEADER = "X-Docgraph-Stage"
JSON_MARKER = "return json"

Responder = Callable[[list[dict]], str]

_WORD = re.compile(r"[^\W\d_][\w'’-]*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def default_stall_s() -> float:
    """The `docgraph fake-llm` stall: 5 s past the client's default timeout, so an injected
    "timeout" fault is a real timeout for a client with default settings."""
    from pipeline.config import LlmSettings

    return float(LlmSettings.model_fields["timeout_s"].default) + 5.0


def message_text(message: dict) -> str:
    """A message's text: a plain string or the text parts of a content list."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


_DOC_BLOCK = re.compile(r'<document id="([^"]+)">\n(.*?)\n</document>', re.S)


DESCRIPTION_WORDS = 15


def _brief(text: str) -> str:
    """A description as a model writes one when asked for "one sentence": at most
    DESCRIPTION_WORDS words (the offline extractor's are whole evidence sentences)."""
    return " ".join(str(text or "").split()[:DESCRIPTION_WORDS])


def extraction_answer(blocks: list[tuple[str, str]]) -> str:
    """What a capable model would answer to the extraction prompt: per data block, typed
    entities and relationships — here found by the offline extractor, so the answer is
    deterministic and realistic in kind (types, evidence descriptions, strengths) and in size:
    short descriptions, and no more relationships than entities (the strongest), where the
    offline extractor relates every co-occurring pair."""
    import polars as pl

    from pipeline.config import ExtractionSettings
    from pipeline.extract.nlp import NlpExtractor

    units = pl.DataFrame({"id": [k for k, _ in blocks], "text": [t for _, t in blocks]})
    ents, rels = NlpExtractor(ExtractionSettings()).extract(units)
    out: dict[str, dict[str, list]] = {k: {"entities": [], "relationships": []} for k, _ in blocks}
    for row in ents.iter_rows(named=True):
        out[row["text_unit_id"]]["entities"].append(
            {"title": row["title"], "type": row["type"], "description": _brief(row["description"])}
        )
    n_ents = ents.group_by("text_unit_id").len()
    strongest = (
        rels.with_columns(order=pl.int_range(pl.len()).over("text_unit_id"))
        .sort(["text_unit_id", "weight", "order"], descending=[False, True, False])
        .join(n_ents, on="text_unit_id", how="left")
        .filter(pl.int_range(pl.len()).over("text_unit_id") < pl.col("len").fill_null(0))
        .sort(["text_unit_id", "order"])
    )
    for row in strongest.iter_rows(named=True):
        out[row["text_unit_id"]]["relationships"].append(
            {
                "source": row["source"],
                "target": row["target"],
                "type": row["type"],
                "description": _brief(row["description"]),
                "strength": max(1, min(10, round(row["weight"] * 5))),
            }
        )
    return json.dumps(out, ensure_ascii=False)


REPORT_MARKER = "You write a report on one community of a knowledge graph"
_ITEM_BLOCK = re.compile(r'<item id="([^"]+)"(?: \w+="[^"]*")*>\n(.*?)\n</item>', re.S)
_CONTEXT_LINE = re.compile(r"^- (?:Report \d+: )?(.+?)(?: \[[A-Z_]+\]| —|:)", re.M)


def report_answer(text: str) -> str:
    """The community-report answer: title = the first two entity (or sub-report) titles of the
    context, summary = its first data sentence, rating from the number of entities, one
    finding per entity (at most 5)."""
    context = text.split("<context>", 1)[-1].split("</context>", 1)[0]
    names = list(dict.fromkeys(m.strip() for m in _CONTEXT_LINE.findall(context)))
    data = [ln[2:] for ln in context.splitlines() if ln.startswith("- ")]
    first = _SENTENCE_END.split(data[0].strip(), maxsplit=1)[0] if data else "No data."
    answer = {
        "title": " and ".join(names[:2]) or "Community",
        "summary": first[:300],
        "rating": min(10, len(names)),
        "rating_explanation": f"{len(names)} entities.",
        "findings": [
            {"summary": n, "explanation": f"{n} belongs to this community."} for n in names[:5]
        ],
    }
    return json.dumps(answer, ensure_ascii=False)


def summaries_answer(blocks: list[tuple[str, str]]) -> str:
    """The description-summary answer: per item, its first two descriptions joined."""
    out = {k: " ".join(t.splitlines()[:2]) for k, t in blocks}
    return json.dumps(out, ensure_ascii=False)


ANALYSIS_MARKER = "You analyse a search question over a knowledge graph"
FLOW_MARKER = "You answer questions from a knowledge flow"
_QUESTION_WORDS = frozenset(
    re.findall(r"\w+", "what who whom whose when where which why how is are was were do does did")
)
_INTENT_CUES = (
    ("relationship", re.compile(r"\b(relat(ed|ion|ionship)|connect(ed|ion)?|link(ed)?|between)\b")),
    ("summary", re.compile(r"\b(summar\w*|overview|main themes?)\b")),
    ("factual", re.compile(r"^\W*(what|who|when|where|which)\b")),
)


def analysis_answer(text: str) -> str:
    """The query-analysis answer: entities = the question's capitalised words (question words
    left out), intent from cue words (relationship, summary, factual, else exploration)."""
    question = text.split("<question>", 1)[-1].split("</question>", 1)[0].strip()
    names: list[str] = []
    for word in _WORD.findall(question):
        word = word.strip("'’-")
        if word[:1].isupper() and word.casefold() not in _QUESTION_WORDS and word not in names:
            names.append(word)
    low = question.casefold()
    intent = next((name for name, cue in _INTENT_CUES if cue.search(low)), "exploration")
    return json.dumps({"entities": names, "intent": intent}, ensure_ascii=False)


def flow_answer(text: str) -> str:
    """The flow answer: the first fact (else definition) line of the context, as a sentence."""
    context = text.split("<context>", 1)[-1].split("</context>", 1)[0]
    lines = [ln[2:] for ln in context.splitlines() if ln.startswith("- ")]
    return f"From the knowledge flow: {lines[0]}" if lines else "The context holds no facts."


FOCUS_MARKER = "You answer questions about one note of a notebook"
_URI_AND_TITLE = re.compile(r'"uri_and_title": "(\[[^"]*\]\([^"]*\))"')


def focus_answer(text: str) -> str:
    """The focus answer: names the focus note and how many related notes the context holds."""
    found = _URI_AND_TITLE.findall(_block(text, "context"))
    if not found:
        return "The context holds no note."
    return f"About {found[0]}, with {len(found) - 1} related notes."


MAP_MARKER = "You are one analyst in a map-reduce search"
REDUCE_MARKER = "You combine the answers of several analysts"


def _block(text: str, tag: str) -> str:
    return text.split(f"<{tag}>", 1)[-1].split(f"</{tag}>", 1)[0].strip()


def map_answer(text: str) -> str:
    """The global map answer: rated by how many of the question's words (4+ letters) the
    reports hold (0 when none), the response is the report row that holds most of them."""
    question = text.rsplit("Question:", 1)[-1]
    words = {w.casefold() for w in _WORD.findall(question) if len(w) >= 4}
    rows = [ln for ln in _block(text, "context").splitlines()[2:] if ln.strip()]
    hits = [sum(w in row.casefold() for w in words) for row in rows]
    best = max(range(len(rows)), key=lambda i: hits[i], default=None)
    rating = min(10, hits[best]) if best is not None else 0
    response = rows[best].split("|")[-1][:300] if rating else ""
    return json.dumps({"reasoning": f"{rating} question words", "response": response,
                       "rating": rating}, ensure_ascii=False)  # fmt: skip


def reduce_answer(text: str) -> str:
    """The global reduce answer: the best analyst's answer, said to be combined."""
    analyses = _block(text, "analyses").split("\n\n")
    first = analyses[0].split(": ", 1)[-1] if analyses and analyses[0] else ""
    return f"Combined from {len(analyses)} analysts: {first}" if first else "Nothing relevant."


def default_responder(messages: list[dict]) -> str:
    """Deterministic answer from the last user message (of the first turn).

    Document data blocks (`<document id="k">`, the extraction prompt) get the extraction
    answer keyed by block id (see `extraction_answer`). The community-report prompt (its
    system line) gets `report_answer`; `<item id="k">` blocks (description summaries) get
    `summaries_answer`. The query-analysis prompt gets `analysis_answer`, the flow answer
    prompt `flow_answer`, the focus prompt `focus_answer`, global search's map and reduce
    prompts `map_answer` and `reduce_answer`.

    A prompt that says "Return JSON" (any message, any case) gets
    `{"entities": [{name, type, description}], "relationships": [{source, target, description,
    strength}]}` with the capitalised words of the last user message as entities and consecutive
    pairs as relationships; any other prompt gets the first sentence of the last user message.
    """
    # A re-ask appends (assistant answer, user correction): answer the original prompt, i.e.
    # the last user message before the first assistant message.
    first_turn = []
    for m in messages:
        if m.get("role") == "assistant":
            break
        first_turn.append(m)
    users = [m for m in first_turn if m.get("role") == "user"]
    text = message_text(users[-1]) if users else ""
    if any(REPORT_MARKER in message_text(m) for m in first_turn):
        return report_answer(text)
    if any(ANALYSIS_MARKER in message_text(m) for m in first_turn):
        return analysis_answer(text)
    if any(FLOW_MARKER in message_text(m) for m in first_turn):
        return flow_answer(text)
    if any(FOCUS_MARKER in message_text(m) for m in first_turn):
        return focus_answer(text)
    if any(MAP_MARKER in message_text(m) for m in first_turn):
        return map_answer(text)
    if any(REDUCE_MARKER in message_text(m) for m in first_turn):
        return reduce_answer(text)
    items = _ITEM_BLOCK.findall(text)
    if items:  # the description-summary prompt: answer keyed by item id
        return summaries_answer(items)
    blocks = _DOC_BLOCK.findall(text)
    if blocks:  # the extraction prompt: documents as data blocks, answer keyed by block id
        return extraction_answer(blocks)
    if any(JSON_MARKER in message_text(m).lower() for m in messages):
        names: list[str] = []
        for word in _WORD.findall(text):
            word = word.strip("'’-")
            if word and word[0].isupper() and word not in names:
                names.append(word)
        entities = [
            {"name": n, "type": "CONCEPT", "description": f"{n} is mentioned in the text."}
            for n in names
        ]
        relationships = [
            {"source": a, "target": b, "description": f"{a} appears near {b}.", "strength": 1.0}
            for a, b in zip(names, names[1:], strict=False)
        ]
        return json.dumps(
            {"entities": entities, "relationships": relationships}, ensure_ascii=False
        )
    first = _SENTENCE_END.split(text.strip(), maxsplit=1)[0] if text.strip() else ""
    return first[:500] or "OK."


def malform(answer: str, rng: random.Random) -> str:
    """A broken rendering of a JSON answer: fenced with a trailing comma (repairable) or
    truncated (not). A text answer is returned unchanged (text cannot be malformed JSON)."""
    stripped = answer.strip()
    if not stripped.startswith(("{", "[")):
        return answer
    if rng.random() < 0.5 and stripped.endswith("}"):
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
            answer = malform(answer, rng)
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
        fault_rate: float = 0.0,
        faults: Iterable[str] = FAULTS,
        seed: int = 0,
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
        self.responder: Responder = responder or default_responder
        self.fault_rate = fault_rate
        self.faults = tuple(faults)
        unknown = set(self.faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {FAULTS}")
        self.seed = seed
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
