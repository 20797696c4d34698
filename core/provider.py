"""The OpenAI-compatible provider's settings: its variables, read and checked in one place.

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

from .errors import ConfigurationError
from .plans import contract
from .plans.planning import CONTROL as CONTROL
from .plans.planning import MAX_MODEL_CHARS as MAX_MODEL_CHARS

BASE_URL_ENV = "CODING_AGENT_BASE_URL"
MODEL_ENV = "CODING_AGENT_MODEL"
API_KEY_ENV = "CODING_AGENT_API_KEY"
#: The three variables, in the order messages name them; also the names of the
#: workspace secrets a remote planner receives them as.
PROVIDER_SECRET_NAMES = (BASE_URL_ENV, MODEL_ENV, API_KEY_ENV)
#: Optional, for Azure OpenAI and the like: the ``api-version`` query parameter of every request.
API_VERSION_ENV = "CODING_AGENT_API_VERSION"
#: Optional: the header the key is sent in, as itself (``api-key``), instead of
#: ``Authorization: Bearer KEY``.
AUTH_HEADER_ENV = "CODING_AGENT_AUTH_HEADER"

#: Optional: ``1`` lets the base URL be plain ``http`` on a host other than this machine
#: (a model server on the local network), so the key crosses that network unencrypted.
ALLOW_HTTP_ENV = "CODING_AGENT_ALLOW_HTTP"

#: Azure's versions read ``2024-06-01`` or ``2024-08-01-preview``; this leaves room for others'.
API_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,63}")
#: An HTTP header name as providers use them (``api-key``, ``x-api-key``).
HEADER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")
#: Headers the transport sets itself or that carry the connection: a key sent in one of
#: them would replace what makes the request work, or leave with the request's framing.
RESERVED_HEADERS = frozenset(
    {
        "accept",
        "accept-encoding",
        "connection",
        "content-encoding",
        "content-length",
        "content-type",
        "cookie",
        "expect",
        "host",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
    }
)

#: Far above any real base URL; a longer value is a mistake and would flood every message.
MAX_BASE_URL_CHARS = 2_000


@attrs.frozen
class ProviderSettings:
    """Where and how to reach the provider; the key never appears in ``repr``.

    :ivar api_version: the ``api-version`` query parameter of every request (Azure), if any.
    :ivar auth_header: the header the key goes in: ``Authorization`` (as ``Bearer KEY``),
        or another name (``api-key``) that carries the key as it is.
    """

    base_url: str
    model: str
    api_key: str = attrs.field(repr=False)
    api_version: str | None = None
    auth_header: str = "Authorization"

    @property
    def completions_url(self) -> str:
        """The endpoint, without the query: what records and messages show."""
        return self.base_url.rstrip("/") + "/chat/completions"

    @property
    def request_url(self) -> str:
        """Where the request goes: the endpoint and, if set, its ``api-version``."""
        query = f"?api-version={self.api_version}" if self.api_version else ""
        return self.completions_url + query

    @property
    def has_no_path(self) -> bool:
        """Whether the base URL is a bare host (``https://api.openai.com``), which few
        providers serve chat completions under."""
        return urlsplit(self.base_url).path.strip("/") == ""

    def key_headers(self) -> dict[str, str]:
        """The one header that carries the key."""
        if self.auth_header.lower() == "authorization":
            return {"Authorization": f"Bearer {self.api_key}"}
        return {self.auth_header: self.api_key}

    def shown(self) -> str:
        """The settings as ``agent doctor`` shows them: everything but the key."""
        parts = [self.base_url, f"model {self.model}"]
        if self.api_version:
            parts.append(f"api-version {self.api_version}")
        bearer = self.auth_header.lower() == "authorization"
        where = "" if bearer else f" in header {self.auth_header}"
        parts.append(f"{API_KEY_ENV} set{where} (not shown)")
        return ", ".join(parts)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine: ``localhost``, 127.0.0.0/8 or ::1."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_base_url(url: str, *, allow_http: bool = False) -> str:
    """Return ``url`` if it is a usable provider base URL; raise :class:`ConfigurationError`.

    The rule, which every message states as it applies: an ``https`` URL, or a plain
    ``http`` one for this machine (``localhost``, 127.0.0.0/8, ``::1``), with a host,
    no credentials, and no query or fragment. Any path will do (``/v1``,
    ``/v1beta/openai``, ``/openai/deployments/NAME``, none): the planner posts to
    ``BASE/chat/completions``.

    :param allow_http: plain ``http`` for any host too (:data:`ALLOW_HTTP_ENV` set).
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
    if parts.scheme == "http" and not is_loopback(host) and not allow_http:
        port = parts.port or 80
        raise ConfigurationError(
            f"{BASE_URL_ENV} uses plain http for {host!r}, which would send {API_KEY_ENV} "
            f"unencrypted over the network (plain http is allowed only for {_LOOPBACK}); "
            f"use https, or an SSH tunnel to the server (ssh -L {port}:localhost:{port} HOST, "
            f"then http://127.0.0.1:{port}{parts.path}), or set {ALLOW_HTTP_ENV}=1 to send it "
            "over plain http all the same"
        )
    if "?" in url or "#" in url:
        raise ConfigurationError(f"{BASE_URL_ENV} must not have a query or fragment (got {url!r})")
    return url


def no_path_hint(base_url: str) -> str:
    """What to try when a bare host answers 404: most providers serve under ``/v1``."""
    parts = urlsplit(base_url)
    suggestion = urlunsplit(parts._replace(path="/v1"))
    return (
        f"{BASE_URL_ENV} has no path, and most providers serve chat completions under one, "
        f"such as {suggestion}"
    )


def check_api_version(value: str) -> str:
    """Return ``value`` if it is a usable ``api-version``; raise :class:`ConfigurationError`."""
    if not API_VERSION.fullmatch(value):
        raise ConfigurationError(
            f"{API_VERSION_ENV} must be a version such as 2024-06-01: at most 64 letters, "
            f"digits, '-' and '.' (got {CONTROL.sub('?', value[:80])!r})"
        )
    return value


def check_auth_header(value: str) -> str:
    """Return ``value`` if the key may be sent in a header of that name; raise
    :class:`ConfigurationError`."""
    if not HEADER_NAME.fullmatch(value):
        raise ConfigurationError(
            f"{AUTH_HEADER_ENV} must be a header name such as api-key: at most 64 letters, "
            f"digits and '-' (got {CONTROL.sub('?', value[:80])!r})"
        )
    if value.lower() in RESERVED_HEADERS:
        raise ConfigurationError(
            f"{AUTH_HEADER_ENV} cannot be {value}: the planner sets that header itself or it "
            "belongs to the connection; use the header your provider reads the key from, "
            "such as api-key"
        )
    return value


def allows_http(environ: Mapping[str, str]) -> bool:
    """Whether :data:`ALLOW_HTTP_ENV` lets the base URL be plain ``http`` on any host:
    ``1`` yes; unset, empty or ``0`` no; anything else is a :class:`ConfigurationError`."""
    value = environ.get(ALLOW_HTTP_ENV, "").strip()
    if value not in ("", "0", "1"):
        raise ConfigurationError(
            f"{ALLOW_HTTP_ENV} must be 1 (plain http to a host other than this machine is "
            f"allowed) or 0 (it is not; the default), not {CONTROL.sub('?', value[:80])!r}"
        )
    return value == "1"


_LOOPBACK = "localhost, 127.0.0.0/8 and ::1"
_URL_RULE = (
    f"use an https URL, such as https://api.openai.com/v1, or plain http "
    f"for a server on this machine ({_LOOPBACK}), such as http://localhost:11434/v1"
)


def settings_from_environment(
    environ: Mapping[str, str] = os.environ,
    *,
    missing_hint: str = "to use the OpenAI-compatible planner, or test a plan file with --plan",
) -> ProviderSettings:
    """Read and check the provider settings; every problem names its variable.

    :param missing_hint: what the message about a missing variable ends with:
        what the variables are for, where they are read; empty: the message only
        names the variable (``agent doctor`` gives the fix on a line of its own).
    :raises ConfigurationError: a variable is missing or invalid (exit 2).
    """
    values = {}
    for name in PROVIDER_SECRET_NAMES:
        value = environ.get(name, "").strip()
        if not value:
            names = ", ".join(PROVIDER_SECRET_NAMES)
            said = f"; set {names} {missing_hint}" if missing_hint else ""
            raise ConfigurationError(f"{name} is not set{said}")
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
    base_url = check_base_url(values[BASE_URL_ENV], allow_http=allows_http(environ))
    version = environ.get(API_VERSION_ENV, "").strip()
    header = environ.get(AUTH_HEADER_ENV, "").strip()
    return ProviderSettings(
        base_url,
        model,
        key,
        api_version=check_api_version(version) if version else None,
        auth_header=check_auth_header(header) if header else "Authorization",
    )


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
