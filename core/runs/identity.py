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
import threading
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


# -- where visitors are told apart by browser alone -----------------------------------------------

HOSTING_GUIDE = "docs/hosting.md, Running a public demo"


def by_browser_alone(limits: HostLimits) -> str | None:
    """What the host is told when the app starts where these limits leave some visitors told apart
    by browser alone (None: every visitor's address counts, or the proxy's header is relied on)."""
    fresh = _what_a_fresh_browser_gets(limits)
    if limits.limit_by_address is False:
        return f"Visitors are told apart by browser alone (limit_by_address = false): {fresh}."
    if limits.limit_by_address is None and not limits.address_header:
        return (
            "No address_header is set, so visitors who connect from loopback or a private network (through a "
            f"proxy on this box or network, or a NAT) are told apart by browser alone: {fresh}. Behind a "
            f"proxy, set address_header to the header it sets ({HOSTING_GUIDE})."
        )
    return None


def _what_a_fresh_browser_gets(limits: HostLimits) -> str:
    jobs = limits.max_queued_per_owner
    share = (
        f"its own {jobs} job{'s' if jobs != 1 else ''} and turn in the queue" if jobs else "its own turn in the queue"
    )
    return f"each fresh browser (a private window, cleared cookies) is a new visitor with {share}, so a few can fill the queue for everyone"


class AddressesSeen:
    """The visitors (browsers) this app process has seen, with a client address the host limits could
    count and without one, and where the latter connected from."""

    SHOWN_SOURCES = 5
    MAX_KEPT = 100_000  # visitors kept in each set; past it the counts are "at least"

    def __init__(self) -> None:
        self.counted: set[str] = set()
        self.uncounted: set[str] = set()
        self.sources: list[str] = []  # the first few connection addresses of uncounted visitors
        self._lock = threading.Lock()

    def note(self, owner: str, address: str | None, connection_ip: str | None) -> None:
        """A visitor request of `owner`'s: `address` as client_address gave it, from `connection_ip`."""
        with self._lock:
            kept = self.counted if address is not None else self.uncounted
            if len(kept) < self.MAX_KEPT:
                kept.add(owner)
            if address is not None:
                return
            source = (
                one_persons(connection_ip) if isinstance(connection_ip, str) and connection_ip else "an unknown address"
            )
            if source not in self.sources and len(self.sources) < self.SHOWN_SOURCES:
                self.sources.append(source)

    def notice(self, limits: HostLimits) -> str | None:
        """What the admin is told: that some visitors are told apart by browser alone, and why."""
        with self._lock:
            uncounted, sources = len(self.uncounted), list(self.sources)
            seen = len(self.counted | self.uncounted)
        if limits.limit_by_address is False or not uncounted:
            return by_browser_alone(limits)
        fix = (
            f"the proxy in front did not send {limits.address_header}, or these visitors did not come through it"
            if limits.address_header
            else "behind a proxy, set address_header to the header it sets"
        )
        return (
            f"{uncounted} of the {seen} visitors (browsers) seen since the app started came with no client address "
            f"the host limits can count (from {', '.join(sources)}): they are told apart by browser alone, and "
            f"{_what_a_fresh_browser_gets(limits)}. Fix: {fix} ({HOSTING_GUIDE})."
        )


ADDRESSES_SEEN = AddressesSeen()
