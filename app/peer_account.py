"""Which account on this computer holds the other end of a TCP connection, read from Linux's socket tables
(``/proc/net/tcp``, ``/proc/net/tcp6``): a connection from this computer, loopback or not, is the same source
whatever its port, so that one account's wrong pairing codes never count against another's. A connection from
another machine has no entry here and is known by its address alone."""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path

TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
Address = tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]


def source_of(peer: tuple[str, int], ours: tuple[str, int]) -> str:
    """How the pairing policy names who is at ``peer`` (seen from our end ``ours``): ``account UID`` for a local
    account, otherwise the peer's address."""
    uid = local_account(peer, ours)
    return f"account {uid}" if uid is not None else _plain(peer[0])


def local_account(peer: tuple[str, int], ours: tuple[str, int]) -> int | None:
    wanted = (_normal(peer[0]), int(peer[1])), (_normal(ours[0]), int(ours[1]))
    for table in TABLES:
        try:
            text = table.read_text()
        except OSError:
            continue
        uid = owner_in_table(text, *wanted)
        if uid is not None:
            return uid
    return None


def owner_in_table(text: str, local: Address, remote: Address) -> int | None:
    """The uid of the socket in ``text`` (a /proc/net/tcp table) whose own end is ``local`` and whose other end is
    ``remote``."""
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        try:
            if _decode(fields[1]) == local and _decode(fields[2]) == remote:
                return int(fields[7])
        except ValueError:
            continue
    return None


def _decode(text: str) -> Address:
    """``0100007F:1F90`` (the kernel prints each 32-bit word of the address in this machine's byte order) as an
    address and a port."""
    hex_address, _, hex_port = text.partition(":")
    words = [int(hex_address[i : i + 8], 16).to_bytes(4, sys.byteorder) for i in range(0, len(hex_address), 8)]
    raw = b"".join(words)
    address = ipaddress.ip_address(raw)
    return _normal(str(address)), int(hex_port, 16)


def _normal(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    address = ipaddress.ip_address(text.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _plain(text: str) -> str:
    try:
        return str(_normal(text))
    except ValueError:
        return text
