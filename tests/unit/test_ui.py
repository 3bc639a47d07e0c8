"""The inspector page's rules that need no database: where it may listen, and how a query string
becomes the operate layer's filter and page."""

from __future__ import annotations

import attrs
import pytest

from akter.errors import ConfigurationError, InvalidInput
from akter.operate.query import ExecutionFilter
from akter.ui import bind, check_host
from akter.ui.serve import url_of
from akter.ui.web import PAGE_ROWS, Listing


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


def _listing(params: dict[str, str | list[str]]) -> Listing:
    single = {k: v if isinstance(v, str) else v[0] for k, v in params.items()}
    multi = {k: [v] if isinstance(v, str) else v for k, v in params.items()}
    return Listing.of(single, multi)


def test_filters_from_a_query_string() -> None:
    listing = _listing({"workflow": " Fulfil ", "status": "", "tenant": "demo", "limit": "20"})
    assert listing == Listing(ExecutionFilter(tenant="demo", workflow="Fulfil"), limit=20)
    assert _listing({}) == Listing(ExecutionFilter(), limit=PAGE_ROWS)
    several = _listing({"status": ["suspended", "blocked"], "outcome": ["failed"]})
    assert several.where.status == ("suspended", "blocked")
    assert several.where.outcome == ("failed",)


def test_a_page_link_keeps_the_filters_and_moves_the_cursor() -> None:
    listing = _listing({"tenant": "demo", "status": ["suspended", "blocked"], "limit": "2"})
    assert listing.link(after="CUR") == "?tenant=demo&status=suspended&status=blocked&limit=2&after=CUR"
    later = attrs.evolve(listing, after="CUR")
    assert later.link(after=None) == "?tenant=demo&status=suspended&status=blocked&limit=2"
    assert Listing(ExecutionFilter()).link(after=None) == "?"


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"status": "stuck"}, "unknown status 'stuck'"),
        ({"outcome": "meh"}, "unknown outcome 'meh'"),
        ({"limit": "lots"}, "limit must be a number"),
        ({"limit": "0"}, "limit must be a number from 1 to 1000"),
        ({"actor_id": "a-1"}, "only with its tenant and actor type"),
    ],
)
def test_bad_filters_are_refused_with_a_reason(given: dict[str, str], says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        _listing(dict(given))
