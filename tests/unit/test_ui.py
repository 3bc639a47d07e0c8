"""The inspector page's rules that need no database: where it may listen, and its filters."""

from __future__ import annotations

import pytest

from akter.errors import ConfigurationError, InvalidInput
from akter.ui import bind, check_host
from akter.ui.queries import ListFilter
from akter.ui.serve import url_of


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_hosts_are_allowed(host: str) -> None:
    check_host(host, allow_remote=False)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.com"])
def test_other_hosts_need_the_flag_and_are_told_why(host: str) -> None:
    with pytest.raises(ConfigurationError, match="no login") as info:
        check_host(host, allow_remote=False)
    assert "--allow-remote" in str(info.value)
    check_host(host, allow_remote=True)


def test_port_zero_binds_a_free_port_and_a_taken_one_is_a_clear_error() -> None:
    sock = bind("127.0.0.1", 0)
    try:
        port = sock.getsockname()[1]
        assert url_of(sock) == f"http://127.0.0.1:{port}/"
        with pytest.raises(ConfigurationError, match=f"cannot listen on 127.0.0.1:{port}"):
            bind("127.0.0.1", port)
    finally:
        sock.close()


def test_filters_from_a_query_string() -> None:
    where = ListFilter.of({"workflow": " Fulfil ", "status": "", "tenant": "demo", "limit": "20"})
    assert where == ListFilter(tenant="demo", workflow="Fulfil", limit=20)
    condition, params = where.where()
    assert condition == "TRUE AND tenant = %(tenant)s AND workflow = %(workflow)s"
    assert params == {"tenant": "demo", "workflow": "Fulfil"}


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"status": "stuck"}, "status must be one of"),
        ({"outcome": "meh"}, "outcome must be one of"),
        ({"limit": "lots"}, "limit must be a number"),
        ({"limit": "0"}, "limit must be between 1 and 500"),
    ],
)
def test_bad_filters_are_refused_with_a_reason(given: dict[str, str], says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        ListFilter.of(given)
