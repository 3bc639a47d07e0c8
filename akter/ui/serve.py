"""Serving the page: where it may listen, and the uvicorn server that runs it."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from akter.errors import ConfigurationError

if TYPE_CHECKING:
    from starlette.applications import Starlette

#: why a bind beyond loopback needs ``--allow-remote``
REMOTE_REFUSED = (
    "the inspector page has no login and shows every actor's state, payloads, results and callers "
    "to whoever can reach it; it listens on loopback unless you pass --allow-remote (and put your own "
    "access control, such as an SSH tunnel or an authenticating proxy, in front of it)"
)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_host(host: str, *, allow_remote: bool) -> None:
    """Refuse a non-loopback ``host`` unless ``allow_remote``: ``ConfigurationError`` says why."""
    if not allow_remote and not is_loopback(host):
        raise ConfigurationError(f"akter ui will not listen on {host}: {REMOTE_REFUSED}")


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0 picks a free one); ``ConfigurationError`` when
    the address is taken or cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigurationError(f"akter ui cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.listen(128)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def serve(web: Starlette, sock: socket.socket, announce: Callable[[str], None]) -> None:
    """Run ``web`` on ``sock`` until interrupted, after ``announce``-ing its URL."""
    import uvicorn

    config = uvicorn.Config(web, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    announce(url_of(sock))
    server.run(sockets=[sock])
