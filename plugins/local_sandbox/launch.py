"""The first process of a sandbox: join its control groups, lower its rlimits, become ``bwrap``.

Run as ``python -I -S launch.py CONFIG -- BWRAP ARGV...`` with an empty
environment. Doing this in a process of its own, rather than in a
``preexec_fn`` of the agent, keeps it safe when the agent has threads. It uses
the standard library only and imports nothing of the agent.

CONFIG is JSON: ``{"cgroups": [procs file, ...], "rlimits": {"RLIMIT_AS": [soft, hard], ...}}``.
Every process of the sandbox descends from this one, so all of them are in the
groups and inherit the limits. Any failure stops here (exit 125) with one line
on stderr, before ``bwrap`` or the test could start.
"""

import json
import os
import resource
import sys

EXIT_LAUNCH_FAILED = 125


def main(argv: list[str]) -> None:
    config = json.loads(argv[1])
    command = argv[3:]
    pid = str(os.getpid())
    for procs in config["cgroups"]:
        with open(procs, "w") as handle:
            handle.write(pid)
    for name, (soft, hard) in config["rlimits"].items():
        kind = getattr(resource, name)
        _, current_hard = resource.getrlimit(kind)
        if current_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, current_hard), min(hard, current_hard)
        resource.setrlimit(kind, (soft, hard))
    os.execve(command[0], command, {})  # noqa: S606 - bwrap, with an empty environment


if __name__ == "__main__":
    try:
        main(sys.argv)
    except Exception as error:
        sys.stderr.write(f"could not start the sandbox: {type(error).__name__}: {error}\n")
        sys.exit(EXIT_LAUNCH_FAILED)
