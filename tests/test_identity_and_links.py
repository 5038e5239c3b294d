"""Who a visitor is: one identity per browser (every tab), limits per visitor (and per client
address where the host says so), a shared link never makes its receiver an owner; link values out
of range are moved to the nearest allowed with a note that stays."""

import pytest
from streamlit.testing.v1 import AppTest
from test_pages import APP, app, record_probe, texts

from app_pages import common
from core.runs import admin, queue
from core.runs import limits as identity
from core.runs.limits import (
    AddressesSeen,
    HostLimits,
    by_browser_alone,
    client_address,
    is_browser_token,
    owner_of,
    shown_owner,
)
from core.runs.store import Store

TOKEN = "0123456789abcdef0123456789abcdef"
OTHER = "fedcba9876543210fedcba9876543210"


def tab(token: str, **query) -> AppTest:
    """A browser tab whose browser holds `token` (what the visitor component reads from localStorage)."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["visitor"] = token
    for key, value in query.items():
        at.query_params[key] = str(value)
    return at.run()


def launch_small_race(at: AppTest) -> AppTest:
    at.selectbox(key="pick_zoo").set_value("mlp").run()
    at.number_input(key="form_steps_per_epoch").set_value(3).run()
    [b for b in at.button if b.label == "Launch"][0].click().run()
    assert not at.exception
    return at


def test_two_tabs_of_one_browser_share_one_identity_for_limits(store, sleepers, monkeypatch):
    record_probe(store)
    monkeypatch.setenv("COMPILE_LAB_MAX_QUEUED_PER_OWNER", "1")
    first = launch_small_race(tab(TOKEN))
    assert [r.owner for r in store.list_runs(kind="race")] == [owner_of(TOKEN)]
    second = launch_small_race(tab(TOKEN))  # the same browser, another tab
    assert "you already have 1 jobs queued or running; this host allows 1 per person" in texts(second)
    assert len(store.list_runs(kind="race")) == 1
    # ... and the second tab follows the visitor's run as its owner: it may cancel it.
    assert any(b.label == "Cancel" for b in second.button)
    assert any(b.label == "Cancel" for b in first.button)
    other = launch_small_race(tab(OTHER))  # another visitor is not limited by the first one's run
    assert len(store.list_runs(kind="race")) == 2 and "you already have" not in texts(other)


def browser_cookies(monkeypatch, cookies: dict) -> None:
    """The cookies a tab's connection brings (AppTest cannot seed st.context.cookies)."""

    class Context:
        def __getattr__(self, name):
            if name == "cookies":
                return cookies
            raise AttributeError(name)

    monkeypatch.setattr(common.st, "context", Context())


def test_a_new_tab_is_its_browser_s_visitor_from_its_first_run_by_the_cookie(store, sleepers, monkeypatch):
    """The cookie (set by the visitor component in any earlier tab) comes with a new tab's
    connection: the tab follows the visitor's run, as its owner, without waiting for the browser's
    answer (whose rerun could swallow a click made in the same instant)."""
    record_probe(store)
    first = launch_small_race(tab(TOKEN))
    browser_cookies(monkeypatch, {common.VISITOR_KEY: TOKEN})
    second = AppTest.from_file(APP, default_timeout=60).run()  # no identity but the cookie
    assert not second.exception
    assert second.session_state["visitor"] == TOKEN
    assert any(b.label == "Cancel" for b in second.button)
    run_id = int(first.query_params["run"])
    assert any(p.proto.text.startswith(f"Run {run_id}: ") for p in second.get("progress"))
    assert second.session_state["race_form"] is False  # the visitor's run first, the form folded
    # A link with a configuration (and no run) is there to launch it: the form is open, the run below.
    configured = AppTest.from_file(APP, default_timeout=60)
    configured.query_params.update({"model": "mlp", "batch_size": "32"})
    configured.run()
    assert configured.session_state["race_form"] is True and configured.session_state["form_batch_size"] == 32
    assert any(p.proto.text.startswith(f"Run {run_id}: ") for p in configured.get("progress"))
    # A cookie that is not a token the app makes is no identity: that tab is a new visitor.
    browser_cookies(monkeypatch, {common.VISITOR_KEY: "0123456789abcdef') OR 1=1 --"})
    stranger = AppTest.from_file(APP, default_timeout=60).run()
    assert not stranger.exception
    assert is_browser_token(stranger.session_state["visitor"]) and stranger.session_state["visitor"] != TOKEN
    assert not any(b.label == "Cancel" for b in stranger.button)


@pytest.mark.e2e
def test_the_visitor_component_keeps_the_token_and_answers_only_when_the_browser_knows_better():
    """The component's own JS in Chromium, on a page of a real origin (localStorage and cookies):
    a new browser keeps the server's token without answering (no rerun); a browser that already
    had another token (or the old per-tab one) answers with it; it always leaves the cookie set."""
    from playwright.sync_api import sync_playwright
    from test_e2e import CHROMIUM, CHROMIUM_ARGS, require_browser

    require_browser()
    script = common._VISITOR_JS.replace("export default function", "window.visitorComponent = function")

    def mount(page, known):
        return page.evaluate(
            """known => { const calls = [];
                window.visitorComponent({setStateValue: (k, v) => calls.push([k, v]), data: {token: known}});
                return {calls, stored: localStorage.getItem("compile_lab_visitor"), cookie: document.cookie}; }""",
            known,
        )

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context().new_page()
        page.route(
            "http://compile-lab.test/**", lambda route: route.fulfill(body="<html></html>", content_type="text/html")
        )
        page.goto("http://compile-lab.test/")
        page.add_script_tag(content=script)
        fresh = mount(page, TOKEN)  # a new browser: it keeps what the server drew with
        assert fresh == {"calls": [], "stored": TOKEN, "cookie": f"{common.VISITOR_KEY}={TOKEN}"}
        assert mount(page, TOKEN)["calls"] == []  # a second tab whose cookie came along: nothing to say
        known_better = mount(page, OTHER)  # a tab that drew a new token (its cookie was missing)
        assert known_better["calls"] == [["token", TOKEN]] and known_better["cookie"] == f"{common.VISITOR_KEY}={TOKEN}"
        page.evaluate("localStorage.clear()")
        page.evaluate(f"sessionStorage.setItem('compile_lab_visitor', '{OTHER}')")  # the old per-tab identity
        assert mount(page, TOKEN)["calls"] == [["token", OTHER]]
        page.evaluate("localStorage.clear(); sessionStorage.clear()")
        drawn = mount(page, None)["calls"]  # nothing known anywhere: it makes one and says so
        assert len(drawn) == 1 and is_browser_token(drawn[0][1]) and len(drawn[0][1]) == 32
        browser.close()


def test_a_shared_link_does_not_make_its_receiver_an_owner(store, sleepers):
    record_probe(store)
    owner = launch_small_race(tab(TOKEN))
    run_id = owner.query_params["run"]
    assert "visitor" not in " ".join(f"{k}={v}" for k, v in owner.query_params.items())
    receiver = tab(OTHER, **dict(owner.query_params.items()))
    assert not receiver.exception
    assert any(p.proto.text.startswith(f"Run {run_id}: ") for p in receiver.get("progress"))
    assert not any(b.label == "Cancel" for b in receiver.button)


def test_where_the_host_says_so_every_browser_at_one_address_shares_the_limit(store, sleepers, monkeypatch):
    record_probe(store)
    monkeypatch.setenv("COMPILE_LAB_MAX_QUEUED_PER_OWNER", "1")
    monkeypatch.setenv("COMPILE_LAB_LIMIT_BY_ADDRESS", "true")
    monkeypatch.setattr(common, "connection_address", lambda: ("203.0.113.7", []))
    launch_small_race(tab(TOKEN))
    refused = launch_small_race(tab(OTHER))  # another browser, same address
    assert "(counting every browser at your address)" in texts(refused)
    assert [r.client for r in store.list_runs(kind="race")] == ["address:203.0.113.7"]
    monkeypatch.setattr(common, "connection_address", lambda: ("198.51.100.2", []))
    launch_small_race(tab("aaaaaaaaaaaaaaaa"))
    assert len(store.list_runs(kind="race")) == 2


def test_where_the_host_turns_it_off_addresses_are_neither_used_nor_kept(store, sleepers, monkeypatch):
    record_probe(store)
    monkeypatch.setenv("COMPILE_LAB_MAX_QUEUED_PER_OWNER", "1")
    monkeypatch.setenv("COMPILE_LAB_LIMIT_BY_ADDRESS", "false")  # the default (auto) counts a known address
    monkeypatch.setattr(common, "connection_address", lambda: ("203.0.113.7", []))
    launch_small_race(tab(TOKEN))
    launch_small_race(tab(OTHER))
    assert [r.client for r in store.list_runs(kind="race")] == [None, None]


def test_enqueue_counts_a_visitors_jobs_by_owner_or_address(tmp_path, sleepers):
    store = Store(str(tmp_path / "s.sqlite3"))
    limits = HostLimits(max_queued_per_owner=2)
    from support import CPU, quick_spec

    queue.enqueue(store, quick_spec(), owner_of(TOKEN), limits=limits, caps=CPU, address="address:a")
    queue.enqueue(store, quick_spec(), owner_of(OTHER), limits=limits, caps=CPU, address="address:a")
    with pytest.raises(queue.JobError, match="you already have 2 jobs"):
        queue.enqueue(store, quick_spec(), "visitor:third", limits=limits, caps=CPU, address="address:a")
    queue.enqueue(store, quick_spec(), "visitor:third", limits=limits, caps=CPU, address="address:b")
    queue.enqueue(store, quick_spec(), "visitor:third", limits=limits, caps=CPU)  # no address: only its own


def test_client_address_follows_the_hosts_setting():
    off = HostLimits(limit_by_address=False)
    on = HostLimits(limit_by_address=True)
    behind_proxy = HostLimits(limit_by_address=True, address_header="X-Forwarded-For")
    assert client_address(off, "203.0.113.7") is None
    assert client_address(on, "203.0.113.7") == "address:203.0.113.7"
    assert client_address(on, None) == "address:localhost"
    headers = [("x-forwarded-for", "6.6.6.6, 203.0.113.7"), ("Host", "lab")]  # the client wrote the first
    assert client_address(behind_proxy, "10.0.0.1", headers) == "address:203.0.113.7"
    assert client_address(behind_proxy, "10.0.0.1", []) == "address:10.0.0.1"


def test_the_app_says_at_its_start_where_visitors_are_told_apart_by_browser_alone():
    """Where no client address is known (loopback, a proxy without address_header) every fresh browser
    is a new visitor: 12 of them with 2 races each filled the queue for everyone. app.py logs this
    sentence as the server starts (tests/test_public_demo_front.py reads it in a real server's log)."""
    no_header = by_browser_alone(HostLimits(max_queued_per_owner=2))
    assert "told apart by browser alone" in no_header and "its own 2 jobs" in no_header
    assert "set address_header" in no_header and "docs/hosting.md" in no_header
    assert "limit_by_address = false" in by_browser_alone(HostLimits(limit_by_address=False))
    assert by_browser_alone(HostLimits(address_header="X-Forwarded-For")) is None  # the proxy names them
    assert by_browser_alone(HostLimits(limit_by_address=True)) is None  # every address counts, loopback too


def test_the_admin_page_says_that_fresh_browsers_from_loopback_were_not_told_apart(store, sleepers, monkeypatch):
    """The issue's attack, small: fresh browser identities from 127.0.0.1 each queue a race; each is
    a visitor of its own, and the Admin page says so, naming where they came from and the fix."""
    record_probe(store)
    monkeypatch.setattr(identity, "ADDRESSES_SEEN", AddressesSeen())
    monkeypatch.setattr(admin, "GUESSES", admin.TokenGuesses())
    monkeypatch.setenv("COMPILE_LAB_ADMIN_TOKEN", "correct-horse-battery-staple-42")
    monkeypatch.setenv("COMPILE_LAB_MAX_QUEUED_PER_OWNER", "1")
    monkeypatch.setattr(common, "connection_address", lambda: ("127.0.0.1", []))
    for token in ("a" * 16, "b" * 16, "c" * 16):  # three fresh browsers, one address
        launch_small_race(tab(token))
    assert [r.client for r in store.list_runs(kind="race")] == [None, None, None]  # each its own visitor
    at = tab("d" * 16)
    at.switch_page("app_pages/admin.py").run()
    at.text_input[0].input("correct-horse-battery-staple-42")
    at.button[0].click().run()
    warning = " ".join(w.value for w in at.warning).replace("\\", "")  # as shown: markdown's escapes undone
    assert "4 of the 4 visitors (browsers) seen since the app started" in warning  # the 3 racers and the admin
    assert "(from 127.0.0.1)" in warning and "told apart by browser alone" in warning
    assert "its own 1 job and turn in the queue" in warning and "set address_header" in warning


def test_the_admin_notice_names_a_proxy_that_did_not_send_the_header():
    behind_proxy = HostLimits(address_header="X-Forwarded-For")
    seen = AddressesSeen()
    named = client_address(behind_proxy, "10.0.0.2", [("X-Forwarded-For", "203.0.113.7")])
    seen.note("visitor:a", named, "10.0.0.2")
    seen.note("visitor:a", named, "10.0.0.2")  # a visitor counts once, however many requests
    assert seen.notice(behind_proxy) is None  # every visitor was named by the proxy
    seen.note("visitor:b", client_address(behind_proxy, "10.0.0.2", [("X-Forwarded-For", "")]), "10.0.0.2")
    notice = seen.notice(behind_proxy)
    assert "1 of the 2 visitors (browsers) seen" in notice and "(from 10.0.0.2)" in notice
    assert "did not send X-Forwarded-For" in notice
    for i in range(20):  # the sources it names stay few
        seen.note(f"visitor:{i}", None, f"10.0.1.{i}")
    assert seen.notice(behind_proxy).count("10.0.") == AddressesSeen.SHOWN_SOURCES


def test_owner_tokens_are_shown_cut_and_only_hex_tokens_are_accepted():
    assert shown_owner(owner_of(TOKEN)) == f"visitor:{owner_of(TOKEN)[8:14]}…"  # of the hash, not the token
    assert TOKEN[:6] not in shown_owner(owner_of(TOKEN))
    assert shown_owner("cli:ann") == "cli:ann"
    assert is_browser_token(TOKEN) and not is_browser_token("../etc") and not is_browser_token("ABCDEF0123456789")


def test_link_values_out_of_range_are_clamped_with_notes_that_stay(store, sleepers):
    record_probe(store)
    at = app(batch_size=1000000000, epochs=0, model="mlp")
    assert not at.exception
    assert at.number_input(key="form_batch_size").value == 65536
    assert at.number_input(key="form_epochs").value == 1
    notes = [w.value for w in at.warning]
    assert any("batch\\_size\\=1000000000 from the link is above the largest allowed \\(65536\\)" in n for n in notes)
    assert any("epochs\\=0 from the link is below the smallest allowed \\(1\\)" in n for n in notes)
    at.selectbox(key="form_precision").set_value("amp-bf16").run()  # any rerun: the notes stay
    assert len([w for w in at.warning if "from the link" in w.value]) == 2
    at.number_input(key="form_epochs").set_value(2).run()  # the visitor changed epochs: that note goes
    remaining = [w.value for w in at.warning if "from the link" in w.value]
    assert len(remaining) == 1 and "batch\\_size" in remaining[0]


def test_link_values_over_the_hosts_limit_are_clamped_to_it(store, sleepers, monkeypatch):
    record_probe(store)
    monkeypatch.setenv("COMPILE_LAB_MAX_BATCH_SIZE", "64")
    at = app(batch_size=1000000000, model="mlp")
    assert at.number_input(key="form_batch_size").value == 64
    assert any("above this host" in w.value and "using 64" in w.value for w in at.warning)
    assert not [b for b in at.button if b.label == "Launch"][0].disabled
