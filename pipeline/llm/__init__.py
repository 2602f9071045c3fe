"""LLM plumbing shared by the stages that call a model (extraction, summaries, reports,
answers): prompts in, parsed JSON or text out.

`client.LlmClient` is what stages call: it extends `connection` (the endpoint, counted retries
with backoff) with the disk cache (`cache`), the repair and re-ask of JSON answers
(`json_repair`) and per-stage call accounting (`accounting`); `errors` holds the exceptions a
failed call raises, `batches` the halving of a batch whose answer was cut. `prompts/` holds the
prompt templates and how document text is fenced as data. `fake_server` is a small
OpenAI-compatible HTTP server that tests and the offline demo start on 127.0.0.1; the answers
it gives to the project's prompts are `fake_answers`."""
