"""What the exploring planner tells the model: its system message, its functions, each
command's result (bounded) and what became of a submission."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sandboxed_coding_agent.core.model import Feedback, PlanRequest, SeedProject
from sandboxed_coding_agent.core.runs.sessions import CommandResult

from .prompt import feedback_text

#: The most bytes of one command's output that go into the conversation: its first and
#: last halves, the middle elided with a note saying how many bytes were cut.
MAX_OUTPUT_BYTES = 10_000
#: Function-call mistakes in a row that end the exploration.
MAX_FORMAT_ERRORS = 3
#: The most files a refused submission names (then how many more).
MAX_REFUSED_FILES = 50

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run one shell command with `bash -c` in a fresh sandbox, in the "
            "project folder. Only the project's files carry over to the next command.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string", "description": "the command"}},
                "required": ["command"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit",
            "description": "Submit the changes made to the editable files; they are then "
            "tested from the pristine project in a fresh sandbox.",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    },
]

SYSTEM = """\
You are a coding agent. You change a project so that the user's request is met, by \
calling functions.

- `bash` runs one command. Each command runs in a fresh `bash -c` in the project folder: \
no variable, working folder or process carries over, only the project's files. There is \
no network. A command may run for {seconds:g} seconds; its output (stdout and stderr \
merged) comes back with its exit code, cut in the middle beyond {max_bytes:,} bytes.
- The files you may change: {editable}. Test files are read-only; other changes, new \
files included, are refused when you submit: delete the files you made and do not mean \
to submit.
- {tests}
- Edit files with commands (sed -i, a heredoc, python). When the change is done and \
tested, call `submit`. It is proven from the pristine project with your changes to the \
editable files, in a fresh sandbox; you are told the verdict only if you get another \
attempt.
"""


def test_advice(seed: SeedProject) -> str:
    """How the model may run the visible tests: the seed's test command, unless it names a
    hidden test (then only the visible tests' names)."""
    visible = [path for path in seed.test_files if path not in set(seed.hidden_files)]
    command = " ".join(seed.test_command)
    hidden = (*seed.hidden_files, *seed.hidden_test_paths)
    if command and not any(name in command for name in hidden):
        return f"The test command is: {command}"
    if visible:
        return f"The visible tests are: {', '.join(visible)}."
    return "The project has no visible tests."


def system_message(request: PlanRequest, seed: SeedProject, seconds: float) -> str:
    editable = ", ".join(request.editable_paths) or "none"
    return SYSTEM.format(
        seconds=seconds, max_bytes=MAX_OUTPUT_BYTES, editable=editable, tests=test_advice(seed)
    )


def first_message(request: PlanRequest, files: Sequence[str]) -> str:
    listed = "\n".join(files[:500]) + ("\n..." if len(files) > 500 else "")
    return f"{request.instruction}\n\nThe project's files:\n{listed}"


def bounded(text: str, limit: int = MAX_OUTPUT_BYTES) -> str:
    """``text`` within ``limit`` UTF-8 bytes: its head and tail, the middle elided and said."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    half = limit // 2
    cut = len(data) - 2 * half
    head = data[:half].decode("utf-8", "ignore")
    tail = data[-half:].decode("utf-8", "ignore")
    return f"{head}\n[... {cut:,} bytes of output cut from the middle ...]\n{tail}"


def command_result(result: CommandResult) -> str:
    """The ``tool`` message of a command: how it ended, then its output as the model sees it."""
    if result.timed_out:
        status = "timed out: stopped at its time limit"
    else:
        status = f"exit code: {result.exit_code}"
    lines = [status]
    if result.output_truncated:
        lines.append("(the sandbox cut the output at its own bound)")
    if result.not_kept:
        lines.append("not carried to the next command: " + ", ".join(result.not_kept[:20]))
    lines.append("output:")
    return "\n".join(lines) + "\n" + bounded(result.output)


def refusal(changed: Mapping[str, str], deleted: Sequence[str]) -> str:
    """What the model is told of a refused submission: each file and why, the first
    :data:`MAX_REFUSED_FILES` of them (then how many more)."""
    reasons = [f"- {path}: {why}" for path, why in changed.items()]
    reasons += [f"- {path}: an editable file may not be deleted; restore it" for path in deleted]
    said = ["Submission refused; nothing was tested. Fix this and submit again:"]
    said += reasons[:MAX_REFUSED_FILES]
    if len(reasons) > MAX_REFUSED_FILES:
        said.append(f"- and {len(reasons) - MAX_REFUSED_FILES:,} more files likewise")
    return "\n".join(said)


def verdict_message(feedback: Feedback) -> str:
    """What a repair attempt tells the model of its submission (no hidden test's output)."""
    text = feedback_text(feedback)
    lead, _, facts = text.partition("\nWhat happened, as JSON:\n")
    if feedback.rejections:
        lead = "Your submission was refused before it was tested; do not repeat the reasons."
    else:
        lead = (
            "Your submission was tested from the pristine project in a fresh sandbox, and "
            "the test failed. Your files are as you left them; fix what made it fail, "
            "then submit again."
        )
    return f"{lead}\nWhat happened, as JSON:\n{facts}" if facts else lead


def arguments(raw: object) -> dict[str, Any] | None:
    """A function call's arguments as a JSON object; ``None`` when they are not one."""
    if raw in (None, ""):
        return {}
    if not isinstance(raw, str):
        return None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None
