"""Commands to try docgraph without your own documents or LLM key: `docgraph sample` (the
bundled sample corpus, also the tests' fixture) and `docgraph fake-llm` (a fake
OpenAI-compatible server)."""

from __future__ import annotations

import argparse
import shutil
import sys
from importlib import resources
from pathlib import Path


def write_sample_corpus(target: str | Path) -> list[Path]:
    """Copy the bundled sample corpus (a few linked documents) into `target`."""
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for item in sorted((resources.files("pipeline") / "sample_corpus").iterdir(), key=str):
        if item.name.endswith((".md", ".txt")):
            dest = target / item.name
            with resources.as_file(item) as src:
                shutil.copyfile(src, dest)
            written.append(dest)
    return written


def cmd_sample(args: argparse.Namespace) -> int:
    for path in write_sample_corpus(args.target):
        print(path)
    return 0


def cmd_fake_llm(args: argparse.Namespace) -> int:
    """Serve the fake OpenAI-compatible server until Ctrl-C or SIGTERM (LLM mode without a
    key)."""
    import os
    import signal
    import time

    from pipeline.llm.fake_server import FakeLlm, default_stall_s

    key = os.environ.get("OPENAI_API_KEY") if args.require_key else None
    if args.require_key and not key:
        raise ValueError("fake-llm --require-key: set OPENAI_API_KEY to the key to require")
    server = FakeLlm(
        fault_rate=args.fault_rate,
        faults=[f.strip() for f in args.faults.split(",") if f.strip()],
        seed=args.seed,
        host=args.host,
        port=args.port,
        stall_s=default_stall_s() if args.stall_s is None else args.stall_s,
        require_key=key,
        answers=args.answers,
        quiet=False,
    )
    # Both stop it, even where it started with SIGINT ignored: a non-interactive shell's
    # background job (`cmd &`, as CI may run the tests) passes SIGINT on ignored.
    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, signal.default_int_handler)
    with server:
        print(f"fake OpenAI-compatible server at {server.base_url}", flush=True)
        print(
            f"  try: OPENAI_BASE_URL={server.base_url} OPENAI_API_KEY=any "
            "DOCGRAPH_LLM__ENABLED=true docgraph index   (Ctrl-C stops)",
            file=sys.stderr,
            flush=True,
        )
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0
