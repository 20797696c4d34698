"""What a project says about itself, read from pyproject.toml, setup.cfg and setup.py, never run.

The files are the project's, which may be anyone's: each way of writing something an
installer would not take, or that would break the ``.dist-info`` folder made from it, is
refused with a message naming it, or left out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxed_coding_agent.core.seeds.project_metadata import (
    UNKNOWN_VERSION,
    EntryPoint,
    ProjectMetadata,
    ProjectMetadataError,
    read_project,
)


def project(**files: str) -> dict[str, bytes]:
    return {path.replace("_", ".", 1): text.encode() for path, text in files.items()}


def read(files: dict[str, bytes]) -> ProjectMetadata:
    return read_project(files.get)


def test_pyproject_gives_name_version_dependencies_and_every_kind_of_entry_point() -> None:
    found = read(
        project(
            pyproject_toml=(
                '[project]\nname = "Calc.Tools"\nversion = "2.1"\ndependencies = ["attrs>=22"]\n'
                '[project.scripts]\ncalc = "calc.cli:main"\n'
                '[project.gui-scripts]\ncalc-gui = "calc.gui:main"\n'
                '[project.entry-points."calc.plugins"]\nscaled = "calc:scaled"\n'
            )
        )
    )

    assert (found.name, found.version, found.dependencies) == ("Calc.Tools", "2.1", ("attrs>=22",))
    assert found.entry_points == (
        EntryPoint("console_scripts", "calc", "calc.cli:main"),
        EntryPoint("gui_scripts", "calc-gui", "calc.gui:main"),
        EntryPoint("calc.plugins", "scaled", "calc:scaled"),
    )
    assert found.folder_name == "calc_tools-2.1.dist-info"
    files = found.files()
    assert files["METADATA"].splitlines()[1:] == [
        "Name: Calc.Tools",
        "Version: 2.1",
        "Requires-Dist: attrs>=22",
    ]
    assert "[calc.plugins]\nscaled = calc:scaled\n" in files["entry_points.txt"]


def test_what_pyproject_calls_dynamic_comes_from_setup_cfg() -> None:
    found = read(
        project(
            pyproject_toml='[project]\nname = "calc"\ndynamic = ["version", "dependencies"]\n',
            setup_cfg=(
                "[metadata]\nversion = 3.0\n[options]\ninstall_requires =\n  six\n  attrs # ok\n"
            ),
        )
    )

    assert (found.name, found.version, found.dependencies) == ("calc", "3.0", ("six", "attrs"))
    assert found.source == "pyproject.toml"


def test_setup_py_is_parsed_never_run_and_only_literals_count(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    setup = (
        f"import os\nos.makedirs({str(ran)!r})\n"
        "from setuptools import setup\n"
        "REQUIRES = ['six']\n"
        "def version():\n    return open('VERSION').read()\n"
        "setup(name='calc', version=version(), install_requires=REQUIRES,\n"
        "      entry_points={'console_scripts': 'calc = calc.cli:main'})\n"
    )

    found = read(project(setup_py=setup))

    assert not ran.exists()
    assert (found.name, found.version, found.dependencies) == ("calc", UNKNOWN_VERSION, ("six",))
    assert found.entry_points == (EntryPoint("console_scripts", "calc", "calc.cli:main"),)
    assert found.source == "setup.py"


def test_a_name_bound_twice_in_setup_py_is_not_taken() -> None:
    setup = "R = ['six']\nR = ['evil']\nfrom setuptools import setup\n"
    setup += "setup(name='c', install_requires=R)\n"

    assert read(project(setup_py=setup)).dependencies == ()


def test_a_setup_attr_version_in_setup_cfg_is_unknown() -> None:
    found = read(project(setup_cfg="[metadata]\nname = calc\nversion = attr: calc.__version__\n"))

    assert found.version == UNKNOWN_VERSION


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, "has no pyproject.toml, setup.cfg or setup.py"),
        (project(pyproject_toml="[project\n"), "not valid TOML"),
        (project(setup_cfg="[metadata\nname = x\n"), "setup.cfg cannot be read"),
        ({"setup.py": b"\xff\xfe"}, "not UTF-8"),
        ({"setup.cfg": b"#" * (1 << 21)}, "larger than 1 MiB"),
        (project(pyproject_toml='[project]\nname = "calc\\nVersion: 9"\n'), "not a project name"),
        (project(pyproject_toml='[project]\nname = "../../x"\n'), "not a project name"),
        (
            project(pyproject_toml='[project]\nname = "c"\n[project.scripts]\nx = "a\\n[evil]"\n'),
            "is not one",
        ),
        (
            project(
                setup_cfg="[metadata]\nname = c\n[options.entry_points]\ng =\n  bad name] = a:b\n"
            ),
            "is not one",
        ),
        (
            project(pyproject_toml='[project]\nname = "c"\ndependencies = "six"\n'),
            "list of strings",
        ),
        (project(pyproject_toml='[project]\nname = "c"\nscripts = ["x"]\n'), "are not names"),
    ],
)
def test_what_no_installer_would_take_is_refused_with_its_reason(
    files: dict[str, bytes], message: str
) -> None:
    with pytest.raises(ProjectMetadataError, match=message.replace("[", r"\[")):
        read(files)


def test_a_version_of_unsafe_characters_is_unknown_and_a_broken_setup_py_gives_nothing() -> None:
    weird = read(project(pyproject_toml='[project]\nname = "c"\nversion = "1\\nName: other"\n'))
    broken = read(project(setup_py="setup(name='c',\n"))

    assert weird.version == UNKNOWN_VERSION
    assert weird.files()["METADATA"].count("Name:") == 1
    assert broken.name == ""
    assert broken.files()["METADATA"]  # no name: the runtime writes no .dist-info at all


def test_too_many_entry_points_are_refused() -> None:
    points = "".join(f'p{n} = "m:f"\n' for n in range(300))

    with pytest.raises(ProjectMetadataError, match="300 entry points"):
        read(project(pyproject_toml=f'[project]\nname = "c"\n[project.scripts]\n{points}'))


def test_metadata_that_would_break_its_files_cannot_be_made_or_read_back() -> None:
    with pytest.raises(ProjectMetadataError, match="not requirements"):
        read(project(pyproject_toml='[project]\nname = "c"\ndependencies = ["six\\nName: x"]\n'))
    with pytest.raises(ValueError, match="name"):
        ProjectMetadata(name="c\nName: evil")
    with pytest.raises(ValueError, match="value"):
        EntryPoint("console_scripts", "x", "a:b\n[evil]")


def test_a_setup_py_too_large_to_parse_cheaply_is_refused() -> None:
    with pytest.raises(ProjectMetadataError, match="larger than 64 KiB"):
        read(project(setup_py="a\n" * 40_000))


def test_the_frameworks_plugin_group_is_left_out() -> None:
    found = read(
        project(
            pyproject_toml=(
                '[project]\nname = "c"\n[project.entry-points.pytest11]\nc = "c.plugin"\n'
                '[project.entry-points."c.plugins"]\nx = "c:x"\n'
            )
        )
    )

    assert found.entry_points == (EntryPoint("c.plugins", "x", "c:x"),)
