"""``agent serve``: a verdict server (see :mod:`sandboxed_coding_agent.server`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from .options import DebugOption, NoPolicyOption, PolicyOption


def serve(
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="The address to listen on. Any but a loopback one needs --token-file.",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option("--port", min=0, max=65535, help="The port; 0 picks a free one."),
    ] = 8787,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            metavar="FILE",
            dir_okay=False,
            help="A file holding the token requests must send as Authorization: Bearer TOKEN.",
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", min=1, max=256, help="Sandboxes at once (default: the CPU count)."),
    ] = None,
    queue: Annotated[
        int,
        typer.Option(
            "--queue",
            min=0,
            max=100_000,
            help="Requests waiting beyond those running; "
            "past them a request is answered 429 with Retry-After.",
        ),
    ] = 64,
    seeds: Annotated[
        Path | None,
        typer.Option(
            "--seeds",
            metavar="DIR",
            file_okay=False,
            help="Also offer each seed folder in DIR, by its folder's name.",
        ),
    ] = None,
    runner: Annotated[
        str, typer.Option("--runner", metavar="NAME", help="The runner every request uses.")
    ] = "local",
    policy: PolicyOption = None,
    no_policy: NoPolicyOption = None,
    max_body_bytes: Annotated[
        int,
        typer.Option("--max-body-bytes", min=1, help="The largest request body."),
    ] = 8 * 1024 * 1024,
    debug: DebugOption = False,
) -> None:
    """Answer verdicts over HTTP: POST /v1/verify, POST /v1/verify/batch, GET /v1/health.

    A request names a seed the server offers (installed seeds, and those of --seeds
    DIR), never a path, and gives a plan or a patch; the answer is the verdict as JSON,
    with reward 1.0, 0.0 or null (no verdict reached). The runner, limits and the
    policies switched off are the server's. Prints `listening on http://HOST:PORT` once
    it listens; Ctrl-C stops it, and every sandbox with it. Exit codes: 0 stopped;
    2 an unsafe or impossible setting (a non-loopback --host without --token-file, a
    token file that cannot be read, an address in use).
    """
    from ..errors import UsageError
    from . import terminal

    with terminal.reporting(False, debug):
        from sandboxed_coding_agent.server import (
            ServeError,
            ServerSettings,
            offered_seeds,
            read_token,
        )
        from sandboxed_coding_agent.server import serve as serve_verdicts

        host_plugins = terminal.load_plugins()
        host_plugins.runner(runner)  # an unknown runner is a usage error now, not per request
        try:
            settings = ServerSettings(
                host=host,
                port=port,
                token=None if token_file is None else read_token(token_file),
                jobs=jobs or os.cpu_count() or 1,
                queue=queue,
                seeds=offered_seeds(
                    sorted(host_plugins.seeds), None if seeds is None else str(seeds)
                ),
                options={
                    "runner": runner,
                    "policies": tuple(policy or ()),
                    "no_policies": tuple(no_policy or ()),
                },
                max_body_bytes=max_body_bytes,
            )
            serve_verdicts(settings, lambda line: terminal.echo(line))
        except ServeError as error:
            raise UsageError(str(error)) from None
        except KeyboardInterrupt:
            terminal.say("stopped")
