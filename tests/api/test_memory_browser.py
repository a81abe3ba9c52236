"""The memory browser at ``/ui/``, clicked through in headless Chromium, and its new routes.

A ``memory-chain serve`` process with API keys for Ana and Bob and the fake Ollama as its
model. Ana's memory is filled through the API (turns, one "remember this", a consolidation);
then ``tests/browser/memory_browser.js`` opens the page, is asked for a key, connects with a
wrong one and then Ana's, reads the facts, opens a conversation, searches it, previews a
prompt, archives a conversation (cancelling once) and purges it; then it adds a fact through
the form, edits it, deletes the remembered one and shows the facts' history. The assertions
check the page against the API.
The new routes' bad input is checked in process.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memory_chain.api import create_app
from memory_chain.config import MemorySettings
from memory_chain.intent import parse_intent
from tests import browsers
from tests.faults.fake_llm import FakeOllama
from tests.servers import RunningServer, server_env

pytestmark = pytest.mark.slow

ANA, BOB = "key-ana", "key-bob"
TRIP = [
    ("user", "We fly to Lisbon on 3 May."),
    ("assistant", "Noted: Lisbon on 3 May."),
    ("user", "Please remember this: my seat is 14C."),
    ("assistant", "Noted: seat 14C."),
]
RECIPES = [("user", "A soup with leeks and potatoes."), ("assistant", "Noted: leek soup.")]


def _filed(message: str) -> str:
    """The fact a "remember this" message files (its words without the request)."""
    intent = parse_intent(message)
    assert intent is not None, message
    return intent.text


SEAT = _filed(TRIP[2][1])
NEW_FACT, EDITED_FACT = "My favourite tea is green tea.", "My favourite tea is jasmine tea."


def _call(server: RunningServer, method: str, path: str, key: str = ANA, **kwargs: Any) -> Any:
    headers = {"Authorization": f"Bearer {key}"}
    response = httpx.request(method, f"{server.url}{path}", headers=headers, timeout=60, **kwargs)
    assert response.status_code < 300, response.text
    return response.json()


def _add(server: RunningServer, conversation: str, turns: list[tuple[str, str]], key: str) -> None:
    body = {"turns": [{"role": role, "content": text} for role, text in turns]}
    _call(server, "POST", f"/v1/conversations/{conversation}/turns", key, json=body)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    fake = FakeOllama().start()
    data_dir = tmp_path_factory.mktemp("browser") / "data"
    env = server_env(data_dir, fake.url, api_keys={ANA: "ana", BOB: "bob"})
    server = RunningServer(data_dir, env).start()
    _add(server, "trip", TRIP, ANA)
    _add(server, "recipes", RECIPES, ANA)
    _add(server, "bobs-plans", [("user", "Bob flies to Lisbon too.")], BOB)
    _call(server, "POST", "/v1/conversations/trip/consolidate")
    deadline = time.monotonic() + 60  # the fact is filed by the tier-3 backfill
    while not _call(server, "GET", "/v1/facts")["facts"] and time.monotonic() < deadline:
        time.sleep(0.2)
    yield server
    server.stop()
    fake.stop()


def test_the_memory_browser_shows_and_manages_the_callers_memory(
    server: RunningServer, tmp_path: Path
) -> None:
    node, chromium = browsers.browser_tools()
    options = {
        "baseUrl": server.url,
        "chromium": chromium,
        "key": ANA,
        "wrongKey": "not-a-key",
        "conversation": "trip",
        "query": "Lisbon",
        "remove": "recipes",
        "preview": "When do we fly to Lisbon?",
        "newFact": NEW_FACT,
        "newKind": "preference",
        "editedFact": EDITED_FACT,
        "editedKind": "plan",
        "dismiss": SEAT,
        "screenshotDir": str(tmp_path),
    }
    # The facts before the page changes them: the remembered seat only.
    seeded = _call(server, "GET", "/v1/facts")["facts"]
    assert [f["text"] for f in seeded] == [SEAT]
    assert "14C" in SEAT
    assert "remember" not in SEAT
    # The API's answer to the page's search, asked on the same stored corpus: the page purges a
    # conversation after it searches, and BM25's corpus statistics (so the fused scores) change.
    api = _call(server, "POST", "/v1/conversations/trip/search", json={"query": "Lisbon", "k": 10})
    report = browsers.drive(node, "memory_browser.js", options, timeout=180)
    assert report["error"] is None, report
    assert report["pageErrors"] == []
    assert report["blockedRequests"] == []

    # It asks for a key, and says what is wrong with a bad one.
    assert report["opened"]["whoami"] == "This server needs an API key."
    assert "401" in report["wrongKey"]["error"]
    assert "enter an API key" in report["wrongKey"]["error"]

    # Ana's conversations only, with their counts and status.
    connected = report["connected"]
    assert connected["whoami"] == "signed in as ana"
    assert connected["errorHidden"]
    listed = {c["id"]: c["meta"] for c in connected["conversations"]}
    assert set(listed) == {"trip", "recipes"}
    assert "active" in listed["trip"]
    assert "4 turns" in listed["trip"]
    assert "2 turns" in listed["recipes"]
    assert connected["facts"] == [SEAT]
    [seat] = connected["factItems"]
    assert seat["id"] == seeded[0]["id"]
    assert seat["status"] == "current"
    assert (seat["kind"], seat["origin"]) == (seeded[0]["kind"], seeded[0]["origin"])
    assert seat["source"].startswith("from trip #")  # the conversation and turn it came from
    assert seat["since"].startswith("since ")
    assert (seat["badge"], seat["until"], seat["replacedBy"]) == (None, None, None)
    assert seat["buttons"] == ["Edit", "Delete"]

    # A conversation: its turns, its range summary and its running summary, as stored.
    detail = _call(server, "GET", "/v1/conversations/trip")
    shown = report["conversation"]
    assert shown["title"] == "trip"
    assert shown["turns"] == [text for _, text in TRIP]
    assert shown["runningSummary"] == detail["summary"]
    assert shown["summaries"] == [s["summary_text"] for s in detail["summaries"]]
    assert shown["summaryRanges"][0].startswith("turns 1\u20134")  # an en dash
    # How far consolidation has come, beside the turn count.
    through = max(s["turn_range_end"] for s in detail["summaries"])
    assert f" {through} of {detail['turn_count']} consolidated " in shown["meta"]

    # Search: the same hits as the API, each naming its tier, its sources and its score.
    assert [(r["tier"], r["content"]) for r in report["search"]] == [
        (hit["tier"], hit["content"]) for hit in api["results"]
    ]
    assert [float(r["score"]) for r in report["search"]] == pytest.approx(
        [hit["score"] for hit in api["results"]], abs=1e-4
    )
    assert {r["content"] for r in report["search"][:2]} == {TRIP[0][1], TRIP[1][1]}
    assert {r["tier"] for r in report["search"]} <= {"tier2", "tier3"}
    assert all(r["sources"] for r in report["search"])

    # What the model will see: the prompt's sections as the context route gives them (asked
    # here after the page archived "recipes", so the recalled memories may differ; the budget
    # and this conversation's own sections do not).
    seen = _call(
        server,
        "POST",
        "/v1/conversations/trip/context",
        json={"message": "When do we fly to Lisbon?"},
    )
    preview = report["preview"]
    assert [s["name"] for s in preview["sections"]] == [s["name"] for s in seen["sections"]]
    budget = seen["budget"]
    window = f"of {budget['prompt']} prompt tokens used (window {budget['window']}"
    assert window in preview["budget"]
    assert "the model's tokenizer" in preview["budget"]  # the stand-in serves the embedded name
    recent = next(s for s in preview["sections"] if s["name"] == "recent")
    assert recent["texts"] == [text for _, text in TRIP]
    message = next(s for s in preview["sections"] if s["name"] == "message")
    assert message["texts"] == ["When do we fly to Lisbon?"]
    assert "configured model" in preview["models"]

    # Archive: cancelling changes nothing; confirming archives.
    archive = report["archive"]
    assert "Archive" in archive["question"]
    assert archive["afterCancel"].startswith("active")
    assert archive["afterConfirm"].startswith("archived")

    # Purge: asked first, then gone from the list and from every API route.
    assert "cannot be undone" in report["purge"]["question"]
    assert [c["id"] for c in report["purge"]["listed"]] == ["trip"]
    gone = httpx.get(
        f"{server.url}/v1/conversations/recipes",
        headers={"Authorization": f"Bearer {ANA}"},
        timeout=30,
    )
    assert gone.status_code == 404
    # Bob's conversation was never shown, and is still there.
    assert [c["conversation_id"] for c in _call(server, "GET", "/v1/conversations", BOB)] == [
        "bobs-plans"
    ]

    # The facts, as the API has them once the page is done: the edited fact is current, its
    # old text superseded by it, the remembered seat dismissed.
    history = _call(server, "GET", "/v1/facts?include=superseded&include=dismissed")["facts"]
    by_id = {f["id"]: f for f in history}
    current = _call(server, "GET", "/v1/facts")["facts"]

    # Added through the form: listed first (newest), as added by hand; the form is cleared.
    added = report["factAdded"]
    assert added["status"] == f"Added: {NEW_FACT}"
    assert added["input"] == ""
    assert [(f["text"], f["status"]) for f in added["listed"]] == [
        (NEW_FACT, "current"),
        (SEAT, "current"),
    ]
    assert (added["listed"][0]["kind"], added["listed"][0]["origin"]) == ("preference", "api")
    assert added["listed"][0]["source"] == "no conversation"
    assert added["id"] in by_id
    # The same fact again adds nothing.
    again = report["factAgain"]
    assert again["status"] == f"Already known: {NEW_FACT}"
    assert [f["id"] for f in again["listed"]] == [f["id"] for f in added["listed"]]

    # Edited in place: cancelling keeps the text; saving keeps the id, with the new text and kind.
    edited = report["factEdited"]
    assert edited["editor"] == {"text": NEW_FACT, "kind": "preference"}
    assert edited["afterCancel"] == NEW_FACT
    assert edited["typedAfterReload"] == EDITED_FACT  # an open edit survives a list reload
    assert edited["id"] == added["id"]
    assert edited["status"] == f"Saved: {EDITED_FACT}"
    assert [(f["text"], f["kind"]) for f in edited["listed"]] == [
        (EDITED_FACT, "plan"),
        (SEAT, seeded[0]["kind"]),
    ]
    fact = by_id[added["id"]]
    assert (fact["text"], fact["kind"], fact["status"]) == (EDITED_FACT, "plan", "current")
    [old] = [f for f in history if f["text"] == NEW_FACT]
    assert (old["status"], old["superseded_by"], old["kind"]) == (
        "superseded",
        added["id"],
        "preference",
    )
    assert old["invalidated_at"] is not None

    # Deleted: asked first (cancelling keeps it), then dismissed, kept in the history.
    deleted = report["factDeleted"]
    assert deleted["id"] == seeded[0]["id"]
    assert "Delete" in deleted["question"]
    assert SEAT in deleted["question"]
    assert deleted["id"] in [f["id"] for f in deleted["afterCancel"]]
    assert [f["id"] for f in deleted["afterConfirm"]] == [added["id"]]
    assert deleted["status"] == f"Deleted: {SEAT}"
    assert by_id[deleted["id"]]["status"] == "dismissed"
    assert by_id[deleted["id"]]["invalidated_at"] is not None
    assert [f["id"] for f in current] == [added["id"]]

    # The history: the API's facts, current ones first, past ones marked with their status,
    # when they stopped holding and (superseded ones) the text that replaced them.
    shown_history = report["factHistory"]
    in_order = [f for f in history if f["status"] == "current"] + [
        f for f in history if f["status"] != "current"
    ]
    assert [(f["id"], f["status"], f["text"]) for f in shown_history] == [
        (f["id"], f["status"], f["text"]) for f in in_order
    ]
    shown = {f["id"]: f for f in shown_history}
    was = shown[old["id"]]
    assert (was["badge"], was["replacedBy"]) == ("superseded", f"replaced by: {EDITED_FACT}")
    assert was["until"].startswith("until ")
    assert was["buttons"] == []
    dismissed = shown[deleted["id"]]
    assert (dismissed["badge"], dismissed["replacedBy"]) == ("dismissed", None)
    assert dismissed["until"].startswith("until ")
    assert dismissed["buttons"] == []
    assert shown[added["id"]]["badge"] is None
    assert shown[added["id"]]["buttons"] == ["Edit", "Delete"]
    # Hidden again: the current facts only.
    assert [f["id"] for f in report["factsWithoutHistory"]] == [added["id"]]

    for shot in report["screenshots"]:
        assert Path(shot).stat().st_size > 0


# -- the new routes' bad input, in process ---------------------------------------------------


@pytest.fixture
async def client(tmp_path: Path) -> Any:
    settings = MemorySettings(
        data_dir=tmp_path,
        llm_fallback="off",
        ollama_base_url="http://127.0.0.1:9",
        api_keys={ANA: "ana"},
        metrics_api_key="key-metrics",
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://test", headers={"Authorization": f"Bearer {ANA}"}
        ) as http:
            yield http


@pytest.mark.parametrize(
    ("path", "fix"),
    [
        ("/v1/facts?limit=0", "greater than or equal to 1"),
        ("/v1/facts?limit=9999", "less than or equal to 1000"),
        ("/v1/facts?limit=many", "valid integer"),
        ("/v1/facts?conversation_id=no%20spaces!", "match pattern"),
    ],
)
async def test_bad_input_on_new_routes_says_what_to_fix(
    client: httpx.AsyncClient, path: str, fix: str
) -> None:
    response = await client.get(path)
    assert response.status_code == 422
    assert fix in response.text


async def test_new_routes_need_a_key(client: httpx.AsyncClient) -> None:
    for path in ("/v1/me", "/v1/facts", "/metrics"):
        response = await client.get(path, headers={"Authorization": "Bearer wrong"})
        assert response.status_code == 401, path
        assert "Authorization: Bearer" in response.json()["detail"]
    assert (await client.get("/v1/me")).json() == {"user_id": "ana", "keys_required": True}
    assert (await client.get("/v1/facts")).json() == {"facts": []}
    metrics = await client.get("/metrics", headers={"Authorization": "Bearer key-metrics"})
    assert metrics.status_code == 200


async def test_the_page_is_served_without_a_key_and_unknown_files_are_404(
    client: httpx.AsyncClient,
) -> None:
    page = await client.get("/ui/", headers={"Authorization": ""})
    assert page.status_code == 200
    assert "memory browser" in page.text
    for name in ("app.js", "style.css"):
        assert (await client.get(f"/ui/{name}")).status_code == 200
    missing = await client.get("/ui/nothing.js")
    assert missing.status_code == 404
    assert missing.json() == {"detail": "Not Found"}
