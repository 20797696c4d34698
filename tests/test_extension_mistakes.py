"""The mistakes a plugin author is likely to make each get one line that says what to do.

The host is given small plugins directly (``PluginHost(plugins=...)``); the CLI
prints ``host.problems`` as they are, one warning each (see
``test_extension_plugins.py`` for the installed, broken distributions).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import attrs
import pytest

from sandboxed_coding_agent.core.errors import Rejection
from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import PatchFile, PatchPlan, SeedProject
from sandboxed_coding_agent.core.plugins import PluginHost
from sandboxed_coding_agent.core.runs import orchestrator
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed

SEED = calculator_seed()
PLAN = PatchPlan((PatchFile("calculator.py", "def add(a, b):\n    return a + b\n"),))


@attrs.frozen
class Fine:
    name: str = "fine"
    description: str = "accepts every plan"
    activation: str = "off"

    def configure(self, parameters: Mapping[str, Any]) -> Fine:
        raise ValueError("fine takes no parameters")

    def check(self, plan: PatchPlan, seed: SeedProject) -> list[Rejection]:
        return []


def problems_of(**hooks: Callable[..., Any]) -> list[str]:
    host = PluginHost(entry_points=False, plugins={"mine": SimpleNamespace(**hooks)})
    return [p for p in host.problems if p.startswith("plugin 'mine'")]


def test_hook_without_hookimpl_is_reported_instead_of_silently_never_called() -> None:
    def register_policies(register: Callable[[object], None]) -> None:
        register(Fine())

    assert problems_of(register_policies=register_policies) == [
        "plugin 'mine' (given to PluginHost) defines register_policies without @hookimpl, so "
        "the agent never calls it (mark each hook with "
        "sandboxed_coding_agent.core.hookspecs.hookimpl)"
    ]


def test_misspelt_hook_names_the_hook_it_probably_means() -> None:
    @hookimpl
    def register_policy(register: Callable[[object], None]) -> None:
        register(Fine())

    (marked,) = problems_of(register_policy=register_policy)
    assert "implements unknown hook(s) register_policy and was not loaded" in marked
    assert "did you mean register_policies?" in marked

    def register_seed(register: Callable[[object], None]) -> None:
        pass

    (unmarked,) = problems_of(register_seed=register_seed)
    assert "defines register_seed without @hookimpl" in unmarked
    assert "did you mean register_seeds?" in unmarked


def test_helper_named_unlike_any_hook_is_no_problem() -> None:
    @hookimpl
    def register_policies(register: Callable[[object], None]) -> None:
        register_everything(register)

    def register_everything(register: Callable[[object], None]) -> None:
        register(Fine())

    host = PluginHost(
        entry_points=False,
        plugins={
            "mine": SimpleNamespace(
                register_policies=register_policies, register_everything=register_everything
            )
        },
    )
    assert host.problems == []
    assert host.policies["fine"].plugin == "mine"


def test_hook_that_returns_its_things_instead_of_registering_them_is_reported() -> None:
    @hookimpl
    def register_policies(register: Callable[[object], None]) -> list[Fine]:
        return [Fine()]

    assert problems_of(register_policies=register_policies) == [
        "plugin 'mine' (given to PluginHost) register_policies returned list instead of calling "
        "register() once per policy; what it returned was ignored"
    ]


def test_registering_the_class_instead_of_an_instance_is_reported() -> None:
    @hookimpl
    def register_policies(register: Callable[[object], None]) -> None:
        register(Fine)

    assert problems_of(register_policies=register_policies) == [
        "plugin 'mine' (given to PluginHost) registered the class Fine instead of an instance "
        "of it (register Fine(), not Fine); it was ignored"
    ]


@attrs.frozen
class Answering:
    """A policy whose ``check`` gives back whatever it was built with."""

    answer: Any
    name: str = "answering"
    description: str = "answers with anything"
    activation: str = "on"

    def configure(self, parameters: Mapping[str, Any]) -> Answering:
        return self

    def check(self, plan: PatchPlan, seed: SeedProject) -> Any:
        return self.answer


def only_reason(answer: Any) -> Rejection:
    (rejection,) = orchestrator.check_plan(PLAN, SEED, [Answering(answer)])
    return rejection


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (
            None,
            "check() returned None; return an empty list (or yield nothing) to accept",
        ),
        (
            "the plan adds a TODO",
            "check() returned str 'the plan adds a TODO', "
            "not a list (or generator) of Rejection objects",
        ),
        (
            Rejection("answering", "one", "a single rejection, not in a list"),
            "check() returned one Rejection; return a list of them (or yield each)",
        ),
        (
            ["the plan adds a TODO"],
            "check() gave str 'the plan adds a TODO', not a Rejection",
        ),
    ],
    ids=["none", "string", "bare-rejection", "list-of-strings"],
)
def test_check_that_answers_with_something_other_than_rejections_rejects_the_plan(
    answer: Any, said: str
) -> None:
    rejection = only_reason(answer)
    assert (rejection.policy, rejection.rule, rejection.path) == (
        "answering",
        "policy-failed",
        None,
    )
    assert rejection.message == f"the policy failed: {said}"


def test_check_that_fails_halfway_through_its_generator_gives_only_the_failure() -> None:
    def halfway() -> Iterator[Rejection]:
        yield Rejection("answering", "first", "found before the failure", "calculator.py")
        raise LookupError("rule table is missing")

    rejection = only_reason(halfway())
    assert rejection.rule == "policy-failed"
    assert rejection.message.startswith("the policy failed: LookupError: rule table is missing")


@attrs.frozen
class ReadsRules(Fine):
    """A policy that fails inside a library it calls."""

    def check(self, plan: PatchPlan, seed: SeedProject) -> list[Rejection]:
        json.loads("{not json")  # this line is what the author needs to see
        return []


def test_policy_that_raises_is_named_with_the_line_of_its_own_file_that_failed() -> None:
    (rejection,) = orchestrator.check_plan(PLAN, SEED, [ReadsRules()])
    line = next(
        number
        for number, text in enumerate(Path(__file__).read_text().splitlines(), start=1)
        if "this line is what the author needs to see" in text
    )
    assert rejection.message.startswith("the policy failed: JSONDecodeError: ")
    assert rejection.message.endswith(f" (at {Path(__file__).name} line {line})")


def test_check_that_answers_with_rejections_in_any_iterable_is_heard() -> None:
    reason = Rejection("answering", "adds-todo", "the change adds a TODO", "calculator.py")
    for answer in ([reason], (reason,), iter([reason]), (r for r in [reason])):
        assert orchestrator.check_plan(PLAN, SEED, [Answering(answer)]) == [reason]
    assert orchestrator.check_plan(PLAN, SEED, [Answering([])]) == []
