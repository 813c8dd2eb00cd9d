"""What a client address counts as (pure): the one rule the per-address limits
(server/gateway/limits.py) and address bans (server/moderation/rules.py) share."""

from __future__ import annotations

import ipaddress


def address_group(address: str) -> str:
    """What a client address is counted as: an IPv6 address as its /64
    (``2001:db8:1:2::/64``: one subscriber's network, in which a host picks new addresses
    at will), an IPv4-mapped one as its IPv4 address, anything else as is."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))
    return address
