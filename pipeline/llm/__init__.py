"""LLM plumbing shared by the stages that call a model (extraction, summaries, reports,
answers): prompts in, parsed JSON or text out.

`client` is the OpenAI-compatible client (retries, rate limits, a response cache, call
accounting); `prompts/` holds the prompt templates and how document text is fenced as
data; `fake_server` is a small OpenAI-compatible HTTP server that tests and the offline demo
start on 127.0.0.1."""
