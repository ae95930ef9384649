"""The LLM server's address: the base URL checked, and each request's URL built from its parts.

A base URL is a scheme (http or https), a host, an optional port and a path: nothing else. A query
(`?`), a fragment (`#`), a `user:password@` or a space is refused (`parse_base`): each would make
the request go somewhere other than what the settings show (`http://h/secret#` + `/models` asks
for `/secret`). A request's URL is the parsed scheme, host and port, the base path without its
trailing '/' and the route (`request_url`), never the text pasted together.

The key and the documents go to that server, and a browser user may set it: a link-local address
(169.254.0.0/16, fe80::/10) or a cloud metadata service (`retrieval/addresses.py`:
AWS, GCP, Azure, Alibaba…) is refused unless the settings allow it (`allow_link_local`). An IP
address is recognised in every form the resolver takes (`2852039166`, `0xa9.0xfe.0xa9.0xfe`,
`::ffff:169.254.169.254`); a name is checked as this machine resolves it, when a client is made,
before any request (`check_resolved`; a name that does not resolve is left to the request's own
"unknown host").
"""

from __future__ import annotations

import socket
from urllib.parse import SplitResult, urlsplit, urlunsplit

from retrieval.addresses import ip_address_of, is_link_local_or_metadata, is_metadata_host
from retrieval.types import RetrievalError

ALLOW_HINT = ("to use it anyway, allow it explicitly (allow_link_local in the settings, "
              "--allow-link-local on the command line)")


def _base_error(base_url: str, why: str) -> RetrievalError:
    return RetrievalError(f"The LLM base URL {why}, such as http://127.0.0.1:11434/v1; got {base_url!r}")


def parse_base(base_url: str) -> SplitResult:
    """The base URL's parts, or a `RetrievalError` saying what is wrong with it."""
    text = base_url.strip()
    try:
        url = urlsplit(text)
        url.port  # noqa: B018 -- a port out of range raises here
    except ValueError:
        raise _base_error(text, "is not a valid URL") from None
    if url.scheme not in ("http", "https") or not url.hostname:
        raise _base_error(text, "must start with http:// or https:// and name a host")
    if "?" in text or "#" in text:
        raise _base_error(text, "must not contain '?' or '#': give the address up to the path, without a query "
                                "or fragment")
    if "@" in url.netloc:
        raise _base_error(text, "must not contain a user name or password (the key goes in its environment "
                                "variable)")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in text):
        raise _base_error(text, "must not contain spaces or control characters")
    return url


def request_url(base_url: str, route: str) -> str:
    """The URL of `route` ('/models', '/chat/completions') on the server of `base_url`, from its
    parsed parts."""
    url = parse_base(base_url)
    return urlunsplit((url.scheme, url.netloc, url.path.rstrip("/") + route, "", ""))


def check_host(base_url: str, allow_link_local: bool) -> None:
    """Refuse a base URL whose host is a link-local or metadata address or name, unless allowed."""
    host = parse_base(base_url).hostname.rstrip(".").lower()
    address = ip_address_of(host)
    if allow_link_local:
        return
    if is_metadata_host(host) or (address is not None and is_link_local_or_metadata(address)):
        raise RetrievalError(f"The LLM base URL {base_url.strip()!r} points at a link-local or cloud metadata "
                             f"address ({host}), where the key and the documents must not go; {ALLOW_HINT}")


def check_resolved(base_url: str, allow_link_local: bool) -> None:
    """Refuse a host name that resolves (here, now) to a link-local or metadata address, unless
    allowed. A name that does not resolve is left to the request."""
    url = parse_base(base_url)
    host = url.hostname.rstrip(".")
    if allow_link_local or ip_address_of(host) is not None:
        return  # an address is checked by `check_host`
    try:
        found = socket.getaddrinfo(host, url.port or (443 if url.scheme == "https" else 80),
                                   proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return
    for *_, sockaddr in found:
        address = ip_address_of(str(sockaddr[0]))
        if address is not None and is_link_local_or_metadata(address):
            raise RetrievalError(f"The LLM base URL's host {host} resolves to {address}, a link-local or cloud "
                                 f"metadata address, where the key and the documents must not go; {ALLOW_HINT}")
