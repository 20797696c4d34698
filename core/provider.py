"""The OpenAI-compatible provider's settings: the three variables, read and checked in one place.

Shared by every planner that talks to such a provider, wherever it runs: the
built-in ``openai`` planner reads them from the environment; the LazyCloud
backend checks them before storing them as workspace secrets, and its remote
function receives them back as environment variables of the same names.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import os
import re
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

import attrs

from . import contract
from .errors import ConfigurationError

BASE_URL_ENV = "CODING_AGENT_BASE_URL"
MODEL_ENV = "CODING_AGENT_MODEL"
API_KEY_ENV = "CODING_AGENT_API_KEY"
#: The three variables, in the order messages name them; also the names of the
#: workspace secrets a remote planner receives them as.
PROVIDER_SECRET_NAMES = (BASE_URL_ENV, MODEL_ENV, API_KEY_ENV)

MAX_MODEL_CHARS = 160
#: Far above any real base URL; a longer value is a mistake and would flood every message.
MAX_BASE_URL_CHARS = 2_000
#: C0 and C1 control characters: kept out of the model name and out of quoted provider text.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@attrs.frozen
class ProviderSettings:
    """Where and how to reach the provider; the key never appears in ``repr``."""

    base_url: str
    model: str
    api_key: str = attrs.field(repr=False)

    @property
    def completions_url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine: ``localhost``, 127.0.0.0/8 or ::1."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_base_url(url: str) -> str:
    """Return ``url`` if it is a usable provider base URL; raise :class:`ConfigurationError`.

    The rule, which every message states as it applies: an ``https`` URL, or a plain
    ``http`` one for this machine (``localhost``, 127.0.0.0/8, ``::1``), with a host,
    no credentials, no query or fragment, and a path ending in ``/v1``.
    """
    if len(url) > MAX_BASE_URL_CHARS:
        raise ConfigurationError(
            f"{BASE_URL_ENV} is {len(url):,} characters long; a base URL has at most "
            f"{MAX_BASE_URL_CHARS:,}"
        )
    if any(c.isspace() for c in url) or CONTROL.search(url):
        raise ConfigurationError(
            f"{BASE_URL_ENV} contains spaces or control characters (got {url!r})"
        )
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        _ = parts.port
    except ValueError as error:
        raise ConfigurationError(
            f"{BASE_URL_ENV} cannot be parsed as a URL ({error}); {_URL_RULE}"
        ) from None
    if parts.username is not None or parts.password is not None:
        raise ConfigurationError(
            f"{BASE_URL_ENV} must not contain credentials; put the key in {API_KEY_ENV}"
        )
    if parts.scheme not in ("https", "http") or not host:
        raise ConfigurationError(f"{BASE_URL_ENV} is not a usable URL (got {url!r}); {_URL_RULE}")
    if parts.scheme == "http" and not is_loopback(host):
        raise ConfigurationError(
            f"{BASE_URL_ENV} uses plain http for {host!r}; use https "
            f"(plain http is allowed only for {_LOOPBACK})"
        )
    if "?" in url or "#" in url:
        raise ConfigurationError(f"{BASE_URL_ENV} must not have a query or fragment (got {url!r})")
    if not parts.path.rstrip("/").endswith("/v1"):
        suggestion = urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/v1"))
        http = "plain http is fine for a server on this machine; " if parts.scheme == "http" else ""
        raise ConfigurationError(
            f"{BASE_URL_ENV} must end in /v1, such as {suggestion} "
            f"({http}the planner appends /chat/completions itself) (got {url!r})"
        )
    return url


_LOOPBACK = "localhost, 127.0.0.0/8 and ::1"
_URL_RULE = (
    f"use an https URL ending in /v1, such as https://api.openai.com/v1, or plain http "
    f"for a server on this machine ({_LOOPBACK}), such as http://localhost:11434/v1"
)


def settings_from_environment(
    environ: Mapping[str, str] = os.environ,
    *,
    missing_hint: str = "to use the OpenAI-compatible planner, or test a plan file with --plan",
) -> ProviderSettings:
    """Read and check the provider settings; every problem names its variable.

    :param missing_hint: what the message about a missing variable ends with:
        what the variables are for, where they are read.
    :raises ConfigurationError: a variable is missing or invalid (exit 2).
    """
    values = {}
    for name in PROVIDER_SECRET_NAMES:
        value = environ.get(name, "").strip()
        if not value:
            raise ConfigurationError(
                f"{name} is not set; set {', '.join(PROVIDER_SECRET_NAMES)} {missing_hint}"
            )
        if not contract.is_utf8(value):
            raise ConfigurationError(
                f"{name} is not valid UTF-8 text (it holds bytes of another encoding)"
            )
        values[name] = value
    model = values[MODEL_ENV]
    if len(model) > MAX_MODEL_CHARS or CONTROL.search(model):
        raise ConfigurationError(
            f"{MODEL_ENV} must be at most {MAX_MODEL_CHARS} characters with no control characters"
        )
    key = values[API_KEY_ENV]
    if not all(0x21 <= ord(c) <= 0x7E for c in key):
        raise ConfigurationError(
            f"{API_KEY_ENV} contains spaces or characters that cannot be sent in an HTTP header"
        )
    return ProviderSettings(check_base_url(values[BASE_URL_ENV]), model, key)


#: A key shorter than this is a placeholder a local server ignores (``x``, ``EMPTY``,
#: ``ollama``): blanking it would mangle ordinary words, so it is not searched for.
MIN_SECRET_CHARS = 8


@functools.lru_cache(maxsize=8)
def _key_pattern(key: str) -> re.Pattern[str] | None:
    """``key`` in any form it may take in text: each character verbatim, as a JSON
    escape (``\\u002d``, ``\\/``) or URL-quoted (``%2D``, ``+`` for a space), in any mix
    and either case of hexadecimal digits; ``None`` for a placeholder key."""
    if len(key) < MIN_SECRET_CHARS:
        return None
    parts: list[str] = []
    for char in key:
        units = [ord(char)] if ord(char) <= 0xFFFF else list(divmod(ord(char) - 0x10000, 0x400))
        if len(units) == 2:
            units = [0xD800 + units[0], 0xDC00 + units[1]]
        forms = [
            re.escape(char),
            "(?i:" + "".join(rf"\\u{unit:04x}" for unit in units) + ")",
            "(?i:" + "".join(f"%{byte:02x}" for byte in char.encode("utf-8", "replace")) + ")",
        ]
        short = json.dumps(char)[1:-1]
        if short.startswith("\\") and len(short) == 2:
            forms.append(re.escape(short))
        if char == "/":
            forms.append(re.escape("\\/"))
        if char == " ":
            forms.append(re.escape("+"))
        parts.append("(?:" + "|".join(forms) + ")")
    return re.compile("".join(parts))


def blank_key(text: str, key: str) -> str:
    """``text`` with ``key`` replaced by ``[redacted]`` wherever it appears: verbatim,
    escaped inside a JSON string or URL-quoted (a placeholder key is left alone)."""
    pattern = _key_pattern(key)
    return text if pattern is None else pattern.sub("[redacted]", text)


def holds_key(text: str, key: str) -> bool:
    """Whether ``text`` holds ``key`` in any of the forms :func:`blank_key` blanks."""
    pattern = _key_pattern(key)
    return pattern is not None and pattern.search(text) is not None
