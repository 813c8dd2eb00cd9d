"""Who a client is at the edge: the address the per-address limits count, and the origins
that may open a WebSocket.

The limits themselves (:class:`~kibitz.server.services.limits.Limits`) and their counting
(:class:`~kibitz.server.services.limits.AddressLimiter`: the connections here at
admission, the room budget in the room service) are decided in
:mod:`kibitz.server.services.limits`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from urllib.parse import urlsplit

from kibitz.server.domain.addresses import address_group


def client_address(
    remote: str | None, headers: Mapping[str, str], trusted_proxies: frozenset[str]
) -> str:
    """The client's address as the per-address limits count it (:func:`address_group`):
    the peer, or, behind a trusted proxy, the address it saw.

    Only the last hop of ``X-Forwarded-For`` is used: that is the one our own proxy
    appended; anything before it came from the client and can be forged.
    """
    peer = remote or "unknown"
    if peer in trusted_proxies:
        forwarded = headers.get("X-Forwarded-For", "")
        last = forwarded.rsplit(",", 1)[-1].strip()
        if last:
            try:
                return address_group(str(ipaddress.ip_address(last)))
            except ValueError:
                pass
    return address_group(peer)


def origin_allowed(
    headers: Mapping[str, str], allowed: frozenset[str], own: frozenset[str]
) -> bool:
    """Browsers send ``Origin`` on a WebSocket handshake; other clients usually do not.

    A page on another site must not open sockets in its visitors' names (cross-site
    WebSocket hijacking), so only the site's own origins (``own``: the configured public
    origins, else the node's loopback address) and those ``allowed`` are accepted. The
    ``Host`` header is not believed: a page of a host name that resolves to this node (DNS
    rebinding) sends a matching ``Host`` and ``Origin`` of its own.
    """
    origin = headers.get("Origin")
    if origin is None or "*" in allowed:
        return True
    origin = normal_origin(origin)
    return origin in own or origin in allowed


def normal_origin(origin: str) -> str:
    """An origin as browsers send it: lower case, no trailing slash, no default port."""
    origin = origin.strip().rstrip("/").lower()
    for scheme, port in (("http://", ":80"), ("https://", ":443")):
        if origin.startswith(scheme) and origin.endswith(port):
            return origin.removesuffix(port)
    return origin


def parse_origin(text: str) -> str:
    """A configured origin (``--public-origin``, ``--allow-origin``): ``scheme://host[:port]``
    and nothing more; ValueError otherwise."""
    if text == "*":
        return text
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise ValueError(f"not an origin (scheme://host[:port]): {text!r}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(f"not an origin (scheme://host[:port]): {text!r}")
    return normal_origin(text)


def listening_origins(host: str, port: int) -> frozenset[str]:
    """The origins of pages the node itself serves to a browser on its own machine, when no
    public origin is configured: its loopback names and address with its port (bound to
    loopback or to every address), or the address it is bound to."""
    suffix = "" if port == 80 else f":{port}"
    try:
        bound = ipaddress.ip_address(host.strip("[]"))
    except ValueError:  # a host name: the pages it serves come from that name
        return frozenset({f"http://{host.lower()}{suffix}"})
    names = {f"http://[{bound}]{suffix}" if bound.version == 6 else f"http://{bound}{suffix}"}
    if bound.is_loopback or bound.is_unspecified:
        names |= {f"http://localhost{suffix}", f"http://127.0.0.1{suffix}", f"http://[::1]{suffix}"}
    return frozenset(names)
