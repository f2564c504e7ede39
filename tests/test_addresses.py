"""Where a url server may be (gatekeeper/proxy/servers/url/addresses.py): every class of address, through an
injected resolver (DNS answers a test cannot get from the real resolver), and the real resolver once."""

from __future__ import annotations

import socket

import pytest

from gatekeeper.policy import Server
from gatekeeper.proxy.servers.url.addresses import AddressRefused, resolve, system_resolver
from tests.http_servers import loopback_alias


def server(url: str = "https://notes.example/mcp", allow: tuple[str, ...] = ()) -> Server:
    remote = url.startswith("https:")
    return Server.model_validate(
        {"url": url, "allow_remote": remote, "allow_addresses": list(allow), "workspace": "/tmp", "tools": {}}
    )


def answers(*addresses: str) -> object:
    return lambda host, port: list(addresses)


REFUSED = [
    ("10.1.2.3", "a private address"),
    ("172.16.0.1", "a private address"),
    ("192.168.1.10", "a private address"),
    ("fd12:3456::1", "a private address"),
    ("100.64.0.7", "a shared (carrier-grade NAT) address"),
    ("169.254.10.1", "a link-local address"),
    ("fe80::1", "a link-local address"),
    ("169.254.169.254", "a cloud metadata address"),
    ("fd00:ec2::254", "a cloud metadata address"),
    ("100.100.100.200", "a cloud metadata address"),
    ("0.0.0.0", "the unspecified address"),
    ("::", "the unspecified address"),
    ("224.0.0.1", "a multicast address"),
    ("ff02::1", "a multicast address"),
    ("240.0.0.1", "a reserved address"),
    ("127.0.0.1", "a loopback address"),
    ("::ffff:10.0.0.1", "a private address"),  # an IPv4-mapped IPv6 address is judged as the IPv4 one
]


@pytest.mark.parametrize(("address", "why"), REFUSED)
def test_a_remote_name_resolving_to_a_non_public_address_is_refused(address: str, why: str) -> None:
    with pytest.raises(AddressRefused) as caught:
        resolve("vault", server(), answers(address))  # type: ignore[arg-type]
    message = str(caught.value)
    assert why in message and "'notes.example'" in message and address.split("::ffff:")[-1] in message
    assert caught.value.host == "notes.example" and caught.value.why == why


def test_one_bad_address_among_good_ones_refuses_the_name() -> None:
    with pytest.raises(AddressRefused, match=r"10\.0\.0\.5"):
        resolve("vault", server(), answers("93.184.216.34", "10.0.0.5"))  # type: ignore[arg-type]


def test_a_public_address_is_the_target_and_every_address_is_kept_in_order() -> None:
    target = resolve("vault", server("https://notes.example:8443/mcp"), answers("93.184.216.34", "2606:2800::1"))  # type: ignore[arg-type]
    assert (target.host, target.addresses, target.port) == ("notes.example", ("93.184.216.34", "2606:2800::1"), 8443)


def test_allow_addresses_admits_a_private_address_but_never_a_metadata_one() -> None:
    allowed = server(allow=("10.0.0.0/8", "169.254.0.0/16"))
    assert resolve("vault", allowed, answers("10.9.8.7")).addresses == ("10.9.8.7",)  # type: ignore[arg-type]
    with pytest.raises(AddressRefused, match="never connects to a cloud metadata"):
        resolve("vault", allowed, answers("169.254.169.254"))  # type: ignore[arg-type]


def test_the_metadata_name_is_refused_whatever_it_resolves_to() -> None:
    with pytest.raises(AddressRefused, match="metadata"):
        resolve("vault", server("https://metadata.google.internal/mcp"), answers("93.184.216.34"))  # type: ignore[arg-type]


def test_a_loopback_url_must_resolve_to_loopback_only() -> None:
    local = server("http://localhost:3000/mcp")
    assert resolve("vault", local, answers("127.0.0.1", "::1")).addresses == ("127.0.0.1", "::1")  # type: ignore[arg-type]
    with pytest.raises(AddressRefused, match="not a loopback address"):
        resolve("vault", local, answers("127.0.0.1", "192.168.0.2"))  # type: ignore[arg-type]


def test_a_name_that_does_not_resolve_is_a_failure_not_a_refusal() -> None:
    def broken(host: str, port: int) -> list[str]:
        raise socket.gaierror(-2, "Name or service not known")

    with pytest.raises(OSError, match=r"cannot resolve 'notes\.example'"):
        resolve("vault", server(), broken)


def test_the_real_resolver_refuses_a_remote_name_that_leads_to_this_machine() -> None:
    """A name not spelled as loopback counts as remote; the system resolves it to 127.0.0.1."""
    with pytest.raises(AddressRefused, match="a loopback address"):
        resolve("vault", server(f"https://{loopback_alias()}:8443/mcp"), system_resolver)
