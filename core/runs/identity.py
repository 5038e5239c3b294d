"""Who a visitor is, to the queue: the owner of their runs, and whom host limits count together.

A visitor is a browser, not a tab: the app keeps a random token in the browser (its localStorage,
and a cookie that each new tab's connection brings, so the tab knows its visitor from its first
script run). Every tab of one browser is one owner (one limit, and each tab may cancel the
others' runs), while a link shared with someone else never carries it (the receiver is not an
owner). Where the host says so (limit_by_address), the per-person limit also counts every browser
from one client address together: the connection's address, or the header the host's reverse
proxy sets.

Owner tokens are secrets (anyone holding one may cancel or delete that visitor's runs), so
whatever shows an owner to other people uses `shown_owner`.
"""

from __future__ import annotations

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


def owner_of(token: str) -> str:
    """The owner name of a browser's runs."""
    return f"{VISITOR_PREFIX}{token}"


def client_address(
    limits: HostLimits, connection_ip: str | None, headers: Iterable[tuple[str, str]] | None = None
) -> str | None:
    """The address host limits count this visitor by, or None where the host does not limit by address.

    With address_header (set by the host's proxy, e.g. X-Forwarded-For), its last entry: the
    address the proxy itself saw (earlier entries come from the client and prove nothing).
    """
    if not limits.limit_by_address:
        return None
    if limits.address_header:
        wanted = limits.address_header.lower()
        values = [v for k, v in (headers or ()) if k.lower() == wanted]
        entries = [e.strip() for e in ",".join(values).split(",") if e.strip()]
        if entries:
            return f"address:{entries[-1][:100]}"
    return f"address:{connection_ip or LOCAL_ADDRESS}"


def shown_owner(owner: str | None) -> str:
    """An owner as others may see it: a visitor's token cut to its first few characters."""
    owner = owner or "?"
    if owner.startswith(VISITOR_PREFIX):
        token = owner[len(VISITOR_PREFIX) :]
        return f"{VISITOR_PREFIX}{token[:SHOWN_TOKEN_CHARS]}…" if len(token) > SHOWN_TOKEN_CHARS else owner
    return owner
