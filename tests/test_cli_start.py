"""The CLI's start path stays light: heavy libraries load only when a run needs them."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("httpx", "lazycloud", "pydantic")


@pytest.mark.parametrize("args", [["--help"], ["seeds", "list"], ["plugins", "list"]])
def test_cli_start_path_imports_no_heavy_library(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c",
         "import sys; from sandboxed_coding_agent.core.cli import main; "
         f"sys.argv = ['agent', *{args!r}]; main()"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    top_level = {name.split(".")[0] for name in imported}
    assert top_level.isdisjoint(HEAVY), sorted(top_level & set(HEAVY))
