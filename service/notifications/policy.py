"""Which callback URLs the service may connect to: the guard against server-side request
forgery.

A callback URL is the service connecting where a user says. Without a rule, any key could make
the workers reach the cloud metadata service (169.254.169.254), the Redis next to them or an
admin page on loopback. So a host is resolved and every address it resolves to must be
allowed: a private, loopback, link-local, multicast, reserved or unspecified address only when
``callback_allowed_hosts`` names the host, the address or a network holding it; a public
address when ``callback_allow_public`` (or when listed). The check is made when the URL is
submitted and again at each delivery, on the address then connected to (the connection is
pinned to the address checked, so a DNS answer that changes in between cannot slip through).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from service.settings import Settings

__all__ = ["CallbackRefused", "Target", "check_address", "resolve_checked"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class CallbackRefused(Exception):
    """The callback URL may not be used; the message says why."""


@dataclass(frozen=True)
class Target:
    """A callback URL checked: its parts and the allowed addresses its host resolved to."""

    url: SplitResult
    host: str
    port: int
    addresses: tuple[IPAddress, ...]


def _category(ip: IPAddress) -> str | None:
    """What makes ``ip`` non-public (None: a public address)."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return _category(ip.ipv4_mapped)
    for name, flag in (
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("unspecified", ip.is_unspecified),
        ("reserved", ip.is_reserved),
        ("private", ip.is_private),
    ):
        if flag:
            return name
    return None if ip.is_global else "non-global"


def _listed(host: str, ip: IPAddress, settings: Settings) -> bool:
    """Whether ``callback_allowed_hosts`` names ``host``, ``ip`` or a network holding it."""
    plain = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped else ip
    for entry in settings.callback_allowed_hosts:
        entry = entry.strip().lower()
        if not entry:
            continue
        if entry == host.lower().rstrip("."):
            return True
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            continue
        if plain.version == network.version and plain in network:
            return True
    return False


def check_address(host: str, ip: IPAddress, settings: Settings) -> str | None:
    """Why a connection to ``ip`` (for ``host``) is refused; None when it is allowed."""
    if _listed(host, ip, settings):
        return None
    category = _category(ip)
    if category is not None:
        return (
            f"host {host!r} resolves to {ip}, a {category} address; callbacks to such "
            "addresses are refused unless the service's setting callback_allowed_hosts "
            "lists the host or its network"
        )
    if not settings.callback_allow_public:
        return (
            f"host {host!r} ({ip}) is not in the service's callback_allowed_hosts, and "
            "callbacks to other hosts are turned off (callback_allow_public is false)"
        )
    return None


def split(url: str) -> tuple[SplitResult, str, int]:
    """The parts, host and port of ``url``; :class:`CallbackRefused` unless it is an
    absolute http(s) URL with a host."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise CallbackRefused(f"callback_url {url!r} is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise CallbackRefused(
            f"callback_url must use http or https; found scheme {parts.scheme or '(none)'!r}"
        )
    host = parts.hostname
    if not host:
        raise CallbackRefused(f"callback_url {url!r} has no host")
    return parts, host, port or (443 if parts.scheme == "https" else 80)


def resolve_checked(url: str, settings: Settings) -> Target:
    """Resolve the host of ``url`` and check every address it resolves to (blocking: call it
    off the event loop); :class:`CallbackRefused` with the reason when one is not allowed or
    the host does not resolve."""
    parts, host, port = split(url)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise CallbackRefused(f"callback_url host {host!r} does not resolve: {exc}") from None
    addresses: list[IPAddress] = []
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise CallbackRefused(f"callback_url host {host!r} does not resolve to any address")
    for ip in addresses:
        reason = check_address(host, ip, settings)
        if reason is not None:
            raise CallbackRefused(reason)
    return Target(parts, host, port, tuple(addresses))
