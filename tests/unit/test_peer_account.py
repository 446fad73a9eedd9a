"""Who holds the other end of a connection to a worker's port, read from the kernel's socket tables: a local
account by its uid, whatever its port; another machine by its address."""

from __future__ import annotations

import ipaddress
import socket
import sys

from app.peer_account import local_account, owner_in_table, source_of

LOCAL, PEER = (ipaddress.ip_address("127.0.0.1"), 8080), (ipaddress.ip_address("127.0.0.1"), 51000)


def _hex(address: str, port: int) -> str:
    raw = ipaddress.ip_address(address).packed
    words = "".join(f"{int.from_bytes(raw[i : i + 4], sys.byteorder):08X}" for i in range(0, len(raw), 4))
    return f"{words}:{port:04X}"


def _table(*rows: tuple[str, str, int]) -> str:
    head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    body = "".join(
        f"   {n}: {local} {remote} 01 00000000:00000000 00:00000000 00000000 {uid:>5}        0 1{n} 1 0\n"
        for n, (local, remote, uid) in enumerate(rows)
    )
    return head + body


def test_the_socket_whose_ends_match_gives_its_owner() -> None:
    table = _table(
        (_hex("127.0.0.1", 8080), _hex("127.0.0.1", 51000), 1000),  # the server's own end: not the one asked
        (_hex("127.0.0.1", 51000), _hex("127.0.0.1", 8080), 65534),  # the client's end
    )
    assert owner_in_table(table, PEER, LOCAL) == 65534
    assert owner_in_table(table, (PEER[0], 51001), LOCAL) is None
    assert owner_in_table("header only\n", PEER, LOCAL) is None


def test_ipv4_in_ipv6_tables_reads_as_ipv4() -> None:
    table = _table((_hex("::ffff:127.0.0.1", 51000), _hex("::ffff:127.0.0.1", 8080), 7))
    assert owner_in_table(table, PEER, LOCAL) == 7  # the IPv6 row's addresses compare as the IPv4 ones they carry
    six = _table((_hex("::1", 51000), _hex("::1", 8080), 8))
    assert owner_in_table(six, (ipaddress.ip_address("::1"), 51000), (ipaddress.ip_address("::1"), 8080)) == 8


def test_a_real_loopback_connection_is_this_account_and_a_stranger_is_its_address() -> None:
    import os

    with socket.create_server(("127.0.0.1", 0)) as server, socket.create_connection(server.getsockname()) as client:
        accepted, peer = server.accept()
        with accepted:
            assert local_account(peer, accepted.getsockname()) == os.getuid()
            assert source_of(peer, accepted.getsockname()) == f"account {os.getuid()}"
            assert client.getsockname() == peer
    assert source_of(("192.0.2.7", 4000), ("192.0.2.1", 8080)) == "192.0.2.7"  # no local socket has these ends
