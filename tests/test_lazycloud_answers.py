"""The deployed planner's answer is read as data: a control plane cannot run code on this
machine by sending a pickle that names a function.

The SDK would unpickle a task's result as it comes; the planner reads the raw payload
instead (see ``plugins/lazycloud/planner.py``). The stand-in control plane of
``lazycloud_standin.py`` (a loopback stand-in: no real one is reachable here) is made
to answer a hostile pickle.
"""

from __future__ import annotations

import base64
import pickle
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from lazycloud_standin import (  # noqa: F401 - the fixtures, used by their names
    ControlPlane,
    control_plane_fixture,
    lazycloud_env_fixture,
)
from test_lazycloud import (  # noqa: F401 - the fixtures, used by their names
    RunAgent,
    cwd,
    deployed,
    lazycloud,
    lazycloud_environment,
)

from sandboxed_coding_agent.plugins.lazycloud.planner import plain_value


class Planted:
    """Unpickling this writes a file: what a hostile pickle would do instead."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.write_text, (self.path, "code ran"))


def submission(encoding: str, *, data: bytes | None = None, value: object = None) -> Any:
    payload = SimpleNamespace(encoding=encoding, data=data, value=value)
    result = SimpleNamespace(value=payload)
    return SimpleNamespace(task=SimpleNamespace(result=lambda wait: result))


def test_a_pickle_naming_a_function_is_refused_without_running_it(tmp_path: Path) -> None:
    marker = tmp_path / "planted"

    with pytest.raises(ValueError, match="not plain data"):
        plain_value(submission("cloudpickle", data=pickle.dumps(Planted(marker))))

    assert not marker.exists()


def test_plain_data_is_read_whether_sent_as_json_or_as_a_pickle() -> None:
    answer = {"result": {"plan": {"files": [{"path": "a.py", "content": "x = 1\n"}]}, "n": 1.5}}

    assert plain_value(submission("json", value=answer)) == answer
    assert plain_value(submission("cloudpickle", data=pickle.dumps(answer))) == answer
    with pytest.raises(ValueError, match="unknown form"):
        plain_value(submission("yaml", value=answer))


@pytest.fixture
def hostile_results(control_plane: ControlPlane, tmp_path: Path) -> Path:
    """Make the stand-in answer every task's result with a pickle that plants a file."""
    marker = tmp_path / "planted-by-the-control-plane"
    data = base64.b64encode(pickle.dumps(Planted(marker))).decode()
    control_plane._result_payload = lambda task: {"encoding": "cloudpickle", "data": data}  # type: ignore[method-assign]
    return marker


def test_a_control_plane_answering_a_hostile_pickle_runs_no_code_here(
    deployed: ControlPlane,  # noqa: F811
    hostile_results: Path,
    lazycloud: RunAgent,  # noqa: F811
) -> None:
    run = lazycloud("run", "--seed", "calculator", "--planner", "lazycloud", "--json")

    assert run.returncode == 3, run.stdout + run.stderr
    assert "not plain data" in run.stderr
    assert not hostile_results.exists()
    assert "Traceback" not in run.stderr
