"""The connection to a url server goes to the address that was checked, never to a second DNS
answer, and TLS still verifies the URL's host name (SNI and certificate): a real TLS server on
127.0.0.1 with a certificate from a CA made here by openssl, reached as ``notes.example`` (a
name no resolver knows, so only the pinned address can work)."""

from __future__ import annotations

import asyncio
import io
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

from gatekeeper.proxy.servers.url.addresses import Target
from gatekeeper.proxy.servers.url.connection import GuardedTransport

pytestmark = pytest.mark.anyio


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    """A CA and a server certificate for notes.example, signed by it."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
             "-days", "2", "-subj", "/CN=Test CA", cwd=tmp_path)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "leaf.key", "-out", "leaf.csr",
             "-subj", "/CN=notes.example", cwd=tmp_path)  # fmt: skip
    (tmp_path / "san.ext").write_text("subjectAltName=DNS:notes.example\n")
    _openssl("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "leaf.pem", "-days", "2", "-extfile", "san.ext", cwd=tmp_path)  # fmt: skip
    return tmp_path


@pytest.fixture
async def tls_server(pki: Path) -> AsyncIterator[tuple[int, list[str | None]]]:
    """An HTTPS server on 127.0.0.1 answering every request with 200; records the SNI names it saw."""
    seen: list[str | None] = []
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki / "leaf.pem", pki / "leaf.key")
    context.sni_callback = lambda sock, name, ctx: seen.append(name)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    async with server:
        yield server.sockets[0].getsockname()[1], seen


def client_for(host: str, port: int, pki: Path) -> httpx2.AsyncClient:
    verify = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    transport = GuardedTransport("vault", Target(host, ("127.0.0.1",), port), io.StringIO(), verify=verify)
    return httpx2.AsyncClient(transport=transport, trust_env=False)


async def test_the_pinned_address_is_used_and_tls_checks_the_url_host(
    tls_server: tuple[int, list[str | None]], pki: Path
) -> None:
    port, seen = tls_server
    async with client_for("notes.example", port, pki) as client:
        response = await client.get(f"https://notes.example:{port}/mcp")
    assert response.status_code == 200 and response.text == "ok"
    assert seen == ["notes.example"]  # SNI carries the URL's host, not the address


async def test_a_certificate_for_another_name_is_refused(tls_server: tuple[int, list[str | None]], pki: Path) -> None:
    port, _ = tls_server
    async with client_for("files.example", port, pki) as client:
        with pytest.raises(httpx2.ConnectError, match="certificate"):
            await client.get(f"https://files.example:{port}/mcp")


async def test_a_host_other_than_the_checked_one_is_not_connected(
    tls_server: tuple[int, list[str | None]], pki: Path
) -> None:
    port, seen = tls_server
    async with client_for("notes.example", port, pki) as client:
        with pytest.raises(httpx2.ConnectError, match=r"only 'notes\.example' was checked"):
            await client.get(f"https://elsewhere.example:{port}/mcp")
    assert seen == []
