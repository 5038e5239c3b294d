"""Who a visitor is, and what this host lets visitors queue: the owner of a run (a browser, not a
tab), whom host limits count together, and the host limits themselves (a policy of the queue, not of
a race: the engine validates whether a spec *can* run; these say whether this host *allows* it).
"""

from __future__ import annotations

import fnmatch
import hashlib
import ipaddress
import math
import os
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from core.engine.explain.params import FUSION_MIN_WORKING_SET
from core.engine.intervals import replicates_asked
from core.engine.models.sources import MODELS, model_name_problem, parse_model_name, source_of
from core.engine.spec import OPTIONS, Problem, RunSpec

# ----------------------------------------------------------------------
# Host limits: what one deployment lets its visitors queue (a hosted demo on a shared box).
#
# A policy of the queue, not of a race: the engine validates whether a spec *can* run; these say
# whether this host *allows* it. Read from the environment or a TOML file, checked at enqueue.
# Every value is checked when it is read: a malformed file or a nonsense value (a negative batch
# size, an infinite time limit, an empty list of models) is a ConfigError naming the setting, never
# a silent default and never a traceback.


class ConfigError(ValueError):
    """The host's configuration cannot be used; the message names the setting and what is wrong."""


CUSTOM_MODELS_OFF = (
    "this host does not run uploaded model files: a model file is Python code that runs in the worker, "
    "so the host must turn on allow_custom_models"
)


def model_allowed(patterns: tuple[str, ...] | None, model: str) -> bool:
    """Is `model` allowed by `allowed_models`? Entries are names or shell-style patterns: "resnet50",
    "timm:*", "timm:convnext_*", "hf:gpt2*" ("*" alone allows every model)."""
    if patterns is None:
        return True
    return any(model == p or fnmatch.fnmatchcase(model, p) for p in patterns)


@dataclass(frozen=True)
class HostLimits:
    """What one deployment allows, for a hosted demo on a shared box. None = no limit.

    Read from environment variables (COMPILE_LAB_MAX_BATCH_SIZE, ...) or a TOML file named by
    COMPILE_LAB_CONFIG with the same keys in lower case under [limits]; the environment wins.
    """

    allowed_models: tuple[str, ...] | None = None  # names or patterns: "timm:*", "hf:gpt2*"
    allow_custom_models: bool = False  # a model file runs its own code in the worker: off unless the host says so
    allowed_modes: tuple[str, ...] | None = None  # max-autotune can hold a GPU for many minutes
    max_batch_size: int | None = None
    max_steps: int | None = None  # epochs x (steps_per_epoch + eval_steps), per variant
    max_epochs: int | None = None
    max_input_size: int | None = None  # image side, sequence length (image_size)
    # Replicate processes a race may run (each a process start, a warm compile and about 6 s of
    # steps): a count of 19 would hold the lane 20 times as long as the race asked.
    max_replicates: int | None = None
    # A model's parameters, counted by its worker on the meta device before it is built for real:
    # a library model's settings (hf:gpt2:n_layer=2000,n_embd=16384) can make any size.
    max_model_parameters: int | None = None
    # Settings after a library model's name (hf:gpt2:n_layer=2,n_embd=64) build any size of it, and
    # counting a very deep one on the meta device holds its lane too: a host may take names only.
    allow_model_settings: bool = True
    max_queued_per_owner: int | None = None
    max_queue_length: int | None = None
    max_sweep_points: int | None = None  # races one sweep may queue (each point is one race)
    max_imports_per_owner: int | None = None  # imported bundles one visitor keeps (each up to 64 MiB)
    job_time_limit_s: float | None = 3600.0
    # Per visitor means per browser; with limit_by_address, also every browser from one client
    # address together (the connection's address, or address_header set by the host's proxy).
    # None ("auto"): on where an address is known (core.runs.limits.client_address).
    limit_by_address: bool | None = None
    address_header: str | None = None
    # Shared results: a race this device finished within reuse_within_s is offered instead of a new
    # measurement (None: any age; 0: never); with auto_reuse_queue_length jobs or more waiting, it is
    # shown without asking.
    reuse_within_s: float | None = 3600.0
    auto_reuse_queue_length: int | None = None
    # Bytes the data folder may hold (store, runs' files, caches): past it, after each job, the oldest
    # finished runs' traces and logs are freed, then the warm Inductor cache (core.runs.disk_budget).
    disk_budget: int | None = None
    # Bytes the fusion demo's input plus output may take: "auto" sizes them to several times the
    # last-level cache (1 GiB on a CPU with a large one), and a visitor's click then holds the device
    # for a minute; smaller, the page says the figures measure cache.
    max_demo_working_set: int | None = None

    def model_files_problem(self) -> str | None:
        """Why this host runs no model file now: off, or on while a process above this one holds a
        secret in its environment, which a model file's code could read (core.runs.race_conditions)."""
        if not self.allow_custom_models:
            return CUSTOM_MODELS_OFF
        from core.runs.race_conditions import exposed_secrets

        exposed = exposed_secrets()
        if exposed:
            pid, names = next(iter(exposed.items()))
            return (
                f"model files are off while process {pid}, which started this one, holds {', '.join(names)} in its "
                "environment, where a model file's code could read it: start Compile Lab from a process that holds "
                "no secret, or run its workers as another user (docs/hosting.md)"
            )
        return None

    def problems(self, spec: RunSpec) -> list[Problem]:
        """Every limit `spec` exceeds, each saying the limit."""
        p: list[Problem] = []
        if isinstance(spec.model, str) and source_of(spec.model) == "file" and self.model_files_problem():
            p.append(Problem("model", self.model_files_problem() or ""))
        elif not model_allowed(self.allowed_models, spec.model):
            p.append(Problem("model", f"this host allows only: {', '.join(self.allowed_models or ())}"))
        elif not self.allow_model_settings and _settings(spec.model):
            p.append(Problem("model", "this host takes model names without settings after them (name:key=value)"))
        if self.allowed_modes is not None and spec.mode not in self.allowed_modes:
            p.append(Problem("mode", f"this host allows only: {', '.join(self.allowed_modes)}"))
        if (
            self.max_batch_size is not None
            and isinstance(spec.batch_size, int)
            and spec.batch_size > self.max_batch_size
        ):
            p.append(Problem("batch_size", f"this host allows at most {self.max_batch_size} (got {spec.batch_size})"))
        if self.max_epochs is not None and isinstance(spec.epochs, int) and spec.epochs > self.max_epochs:
            p.append(Problem("epochs", f"this host allows at most {self.max_epochs} (got {spec.epochs})"))
        if (
            self.max_input_size is not None
            and isinstance(spec.image_size, int)
            and spec.image_size > self.max_input_size
        ):
            p.append(Problem("image_size", f"this host allows at most {self.max_input_size} (got {spec.image_size})"))
        asked = replicates_asked(spec.replicates, spec.target_interval)
        if self.max_replicates is not None and isinstance(asked, int) and asked > self.max_replicates:
            auto = " (auto with a target interval: choose a count)" if spec.replicates is None else ""
            p.append(Problem("replicates", f"this host allows at most {self.max_replicates} (got {asked}{auto})"))
        eval_steps = spec.eval_steps if isinstance(spec.eval_steps, int) else 0
        steps = (
            spec.epochs * (spec.steps_per_epoch + eval_steps)
            if isinstance(spec.epochs, int) and isinstance(spec.steps_per_epoch, int)
            else 0
        )
        if self.max_steps is not None and steps > self.max_steps:
            counted = "epochs x (steps per epoch + evaluation steps)" if eval_steps else "epochs x steps per epoch"
            p.append(
                Problem(
                    "eval_steps" if eval_steps and spec.total_steps <= self.max_steps else "steps_per_epoch",
                    f"this host allows at most {self.max_steps} steps per variant ({counted} = {steps})",
                )
            )
        return p


def _settings(model: Any) -> dict[str, Any]:
    try:
        return parse_model_name(model).overrides
    except ValueError:
        return {}  # not a name at all: validation says so


def _whole_number(value: Any, low: int = 1) -> int:
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"must be a whole number of at least {low}")
    return value


_BYTE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_BYTE_UNITS |= {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def _bytes(value: Any) -> int:
    """A size: a whole number of bytes, or a number with a unit ("20 GB", "512 MiB")."""
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", value)
        unit = match.group(2).lower() if match else None
        if match is None or unit not in _BYTE_UNITS:
            raise ValueError(f"must be a size: bytes, or a number with one of {', '.join(u for u in _BYTE_UNITS if u)}")
        value = float(match.group(1)) * _BYTE_UNITS[unit]
        if value < 1:
            raise ValueError("must be at least 1 byte")
        return int(value)
    return _whole_number(value)


def _demo_working_set(value: Any) -> int:
    size = _bytes(value)
    if size < FUSION_MIN_WORKING_SET:
        raise ValueError(f"must be at least {FUSION_MIN_WORKING_SET:,} bytes (two tensors of 1,024 floats)")
    return size


def _seconds(value: Any, low: float = 0.0, inclusive: bool = False) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ValueError("must be a number of seconds") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError("must be a finite number of seconds")
    if value < low or (value == low and not inclusive):
        raise ValueError(f"must be {'at least' if inclusive else 'more than'} {low:g} seconds")
    return float(value)


def _names(value: Any, known: tuple[str, ...] | dict, what: str) -> tuple[str, ...]:
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"must be a list of {what} names")
    names = tuple(n.strip() for n in names if n.strip())
    if not names:
        raise ValueError(f"is empty: name at least one {what}, or say none for no restriction")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"names unknown {what}s ({', '.join(unknown)}); known: {', '.join(known)}")
    return names


def _model_names(value: Any) -> tuple[str, ...]:
    """Zoo names, timm or Hugging Face names ("timm:convnext_tiny", "hf:gpt2") or shell-style patterns
    of them ("timm:*", "hf:gpt2*"; "*" alone: every model)."""
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise ValueError("must be a list of model names or patterns")
    names = tuple(n.strip() for n in names if n.strip())
    if not names:
        raise ValueError("is empty: name at least one model, or say none for no restriction")
    unknown = [
        n
        for n in names
        if n not in MODELS and not any(c in n for c in "*?[") and (source_of(n) == "zoo" or model_name_problem(n))
    ]
    if unknown:
        raise ValueError(
            f"names unknown models ({', '.join(unknown)}); known: {', '.join(MODELS)}, timm:<name>, hf:<name>, "
            "or patterns such as timm:*"
        )
    return names


def _mode_names(value: Any) -> tuple[str, ...]:
    return _names(value, OPTIONS["mode"].choices, "mode")


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    words = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
    if isinstance(value, str) and value.strip().lower() in words:
        return words[value.strip().lower()]
    raise ValueError("must be true or false")


def _switch(value: Any) -> bool | None:
    """true, false, or auto (None): on where the visitor's address is known."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return None
    try:
        return _flag(value)
    except ValueError:
        raise ValueError("must be true or false, or auto") from None


def _header_name(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9-]{1,64}", value.strip()):
        raise ValueError("must be an HTTP header name, like X-Forwarded-For")
    return value.strip()


_LIMIT_PARSERS = {
    "allowed_models": _model_names,
    "allowed_modes": _mode_names,
    "allow_custom_models": _flag,
    "allow_model_settings": _flag,
    "max_batch_size": _whole_number,
    "max_steps": _whole_number,
    "max_epochs": _whole_number,
    "max_input_size": _whole_number,
    "max_replicates": lambda v: _whole_number(v, low=0),
    "max_model_parameters": _whole_number,
    "max_queued_per_owner": _whole_number,
    "max_queue_length": _whole_number,
    "max_sweep_points": _whole_number,
    "max_imports_per_owner": _whole_number,
    "job_time_limit_s": _seconds,
    "limit_by_address": _switch,
    "address_header": _header_name,
    "reuse_within_s": lambda v: _seconds(v, inclusive=True),
    "auto_reuse_queue_length": _whole_number,
    "disk_budget": _bytes,
    "max_demo_working_set": _demo_working_set,
}
_NOT_REMOVABLE = ("limit_by_address",)  # a switch, not a limit: true, false or auto
CONFIG_TABLES = ("limits",)


def _describe(value: Any) -> str:
    return repr(value) if isinstance(value, str) else f"{value!r} ({type(value).__name__})"


def load_host_limits(environ: dict[str, str] | None = None) -> HostLimits:
    """Limits from COMPILE_LAB_CONFIG's [limits] table, overridden by COMPILE_LAB_<KEY> variables.

    Raises ConfigError, naming the file or variable and the setting, for anything it cannot use.
    """
    env = os.environ if environ is None else environ
    values: dict[str, tuple[Any, str]] = {}  # key -> (value, where it came from)
    config = env.get("COMPILE_LAB_CONFIG")
    if config:
        for key, value in _read_config_file(config).items():
            values[key] = (value, f"{key} in [limits] of {config}")
    for key in _LIMIT_PARSERS:
        name = f"COMPILE_LAB_{key.upper()}"
        if name in env:
            values[key] = (env[name], name)
    parsed: dict[str, Any] = {}
    for key, (value, where) in values.items():
        if key not in _LIMIT_PARSERS:
            raise ConfigError(f"{where}: unknown setting; known: {', '.join(_LIMIT_PARSERS)}")
        if isinstance(value, str) and value.strip().lower() == "none" and key not in _NOT_REMOVABLE:
            parsed[key] = None
            continue
        if isinstance(value, str) and not value.strip() and key not in ("allowed_models", "allowed_modes"):
            raise ConfigError(f"{where} is empty: give a value, or none for no limit")
        try:
            parsed[key] = _LIMIT_PARSERS[key](value)
        except ValueError as exc:
            raise ConfigError(f"{where} {exc} (got {_describe(value)})") from None
    return HostLimits(**parsed)


def _read_config_file(path: str) -> dict[str, Any]:
    import tomllib

    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read the host configuration {path} (COMPILE_LAB_CONFIG): {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"the host configuration {path} is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:  # TOML is UTF-8; a file saved in another encoding is not TOML
        raise ConfigError(
            f"the host configuration {path} is not valid TOML: it is not UTF-8 text "
            f"(byte {exc.object[exc.start]:#04x} at offset {exc.start}); save it as UTF-8"
        ) from None
    unknown = [key for key in data if key not in CONFIG_TABLES]
    if unknown:
        raise ConfigError(
            f"the host configuration {path} has unknown settings ({', '.join(unknown)}); "
            f"known tables: {', '.join(f'[{t}]' for t in CONFIG_TABLES)}"
        )
    limits = data.get("limits", {})
    if not isinstance(limits, dict):
        raise ConfigError(f"limits in {path} must be a [limits] table of settings (got {_describe(limits)})")
    return limits


# ----------------------------------------------------------------------
# Who a visitor is, to the queue: the owner of their runs, and whom host limits count together.
#
# A visitor is a browser, not a tab: the app keeps a random token in the browser (its localStorage,
# and a cookie that each new tab's connection brings, so the tab knows its visitor from its first
# script run). Every tab of one browser is one owner (one limit, and each tab may cancel the
# others' runs), while a link shared with someone else never carries it (the receiver is not an
# owner). Where the visitor's address is known (limit_by_address: auto by default), the per-person
# limit also counts every browser from one client address together: the header the host's reverse
# proxy sets, or a connection's public address.
#
# Owner tokens are secrets (anyone holding one may cancel or delete that visitor's runs), so the
# store never holds one: an owner is a one-way hash of the browser's token (`owner_of`). A model
# file that reads the store's file learns owner hashes, and no browser can present a hash as its
# token (the page hashes whatever token it is given). Whatever shows an owner to other people
# still uses `shown_owner`.

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
