"""The skip policy of tests/conftest.py (issue 47): a session whose tests skip for a reason
other than an optional system tool fails, unless DOCGRAPH_STRICT_SKIPS=0. Each case runs a
small pytest session in a subprocess, in a folder holding a copy of the repo's conftest.py
(its ../shared/data is absent there) and the test files of the case."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).with_name("conftest.py")

PASSING = "def test_passes():\n    assert True\n"
FILES = {
    "plain_skip": "import pytest\n\ndef test_skips():\n    pytest.skip('not today')\n",
    "skipif": "import pytest\n\n@pytest.mark.skipif(True, reason='flaky')\ndef test_t(): pass\n",
    "xfail": "import pytest\n\n@pytest.mark.xfail(reason='a bug')\ndef test_t(): assert 0\n",
    "module_importorskip": "import pytest\n\npytest.importorskip('no_such_module_here')\n",
    "shared_data_absent": "def test_reads(shared_data):\n    assert shared_data.is_dir()\n",
    "chromium_mark": (
        "from conftest import needs_system_tool\n\n"
        "@needs_system_tool('chromium', False)\ndef test_browser():\n    pass\n"
    ),
    "libgl_helper": (
        "from conftest import skip_system_tool_absent\n\n"
        "def test_ocr():\n    skip_system_tool_absent('libGL', 'ImportError: libGL.so.1')\n"
    ),
    "unknown_tool": (
        "from conftest import skip_system_tool_absent\n\n"
        "def test_t():\n    skip_system_tool_absent('boto3')\n"
    ),
}


def _session(tmp_path: Path, case: str, strict: str | None) -> subprocess.CompletedProcess:
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_passing.py").write_text(PASSING, encoding="utf-8")
    (tmp_path / f"test_{case}.py").write_text(FILES[case], encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "DOCGRAPH_STRICT_SKIPS"}
    if strict is not None:
        env["DOCGRAPH_STRICT_SKIPS"] = strict
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    "case",
    ["plain_skip", "skipif", "xfail", "module_importorskip", "shared_data_absent"],
)
def test_a_skip_for_another_reason_fails_the_strict_session(tmp_path, case):
    done = _session(tmp_path, case, strict="1")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "skips not allowed" in out and "the session fails" in out, out


def test_strict_is_the_default(tmp_path):
    done = _session(tmp_path, "plain_skip", strict=None)
    assert done.returncode == 1, done.stdout + done.stderr


def test_strict_off_lets_the_session_pass_and_still_lists_the_skip(tmp_path):
    done = _session(tmp_path, "shared_data_absent", strict="0")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "skips not allowed" in out and "shared data folder" in out, out


@pytest.mark.parametrize("case", ["chromium_mark", "libgl_helper"])
def test_an_optional_system_tool_absent_is_an_allowed_skip(tmp_path, case):
    done = _session(tmp_path, case, strict="1")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "1 passed, 1 skipped" in out and "optional system tool absent" in out, out
    assert "skips not allowed" not in out, out


def test_only_the_named_tools_are_optional(tmp_path):
    done = _session(tmp_path, "unknown_tool", strict="1")
    out = done.stdout + done.stderr
    assert done.returncode == 1 and "'boto3' is not an optional system tool" in out, out
