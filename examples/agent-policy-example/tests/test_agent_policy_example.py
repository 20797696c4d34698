"""The plugin's own tests, written with the agent's testing API (``core.testing``)."""

from __future__ import annotations

import agent_policy_example
import pytest

from sandboxed_coding_agent.core.errors import UsageError
from sandboxed_coding_agent.core.testing import LoadedPlugin, load_plugin, patch

ROMAN = agent_policy_example.SEEDS / "roman" / "roman.py"
OLD_TABLE = (
    '_NUMERALS = [(1000, "M"), (500, "D"), (100, "C"), (50, "L"), (10, "X"), (5, "V"), (1, "I")]'
)
NEW_TABLE = """_NUMERALS = [
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
    (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
]"""


@pytest.fixture(scope="module")
def plugin() -> LoadedPlugin:
    # Loaded as the agent loads it; a misspelt hook or a bad object fails here.
    return load_plugin(agent_policy_example)


def test_registers_the_roman_seed_and_the_small_diff_policy(plugin: LoadedPlugin) -> None:
    assert list(plugin.seeds) == ["roman"]
    assert list(plugin.policies) == ["small-diff"]


def test_roman_switches_small_diff_on(plugin: LoadedPlugin) -> None:
    policies = plugin.policies_for(plugin.seed("roman"))

    assert [p.name for p in policies] == ["patch-contract", "python-ast", "small-diff"]


def test_small_diff_rejects_a_rewrite(plugin: LoadedPlugin) -> None:
    rewrite = patch(("roman.py", "def to_roman(number):\n    pass\n" * 6))

    rejections = plugin.check_plan(rewrite, plugin.seed("roman"))

    assert [(r.policy, r.rule) for r in rejections] == [("small-diff", "too-many-lines")]


def test_small_diff_takes_its_limit_from_parameters(plugin: LoadedPlugin) -> None:
    fix = patch(("roman.py", ROMAN.read_text().replace(OLD_TABLE, NEW_TABLE)))
    seed = plugin.seed("roman")

    assert plugin.check_plan(fix, seed) == []
    tight = plugin.check_plan(fix, seed, parameters={"small-diff": {"max_changed_lines": 2}})
    assert [r.rule for r in tight] == ["too-many-lines"]


def test_small_diff_refuses_a_limit_that_is_not_a_whole_number(plugin: LoadedPlugin) -> None:
    with pytest.raises(UsageError, match="max_changed_lines"):
        plugin.policies_for(
            plugin.seed("roman"), parameters={"small-diff": {"max_changed_lines": True}}
        )


def test_the_fix_passes_the_seeds_test_in_the_sandbox(plugin: LoadedPlugin) -> None:
    fix = patch(("roman.py", ROMAN.read_text().replace(OLD_TABLE, NEW_TABLE)))

    result = plugin.run_plan(plugin.seed("roman"), fix)

    assert result.tests_passed, result.test_output
    assert result.changed_files == ("roman.py",)


def test_the_seed_as_shipped_fails_its_test(plugin: LoadedPlugin) -> None:
    unchanged = patch(("roman.py", ROMAN.read_text()))

    result = plugin.run_plan(plugin.seed("roman"), unchanged)

    assert not result.tests_passed
    assert "IIII" in result.test_output
