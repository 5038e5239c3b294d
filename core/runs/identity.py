"""Who a visitor is, to the queue: the owner of their runs, and whom host limits count together.

A visitor is a browser, not a tab: the app keeps a random token in the browser (its localStorage,
and a cookie that each new tab's connection brings, so the tab knows its visitor from its first
script run). Every tab of one browser is one owner (one limit, and each tab may cancel the
others' runs), while a link shared with someone else never carries it (the receiver is not an
owner). Where the visitor's address is known (limit_by_address: auto by default), the per-person
limit also counts every browser from one client address together: the header the host's reverse
proxy sets, or a connection's public address.

Owner tokens are secrets (anyone holding one may cancel or delete that visitor's runs), so the
store never holds one: an owner is a one-way hash of the browser's token (`owner_of`). A model
file that reads the store's file learns owner hashes, and no browser can present a hash as its
token (the page hashes whatever token it is given). Whatever shows an owner to other people
still uses `shown_owner`.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Iterable

from core.runs.limits import HostLimits

VISITOR_PREFIX = "visitor:"
_TOKEN = re.compile(r"[0-9a-f]{16,64}")
SHOWN_TOKEN_CHARS = 6
LOCAL_ADDRESS = "localhost"


def is_browser_token(value: object) -> bool:
    """What the browser component hands over: 16 to 64 lowercase hex digits, nothing else."""
    return isinstance(value, str) and _TOKEN.fullmatch(value) is not None


OWNER_HASH_SALT = "compile-lab-owner:"  # a fixed label: the token is already 64+ random bits
OWNER_HASH_CHARS = 32


def owner_of(token: str) -> str:
    """The owner name of a browser's runs: a hash of its token, never the token itself."""
    return f"{VISITOR_PREFIX}{owner_hash(token)}"


def owner_hash(token: str) -> str:
    """The one-way form of a visitor token that the store keeps (stores before schema 6 kept the
    token itself; their migration hashes it with this, so a browser keeps its runs)."""
    return hashlib.sha256((OWNER_HASH_SALT + token).encode()).hexdigest()[:OWNER_HASH_CHARS]


def client_address(
    limits: HostLimits, connection_ip: str | None, headers: Iterable[tuple[str, str]] | None = None
) -> str | None:
    """The address host limits count this visitor by, or None where they count by browser alone.

    With address_header (set by the host's proxy, e.g. X-Forwarded-For), its last entry: the
    address the proxy itself saw (earlier entries come from the client and prove nothing). By
    default (limit_by_address unset: auto) an address counts where it is known: from that header,
    or a connection from a public address. A loopback or private one may be a proxy or a NAT in
    front of many people, so it counts only where the host says limit_by_address = true.
    """
    if limits.limit_by_address is False:
        return None
    if limits.address_header:
        wanted = limits.address_header.lower()
        values = [v for k, v in (headers or ()) if k.lower() == wanted]
        entries = [e.strip() for e in ",".join(values).split(",") if e.strip()]
        if entries:
            return f"address:{one_persons(entries[-1])}"
    if limits.limit_by_address is None and not is_public_address(connection_ip):
        return None
    return f"address:{one_persons(connection_ip) if connection_ip else LOCAL_ADDRESS}"


IPV6_PREFIX = 64  # one IPv6 subscriber (a home, a host) is given a /64 or more: any address in it is one person


def one_persons(ip: str) -> str:
    """An address as limits count it: an IPv4 address as itself, also when mapped into IPv6
    (::ffff:8.8.8.8 is 8.8.8.8), and an IPv6 address by its /64 (its owner picks any address of it
    at will); text that is no address, cut to 100 characters."""
    try:
        address = ipaddress.ip_address(ip.strip())
    except ValueError:
        return ip.strip()[:100]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{address}/{IPV6_PREFIX}", strict=False))
    return str(address)


def is_public_address(ip: str | None) -> bool:
    """Whether a connection's address is one person's on the internet (not loopback, private, a
    proxy's on the same network): an IPv4 address mapped into IPv6 is judged as itself."""
    try:
        address = ipaddress.ip_address((ip or "").strip())
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global


def shown_owner(owner: str | None) -> str:
    """An owner as others may see it: a visitor's token cut to its first few characters."""
    owner = owner or "?"
    if owner.startswith(VISITOR_PREFIX):
        token = owner[len(VISITOR_PREFIX) :]
        return f"{VISITOR_PREFIX}{token[:SHOWN_TOKEN_CHARS]}…" if len(token) > SHOWN_TOKEN_CHARS else owner
    return owner
