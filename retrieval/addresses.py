"""Which hosts the product may call, one home for the checks every outgoing request shares (the LLM
judge's endpoint, outside engines) and for the servers' loopback test.

Cloud metadata services answer on link-local addresses (169.254.0.0/16, fe80::/10, refused whole)
and on a few others (`METADATA_ADDRESSES`) or names (`METADATA_HOSTS`); an address is recognised in
every form the resolver reads (`2852039166`, `0xa9.0xfe.0xa9.0xfe`, `[::ffff:169.254.169.254]`, a
6to4 or NAT64 address carrying an IPv4 one).
"""

from __future__ import annotations

import ipaddress
import re
import socket

# Names of cloud metadata services (lower case, no trailing dot).
METADATA_HOSTS = frozenset({
    "metadata", "metadata.google.internal", "metadata.goog",  # GCP
    "instance-data", "instance-data.ec2.internal",  # AWS
    "metadata.azure.internal", "metadata.tencentyun.com", "metadata.platformequinix.com",
})
# Metadata services outside 169.254.0.0/16 and fe80::/10 (those are refused whole).
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "fd00:ec2::254",  # AWS's IPv6 instance metadata
    "100.100.100.200",  # Alibaba Cloud
    "168.63.129.16",  # Azure's WireServer
))
LOOPBACK_NAMES = ("localhost",)
_NUMERIC_V4_RE = re.compile(r"[0-9a-fA-FxX.]+")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def ip_address_of(host: str) -> Address | None:
    """The IP address `host` spells, in any form the resolver reads (None: a name). Brackets and an
    IPv6 zone (fe80::1%eth0) are dropped."""
    host = host.strip("[]").split("%", 1)[0]
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _NUMERIC_V4_RE.fullmatch(host):  # 2852039166, 0xa9.0xfe.0xa9.0xfe, 0251.0376.0251.0376, 169.254.43518
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def carried_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (IPv4-mapped, 6to4, NAT64), else None."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    inner = address.ipv4_mapped or address.sixtofour
    if inner is None and address in _NAT64:
        inner = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return inner


def is_link_local_or_metadata(address: Address) -> bool:
    """A link-local address or a metadata service's, also when an IPv6 address carries it."""
    inner = carried_ipv4(address)
    if inner is not None and is_link_local_or_metadata(inner):
        return True
    return address.is_link_local or address in METADATA_ADDRESSES


def is_metadata_host(host: str) -> bool:
    """A cloud metadata service's name (any case, a trailing dot allowed)."""
    return host.lower().rstrip(".") in METADATA_HOSTS


def is_loopback(host: str) -> bool:
    """'localhost' or a loopback address (127.0.0.0/8, ::1), bracketed or not."""
    if host in LOOPBACK_NAMES:
        return True
    address = ip_address_of(host)
    return address is not None and address.is_loopback
