"""The provider's environment variables (read and checked by
:mod:`sandboxed_coding_agent.core.provider`) and the doctor check that reports them."""

from __future__ import annotations

import attrs

from sandboxed_coding_agent.core.errors import ConfigurationError
from sandboxed_coding_agent.core.model import Finding
from sandboxed_coding_agent.core.provider import (
    API_KEY_ENV,
    API_VERSION_ENV,
    AUTH_HEADER_ENV,
    BASE_URL_ENV,
    CONTROL,
    MAX_BASE_URL_CHARS,
    MAX_MODEL_CHARS,
    MODEL_ENV,
    PROVIDER_SECRET_NAMES,
    ProviderSettings,
    check_base_url,
    is_loopback,
    no_path_hint,
    settings_from_environment,
)

__all__ = [
    "API_KEY_ENV",
    "API_VERSION_ENV",
    "AUTH_HEADER_ENV",
    "BASE_URL_ENV",
    "CONTROL",
    "MAX_BASE_URL_CHARS",
    "MAX_MODEL_CHARS",
    "MODEL_ENV",
    "PROVIDER_SECRET_NAMES",
    "ProviderSettings",
    "ProviderVariables",
    "check_base_url",
    "is_loopback",
    "no_path_hint",
    "settings_from_environment",
]


@attrs.frozen
class ProviderVariables:
    """For ``agent doctor``: the provider variables are set and valid; the key is never shown."""

    name: str = "openai-provider"
    description: str = "the OpenAI-compatible planner's variables"

    def run(self) -> list[Finding]:
        try:
            settings = settings_from_environment(missing_hint="")
        except ConfigurationError as error:
            return [
                Finding(
                    "provider variables",
                    ok=False,
                    detail=error.message,
                    fix=f"export {', '.join(PROVIDER_SECRET_NAMES)} "
                    "(or test plan files with `agent run --plan`)",
                )
            ]
        findings = [Finding("provider variables", ok=True, detail=settings.shown())]
        if settings.has_no_path:
            findings.append(
                Finding(
                    "provider base URL",
                    ok=False,
                    detail=no_path_hint(settings.base_url),
                    fix=f"if the provider answers 404, add its path to {BASE_URL_ENV} "
                    "(the planner posts to BASE/chat/completions, whatever BASE is)",
                    required=False,
                )
            )
        return findings
