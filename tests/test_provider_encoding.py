"""The provider's answer is bounded on the wire: no content encoding, and raw bytes counted.

The agent asks for ``Accept-Encoding: identity``, but httpx would decode gzip (stacked
too) whatever was asked for, so a few KB on the wire could inflate to gigabytes before
the bound was checked. Every test talks to a real loopback server.
"""

from __future__ import annotations

import gzip
import json
import os
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from conftest import API_KEY, FIXED_CALCULATOR, MODEL, AgentRun, FakeProvider, completion, plan_json
from test_provider_faults import BOUND, Planner

PLAN = plan_json(("calculator.py", FIXED_CALCULATOR))
ANSWER = json.dumps(completion(PLAN)).encode()
MIB = 1024 * 1024
#: What the stacked bomb inflates to: 2 GiB of zeros.
BOMB_MIB = 2048
#: How much more memory, at its peak, a process refusing the bomb may use than before.
MEMORY_ALLOWANCE_KIB = 100 * 1024


def gzip_of_zeros(mebibytes: int) -> bytes:
    """A gzip member holding ``mebibytes`` MiB of zeros, built without ever holding them.

    One MiB of zeros is deflated and flushed to a byte boundary with the history
    reset, so every further MiB deflates to the very same bytes: the member is those
    bytes repeated, between a gzip header and a trailer. About 1 KB per MiB.
    """
    zeros = bytes(MIB)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    one_mib = deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)
    last_block = deflate.flush()
    crc = 0
    for _ in range(mebibytes):
        crc = zlib.crc32(zeros, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    trailer = struct.pack("<II", crc, (mebibytes * MIB) & 0xFFFFFFFF)
    return header + one_mib * mebibytes + last_block + trailer


def test_gzip_of_zeros_is_the_zeros() -> None:
    assert gzip.decompress(gzip_of_zeros(3)) == bytes(3 * MIB)


def stacked_bomb() -> bytes:
    """``Content-Encoding: gzip, gzip``: 2 GiB of zeros gzipped, and that gzipped again."""
    bomb = gzip.compress(gzip_of_zeros(BOMB_MIB), compresslevel=9)
    inner = gzip.decompress(bomb)
    assert struct.unpack("<I", inner[-4:])[0] == BOMB_MIB * MIB  # what it claims to hold
    assert len(bomb) < 10_000, len(bomb)
    return bomb


@pytest.fixture
def planner(provider: FakeProvider, tmp_path: Path) -> Planner:
    return Planner(provider.base_url, tmp_path / "state")


def send(
    handler: BaseHTTPRequestHandler, body: bytes, headers: dict[str, str], *, chunked: bool
) -> None:
    """Answer 200 with ``body``, announced by Content-Length or sent in 1,000-byte chunks."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    for name, value in headers.items():
        handler.send_header(name, value)
    if chunked:
        handler.send_header("Transfer-Encoding", "chunked")
    else:
        handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    if not chunked:
        handler.wfile.write(body)
        return
    for start in range(0, len(body), 1000):
        piece = body[start : start + 1000]
        handler.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
    handler.wfile.write(b"0\r\n\r\n")


def answer_of(size: int) -> bytes:
    """A valid completion padded with JSON whitespace to exactly ``size`` bytes."""
    assert len(ANSWER) <= size
    return ANSWER + b" " * (size - len(ANSWER))


# --- encoded answers are refused before their body is read ---------------------------------------


def test_stacked_gzip_bomb_is_refused_without_inflating_it(
    provider: FakeProvider, tmp_path: Path
) -> None:
    provider.reply(200, stacked_bomb(), headers={"Content-Encoding": "gzip, gzip"})
    # The planner runs in a process of its own, so that its peak memory is its own.
    script = """
import json, sys


def peak_kib():
    # VmHWM: this process's own peak since its exec. ru_maxrss would start at the peak of
    # the process that started it (exec keeps that high-water mark): the whole suite's.
    status = open("/proc/self/status").read()
    return int(status.split("VmHWM:")[1].split()[0])


import httpx  # what the planner imports when it calls, loaded before the baseline

from sandboxed_coding_agent.core.errors import ProviderError
from sandboxed_coding_agent.core.model import PlannerOptions
from sandboxed_coding_agent.core.runs.orchestrator import plan_request
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed
from sandboxed_coding_agent.plugins.openai_planner import OpenAICompatiblePlanner

seed = calculator_seed()
request = plan_request(
    seed, seed.default_prompt, seed.read_files(), PlannerOptions(max_retries=0)
)
before = peak_kib()
try:
    OpenAICompatiblePlanner().plan(request)
    message = None
except ProviderError as error:
    message = error.message
after = peak_kib()
print(json.dumps({"message": message, "grew_kib": after - before}))
"""
    env = {
        **os.environ,
        "CODING_AGENT_BASE_URL": provider.base_url,
        "CODING_AGENT_MODEL": MODEL,
        "CODING_AGENT_API_KEY": API_KEY,
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }

    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["grew_kib"] <= MEMORY_ALLOWANCE_KIB, (
        f"the bomb took {result['grew_kib'] // 1024} MiB more memory: {result['message']}"
    )
    assert result["message"] is not None, "the bomb was taken for a plan"
    assert "Content-Encoding: gzip, gzip" in result["message"]
    assert "\n" not in result["message"]
    assert API_KEY not in result["message"]
    assert len(provider.requests) == 1


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("gzip", gzip.compress),
        ("GZip", gzip.compress),
        ("deflate", zlib.compress),
        ("identity, gzip", gzip.compress),
    ],
    ids=["gzip", "mixed-case", "deflate", "identity-then-gzip"],
)
def test_an_encoded_answer_is_refused_naming_its_encoding(
    provider: FakeProvider,
    planner: Planner,
    encoding: str,
    encode: Callable[[bytes], bytes],
) -> None:
    # A perfectly good plan, but encoded although the agent asked for identity.
    provider.reply(200, encode(ANSWER), headers={"Content-Encoding": encoding})

    error = planner.fails(max_retries=3)

    assert error.message == (
        f"the provider's answer is encoded (Content-Encoding: {encoding}) although the "
        "planner asked for identity; it was not read"
    )
    assert len(provider.requests) == 1, "an encoded answer is not worth another attempt"
    assert provider.requests[0].headers["Accept-Encoding"] == "identity"
    (attempt,) = error.details["attempts"]
    assert attempt["status"] == 200
    assert attempt["outcome"] == "encoded"


def test_the_cli_reports_an_encoded_answer_as_a_provider_error(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.reply(200, gzip.compress(ANSWER), headers={"Content-Encoding": "gzip"})

    run = run_agent("run", "--json", timeout=60)

    assert run.returncode == 3, run.stderr
    message = run.json()["error"]["message"]
    assert "encoded (Content-Encoding: gzip)" in message
    assert API_KEY not in run.stdout + run.stderr
    assert run.sandboxes == []


# --- plain answers are read, their bound counted on the wire -------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Content-Encoding": "identity"},
        {"Content-Encoding": " IDENTITY "},
        {"Content-Encoding": ""},
    ],
    ids=["no-encoding", "identity", "identity-spaced-upper", "empty"],
)
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_an_identity_answer_is_read(
    provider: FakeProvider,
    planner: Planner,
    headers: dict[str, str],
    chunked: bool,
) -> None:
    provider.reply(action=lambda handler: send(handler, ANSWER, headers, chunked=chunked))

    result = planner.plan()

    assert result.plan.files[0].content == FIXED_CALCULATOR
    (attempt,) = result.details["attempts"]
    assert attempt["outcome"] == "ok"


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_an_answer_of_exactly_the_bound_is_read(
    provider: FakeProvider,
    planner: Planner,
    chunked: bool,
) -> None:
    body = answer_of(BOUND)
    # Chunked, the wire carries more than the bound (each chunk's size line): not counted.
    provider.reply(action=lambda handler: send(handler, body, {}, chunked=chunked))

    result = planner.plan()

    assert result.plan.files[0].content == FIXED_CALCULATOR


@pytest.mark.parametrize(
    ("chunked", "how"),
    [(False, f"it announced {BOUND + 1:,} bytes"), (True, "kept sending past")],
    ids=["content-length", "chunked"],
)
def test_an_answer_one_byte_over_the_bound_is_refused(
    provider: FakeProvider,
    planner: Planner,
    chunked: bool,
    how: str,
) -> None:
    body = answer_of(BOUND + 1)
    provider.reply(action=lambda handler: send(handler, body, {}, chunked=chunked))

    error = planner.fails()

    assert f"the provider's answer is larger than {BOUND:,} bytes" in error.message
    assert how in error.message
    assert error.message.endswith("it was not read further")
