"""`akter relay` started before PostgreSQL is reachable waits for it (invariant 12).

The relay process is pointed at a local TCP port on which, at first, nothing listens; the test
then opens a forwarder on that port to the real test server. The relay must wait, say so in
its log, connect once the server answers and deliver, and stop cleanly (exit 0) on SIGTERM —
also while it is still waiting.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from tests.apps import relay_app
from tests.apps.relay_procs import RelayProcess
from tests.integration.workflow_support import until


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def forwarder(port: int, database_url: str) -> AsyncIterator[None]:
    """Listen on 127.0.0.1:port and pipe every connection to the test server (TCP or socket)."""
    target = conninfo_to_dict(database_url)
    host = str(target.get("host") or "127.0.0.1")

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def serve(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        if host.startswith("/"):
            server_r, server_w = await asyncio.open_unix_connection(
                f"{host}/.s.PGSQL.{target.get('port', 5432)}"
            )
        else:
            server_r, server_w = await asyncio.open_connection(host, int(target.get("port") or 5432))
        await asyncio.gather(pipe(client_r, server_w), pipe(server_r, client_w))

    server = await asyncio.start_server(serve, "127.0.0.1", port)
    try:
        yield
    finally:
        server.close()


def _relay_url(database_url: str, port: int) -> str:
    target = conninfo_to_dict(database_url)
    return f"postgresql://{target.get('user') or 'postgres'}@127.0.0.1:{port}/{target['dbname']}"


@pytest.mark.slow
async def test_a_relay_started_before_postgresql_waits_connects_and_delivers(database_url: str) -> None:
    port = _free_port()
    relay = RelayProcess(_relay_url(database_url, port), app="tests.apps.relay_app:app")
    try:
        await until(
            lambda: asyncio.to_thread(relay.output), lambda out: "waiting for PostgreSQL (try 2)" in out
        )
        assert relay.proc.poll() is None, relay.output()
        async with relay_app.make_app(database_url).client() as client:
            await client.actor(relay_app.Sender, "s1", tenant="t").send(
                relay_app.stage, relay_app.Stage("r1", n=7)
            )
        async with (
            forwarder(port, database_url),
            await psycopg.AsyncConnection.connect(database_url, autocommit=True) as peek,
        ):

            async def delivered() -> int:
                cur = await peek.execute("SELECT count(*) FROM actor_receipts WHERE actor_id = 'r1'")
                return int((await cur.fetchone())[0])  # type: ignore[index]

            await until(delivered, lambda n: n == 1)
            # off the loop: the forwarder runs on it and carries the relay's goodbye statements
            assert await asyncio.to_thread(relay.terminate) == 0, relay.output()
    finally:
        relay.close()


@pytest.mark.slow
def test_sigterm_while_waiting_for_postgresql_exits_0(database_url: str) -> None:
    relay = RelayProcess(_relay_url(database_url, _free_port()), app="tests.apps.relay_app:app")
    try:
        asyncio.run(
            until(lambda: asyncio.to_thread(relay.output), lambda out: "waiting for PostgreSQL" in out)
        )
        assert relay.terminate() == 0, relay.output()
    finally:
        relay.close()
