"""Three real ``memory-chain serve`` replicas on one PostgreSQL with pgvector, one of them
SIGKILLed and restarted again and again while clients chat through all three.

Six clients (one user each) send each message to the next replica in turn, resending their
history as OpenAI clients do; a replica that is down answers nothing, and the message goes
to the next one (see :mod:`tests.faults.replica_load`). Some conversations are purged after
a few messages, through another replica than the one that wrote last, and half of those are
written again under the same id. The fake Ollama in the test process answers at once and
takes ``SUMMARY_DELAY`` s per summary, so kills often land during a consolidation.

Afterwards, once every replica's queues are empty:

- each conversation's stored turns are exactly what its client was acknowledged, numbered
  1..N (a message resent after a kill was stored once);
- every stored turn is one point with its content, and was claimed for embedding by one live
  replica (a trigger logs every claim); only turns claimed by a killed replica were claimed
  again, and no point of a conversation never purged was written twice as a new row;
- summaries cover disjoint, consecutive ranges, and the summary calls the fake received per
  conversation are what one replica alone would make (one call for the first range, two for
  each next), plus at most the calls of one range per kill (a summary cut off by the kill);
  the chat calls are one per acknowledged message, plus at most one per request a kill cut
  off;
- no stale read: the prompt of every message holds the exchange acknowledged just before it,
  which another replica answered more often than not;
- nothing of a purged conversation is left in tier 3: no point, no fact (a conversation
  written again holds only its new turns).
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text

from memory_chain.tiers.sql import create_sql_engine, upgrade
from tests.conftest import _fresh_postgres_database
from tests.faults.chat import health, wait_for
from tests.faults.fake_llm import FakeOllama
from tests.faults.replica_load import TAG, Client, Incarnation
from tests.servers import RunningServer

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(600)]

#: A stored turn: user, conversation, number, role, content.
Turn = tuple[str, str, int, str, str]

REPLICAS = 3
CLIENTS = 6
KILLS = 3
#: Seconds of load before each kill of the third replica (it restarts at once).
LOAD_BEFORE_KILL = (8.0, 6.0, 6.0)
SUMMARY_DELAY = 0.4

#: Logs every claim on the embedding outbox, every point row inserted and every forget task
#: queued (test only).
TRIGGERS = """
CREATE TABLE test_claims (turn_id integer, worker text);
CREATE FUNCTION test_log_claim() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO test_claims VALUES (NEW.turn_id, NEW.claimed_by); RETURN NULL; END $$;
CREATE TRIGGER test_claim AFTER UPDATE OF claimed_by ON embedding_outbox FOR EACH ROW
  WHEN (NEW.claimed_by IS NOT NULL) EXECUTE FUNCTION test_log_claim();
CREATE TABLE test_inserts (collection text, id uuid);
CREATE FUNCTION test_log_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO test_inserts VALUES (NEW.collection, NEW.id); RETURN NULL; END $$;
CREATE TRIGGER test_insert AFTER INSERT ON vector_points FOR EACH ROW
  EXECUTE FUNCTION test_log_insert();
CREATE TABLE test_forgets (user_id text, conversation_id text);
CREATE FUNCTION test_log_forget() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO test_forgets VALUES (NEW.user_id, NEW.conversation_id); RETURN NULL; END $$;
CREATE TRIGGER test_forget AFTER INSERT ON vector_tasks FOR EACH ROW
  WHEN (NEW.kind = 'forget') EXECUTE FUNCTION test_log_forget();
"""


def _rows(engine: Engine, sql: str) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(text(sql)).all())


def _idle(engine: Engine, fake: FakeOllama) -> Callable[[], bool]:
    """Queues empty and no summary running or started for 2 s."""
    seen = {"summaries": -1, "since": time.monotonic()}

    def idle() -> bool:
        queued = _rows(
            engine,
            "SELECT (SELECT count(*) FROM embedding_outbox) + (SELECT count(*) FROM vector_tasks)",
        )[0][0]
        if len(fake.summary_starts) != seen["summaries"] or fake.summaries_in_flight:
            seen.update(summaries=len(fake.summary_starts), since=time.monotonic())
        return queued == 0 and time.monotonic() - seen["since"] > 2.0

    return idle


def test_three_replicas_with_one_killed_repeatedly_lose_repeat_and_resurrect_nothing(
    tmp_path: Path,
    postgres_url: str,
    fake_llm: FakeOllama,
    make_server: Callable[..., RunningServer],
) -> None:
    started = time.monotonic()
    url = _fresh_postgres_database(postgres_url)
    engine = create_sql_engine(url)
    upgrade(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql(TRIGGERS)
    fake_llm.summary_delay = SUMMARY_DELAY
    settings = {
        "database_url": url,
        "vector_backend": "pgvector",
        "log_level": "WARNING",
        "memory_tier2_summary_threshold": 6,
        "memory_tier1_keep_after_consolidation": 2,
    }
    servers = [make_server(tmp_path / f"r{n}", **settings).start() for n in range(REPLICAS)]
    for server in servers:
        with httpx.Client(base_url=server.url) as http:
            assert health(http)["tier3"]["backend"].startswith("pgvector")
    clients = [Client(n, [s.url for s in servers]) for n in range(CLIENTS)]
    stop, abort = threading.Event(), threading.Event()
    threads = [threading.Thread(target=c.run, args=(stop, abort), daemon=True) for c in clients]
    load_started = time.monotonic()
    for thread in threads:
        thread.start()
    victim, killed_pids, restarts = servers[-1], [], []
    try:
        for wait in LOAD_BEFORE_KILL:
            time.sleep(wait)
            assert victim.process is not None
            killed_pids.append(victim.process.pid)
            victim.kill()
            begin = time.monotonic()
            victim.start()
            restarts.append(time.monotonic() - begin)
        time.sleep(3.0)
        stop.set()
        for thread in threads:
            thread.join(120)
            assert not thread.is_alive(), "a client did not get its last message answered"
        load_seconds = time.monotonic() - load_started
        wait_for(_idle(engine, fake_llm), 120, "every replica's queues and summaries to finish")
    finally:
        abort.set()
    incarnations = [i for c in clients for i in c.incarnations]
    purges = [seconds for c in clients for seconds in c.purge_seconds]
    exchanges = sum(len(i.exchanges) for i in incarnations)
    assert all(not c.http_errors for c in clients), [c.http_errors[:3] for c in clients]

    live = {i.tag: i for i in incarnations if not i.purged and i.exchanges}
    current = {(i.user, i.conversation): i for i in live.values()}
    turns = _check_turns(engine, current)
    redone = _check_points(engine, current, turns, killed_pids, incarnations)
    extra_calls = _check_summaries(engine, fake_llm, current)
    cross = _check_no_stale_read(fake_llm, incarnations)
    failed = sum(c.failed_requests for c in clients)
    cut_off = sum(c.cut_off for c in clients)
    # One chat call per acknowledged message, as one replica would make, plus at most one
    # per request cut off by a kill (its replica may have called the model before dying).
    assert exchanges <= fake_llm.chats <= exchanges + cut_off, (fake_llm.chats, exchanges)
    print(
        f"{time.monotonic() - started:.0f} s in all, {load_seconds:.0f} s of load: "
        f"{exchanges} exchanges acknowledged ({exchanges / load_seconds:.1f}/s over 3 replicas, "
        f"{cross} answered by another replica than the previous message), "
        f"{failed} requests failed over ({cut_off} cut off by a kill), "
        f"{fake_llm.chats} chat calls; "
        f"{KILLS} kills, restarts {min(restarts):.1f}-{max(restarts):.1f} s; "
        f"{len(turns)} turns and points, {redone} turns embedded again after a kill; "
        f"{sum(i.purged for i in incarnations)} purged ({_raced(engine)} while a batch of "
        "theirs was in flight on a replica, forgotten again when it settled; a purge took "
        f"{_median(purges):.2f} s, at most {max(purges):.2f} s); "
        f"{len(fake_llm.summary_starts)} summary calls ({extra_calls} cut off by a kill)"
    )
    engine.dispose()


def _check_turns(engine: Engine, current: dict[tuple[str, str], Incarnation]) -> dict[int, Turn]:
    """Stored turns are exactly what the clients were acknowledged; returns them by row id."""
    rows = _rows(
        engine,
        "SELECT t.id, c.user_id, t.conversation_id, t.turn_number, t.role, t.content "
        "FROM conversation_turns t JOIN conversations c USING (conversation_id) "
        "ORDER BY t.conversation_id, t.turn_number",
    )
    stored: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for row in rows:
        stored[(row.user_id, row.conversation_id.split("/", 1)[1])].append(row)
    assert set(stored) == set(current), "purged conversations left rows, or rows are missing"
    for key, incarnation in current.items():
        said = [(m["role"], m["content"]) for m in incarnation.history()]
        assert [(r.role, r.content) for r in stored[key]] == said, key
        assert [r.turn_number for r in stored[key]] == list(range(1, len(said) + 1)), key
    return {
        r.id: (r.user_id, r.conversation_id.split("/", 1)[1], r.turn_number, r.role, r.content)
        for r in rows
    }


def _check_points(
    engine: Engine,
    current: dict[tuple[str, str], Incarnation],
    turns: dict[int, Turn],
    killed_pids: list[int],
    incarnations: list[Incarnation],
) -> int:
    """One point per turn, one live claim per turn, nothing of a purge left; turns redone."""
    points = _rows(
        engine,
        "SELECT collection, id, user_id, conversation_id, turn_number, content FROM vector_points",
    )
    by_turn = Counter(
        (p.user_id, p.conversation_id, p.turn_number, p.content)
        for p in points
        if p.collection == "conversation_memory"
    )
    assert by_turn == Counter((u, c, n, content) for u, c, n, _role, content in turns.values())
    # Facts live in tier 2 (a user saying one again adds no row, hence the sets).
    facts = {
        (row.user_id, row.conversation_id, row.text)
        for row in _rows(engine, "SELECT user_id, conversation_id, text FROM facts")
    }
    remembered = {
        (u, c, content.split("Please remember this: ", 1)[1])
        for u, c, _n, role, content in turns.values()
        if role == "user" and "Please remember this: " in content
    }
    assert facts <= remembered  # none of a purged conversation
    # Every surviving request is a fact, except one whose words the user had said before in a
    # conversation since purged: the fact was filed there once (the same fact adds no row)
    # and went with that conversation (a known gap: a fact keeps one source).
    filed = {(u, text) for u, _c, text in facts}
    missing = {(u, text) for u, _c, text in remembered} - filed
    assert len(missing) <= max(1, len(remembered) // 20), missing
    # Claims: every turn of a conversation never purged was claimed by one live replica.
    never_purged = {
        (i.user, i.conversation) for i in incarnations if i.number == 1 and not i.purged
    }
    dead = tuple(f":{pid}:" for pid in killed_pids)
    claims: dict[int, list[str]] = defaultdict(list)
    for row in _rows(engine, "SELECT turn_id, worker FROM test_claims"):
        claims[row.turn_id].append(row.worker)
    redone = 0
    for turn_id, (user, conversation, number, _role, _content) in turns.items():
        if (user, conversation) not in never_purged:
            continue
        workers = claims[turn_id]
        alive = [w for w in workers if not any(d in w for d in dead)]
        where = (user, conversation, number, workers)
        assert workers, where  # embedded through a claim
        assert len(alive) <= 1, where  # by one live replica
        assert len(workers) == 1 or len(alive) < len(workers), where  # again only after a kill
        redone += len(workers) > 1
    inserted = Counter(
        row.id
        for row in _rows(
            engine, "SELECT id FROM test_inserts WHERE collection = 'conversation_memory'"
        )
    )
    never = {
        p.id
        for p in points
        if (p.user_id, p.conversation_id) in never_purged and p.collection == "conversation_memory"
    }
    assert {i: inserted[i] for i in never if inserted[i] != 1} == {}
    return redone


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2] if values else 0.0


def _raced(engine: Engine) -> int:
    """Purged conversations forgotten more than once: the purge queued one forget, a batch
    settled after the purge another."""
    forgets = Counter(tuple(row) for row in _rows(engine, "SELECT * FROM test_forgets"))
    return sum(count > 1 for count in forgets.values())


def _check_summaries(
    engine: Engine, fake: FakeOllama, current: dict[tuple[str, str], Incarnation]
) -> int:
    """Disjoint consecutive ranges; calls as one replica alone would make, plus kills'."""
    ranges: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for row in _rows(
        engine,
        "SELECT c.user_id, s.conversation_id, s.turn_range_start, s.turn_range_end "
        "FROM conversation_summaries s JOIN conversations c USING (conversation_id) "
        "ORDER BY s.conversation_id, s.turn_range_start",
    ):
        key = (row.user_id, row.conversation_id.split("/", 1)[1])
        ranges[key].append((row.turn_range_start, row.turn_range_end))
    for key, spans in ranges.items():
        ends = [0] + [end for _start, end in spans[:-1]]
        assert [start for start, _end in spans] == [end + 1 for end in ends], (key, spans)
    calls: Counter[str] = Counter()
    for messages in fake.summary_messages:
        tags = {m.group(0)[1:-1] for msg in messages for m in TAG.finditer(str(msg.get("content")))}
        assert len(tags) == 1, tags  # one conversation per summary request
        calls[tags.pop()] += 1
    extra = 0
    for key, incarnation in current.items():
        count = len(ranges.get(key, []))
        expected = 2 * count - 1 if count else 0
        assert calls[incarnation.tag] >= expected, (key, calls[incarnation.tag], count)
        extra += calls[incarnation.tag] - expected
    assert extra <= 2 * KILLS, f"{extra} summary calls more than one replica would make"
    return extra


def _check_no_stale_read(fake: FakeOllama, incarnations: list[Incarnation]) -> int:
    """Each message's prompt holds the exchange before it; how many crossed replicas."""
    prompts: dict[str, list[list[str]]] = defaultdict(list)
    for messages in fake.chat_messages:
        said = [str(m.get("content", "")) for m in messages if m.get("role") != "system"]
        if said:
            prompts[said[-1]].append(said)
    crossed = 0
    for incarnation in incarnations:
        for before, exchange in zip(incarnation.exchanges, incarnation.exchanges[1:], strict=False):
            assert prompts[exchange.text], exchange.text
            for said in prompts[exchange.text]:
                assert before.text in said, (exchange.text, said[-4:])
                assert before.reply in said, (exchange.text, said[-4:])
            crossed += before.replica != exchange.replica
    return crossed
