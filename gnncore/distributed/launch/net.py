"""Addresses of the ranks: ports, the rendezvous store's socket and gloo's interface.

Everything listens on ``127.0.0.1`` unless ``master_addr`` says otherwise: the
rendezvous store is created on a socket bound to ``master_addr`` (torch's own
would listen on every interface, :func:`master_store`), and each rank's gloo
transport binds the interface that routes to ``master_addr``
(:func:`pin_gloo_interface`; ``lo`` for the default; set ``GLOO_SOCKET_IFNAME``
to choose another).
"""

from __future__ import annotations

import datetime
import fcntl
import os
import socket
import struct
from typing import Any

#: The default address of the rendezvous store and of the ranks' transport.
LOCALHOST = "127.0.0.1"


def free_port(host: str = LOCALHOST) -> int:
    """A TCP port on ``host`` that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def listener(host: str, port: int = 0) -> socket.socket:
    """A TCP socket listening on ``host:port`` (``SO_REUSEADDR``, so a restarted
    run can take the same port)."""
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    return sock


def master_store(host: str, port: int, world: int, timeout: float) -> tuple[Any, int]:
    """A ``TCPStore`` server listening on ``host:port`` only (``port`` 0: a free
    one), and its port. The store owns the listening socket."""
    # lazy: torch loads in seconds; the launcher imports it only to start ranks
    from torch.distributed import TCPStore

    sock = listener(host, port)
    port = int(sock.getsockname()[1])
    try:
        store = TCPStore(
            host,
            port,
            world,
            True,
            datetime.timedelta(seconds=timeout),
            wait_for_workers=False,
            multi_tenant=True,
            master_listen_fd=sock.fileno(),
        )
    except BaseException:
        sock.close()
        raise
    sock.detach()  # the store closes it
    return store, port


def interface_of(address: str) -> str | None:
    """The name of the local interface holding ``address`` (Linux), or ``None``."""
    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            packed = struct.pack("256s", name.encode()[:15])
            try:
                info = fcntl.ioctl(sock.fileno(), siocgifaddr, packed)
            except OSError:
                continue
            if socket.inet_ntoa(info[20:24]) == address:
                return name
    return None


def pin_gloo_interface(master_addr: str) -> None:
    """Make gloo bind the interface that routes to ``master_addr`` (``lo`` for
    127.0.0.1), unless ``GLOO_SOCKET_IFNAME`` is set. Gloo's default is the
    address the host name resolves to, which may be no interface the peers
    can reach (or more than loopback when they are all local)."""
    if os.environ.get("GLOO_SOCKET_IFNAME"):
        return
    try:
        host = socket.gethostbyname(master_addr)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, 9))  # UDP: no packet is sent
            local = probe.getsockname()[0]
        name = interface_of(local)
    except (OSError, ImportError):
        return
    if name is not None:
        os.environ["GLOO_SOCKET_IFNAME"] = name


__all__ = [
    "LOCALHOST",
    "free_port",
    "interface_of",
    "listener",
    "master_store",
    "pin_gloo_interface",
]
