"""Moving turns from tier 2 into tier 3: backfill from the outbox, queued tasks, and reindex.

:class:`TurnIndexer` takes queued turns from the embedding outbox in batches, embeds them in
one forward pass per batch, upserts their points (deterministic ids, so a repeated batch
overwrites rather than duplicates), and removes them from the outbox only once the index is
flushed (:meth:`TurnIndexer.settle`). If the vector store is down, the batch stays queued and
the next run embeds it.

Before each batch the indexer does the tier-3 tasks queued in tier 2
(:mod:`memory_chain.tiers.sql.tasks`), oldest first: the points of purged conversations are
deleted, and payloads refreshed once a range is summarized. A task stays queued until the
vector store has done it, and no new turn is embedded while a task fails, so a deletion is
never overtaken by the embedding of a turn written after it.

Several replicas run an indexer each on one database: turns and tasks are claimed, so each
is worked on by one indexer at a time (:mod:`memory_chain.tiers.sql.claims`), and a replica
that dies leaves its claims to expire. A conversation purged while one of its turns was
being embedded is caught when the batch is settled (the turn is gone): a ``forget`` is queued
again, so the point written after the purge's own deletion is deleted too.

Example:
    >>> indexer = TurnIndexer(outbox, index, embeddings)  # doctest: +SKIP
    >>> indexer.drain()  # embed everything queued  # doctest: +SKIP
    42
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from langchain_core.embeddings import Embeddings

from memory_chain.errors import MemoryChainError
from memory_chain.schemas import CUT, Turn
from memory_chain.tiers.sql.outbox import EmbeddingOutbox, PendingTurn
from memory_chain.tiers.sql.tasks import VectorTask, VectorTasks
from memory_chain.tiers.vectors.index import (
    TurnPayload,
    VectorFilter,
    VectorIndex,
    VectorPoint,
    chunk_point_id,
    point_id,
)
from memory_chain.tiers.vectors.tags import turn_tags

logger = logging.getLogger(__name__)

#: Called after each batch with (turns done so far, turns queued when the run started).
Progress = Callable[[int, int], None]


def _covering(summaries: list[tuple[int, int, str]], turn_number: int) -> str | None:
    for start, end, text in summaries:
        if start <= turn_number <= end:
            return text
    return None


def embedding_text(turn: Turn) -> str:
    """The text embedded for a turn: its role and content."""
    return f"{turn.role}: {turn.content}"


#: Words per part of a long turn: the embedding model reads 256 word pieces (about 190
#: English words), so a longer turn is indexed in parts, each a point of its own.
CHUNK_WORDS = 150
#: Words each part repeats of the one before (a detail at a border is whole in one of them).
CHUNK_OVERLAP = 30


def chunks_of(text: str) -> list[str]:
    """The parts after the first of a long text (none for a text the model reads whole).

    The first part is the turn's own point (its embedding reads the start); each further
    part is :data:`CHUNK_WORDS` words, overlapping the one before by :data:`CHUNK_OVERLAP`,
    marked with :data:`CUT` where text was left out.
    """
    words = text.split()
    if len(words) <= CHUNK_WORDS + CHUNK_OVERLAP:
        return []
    step = CHUNK_WORDS - CHUNK_OVERLAP
    parts = []
    for start in range(step, len(words) - CHUNK_OVERLAP, step):
        end = min(start + CHUNK_WORDS, len(words))
        tail = "" if end == len(words) else f" {CUT}"
        parts.append(f"{CUT} {' '.join(words[start:end])}{tail}")
    return parts


def payload_of(pending: PendingTurn) -> TurnPayload:
    """The tier-3 payload of a queued turn: its row, its range's summary, its tags."""
    turn = pending.turn
    return TurnPayload(
        conversation_id=turn.conversation_id,
        user_id=pending.user_id,
        turn_number=turn.turn_number,
        role=turn.role,
        content=turn.content,
        timestamp=turn.timestamp,
        tokens=turn.tokens.total if turn.tokens else None,
        summary=pending.summary,
        tags=turn_tags(turn.role, turn.content),
    )


class TurnIndexer:
    """Embeds queued turns into a vector index.

    Args:
        outbox: The tier-2 embedding outbox.
        index: The tier-3 index (opened by the caller).
        embeddings: The embedding model.
        batch_size: Turns per embedding batch.
        text_of: What text of a turn is embedded.
        flush_interval: Least seconds between two background settles while turns keep
            coming (the worker settles sooner once they stop).
        tasks: The tier-3 task queue (default: the outbox's store's).
        bulk_embeddings: The embedding model of bulk drains (``drain(bulk=True)``: an
            import, a reindex), typically the same model on every core (default:
            ``embeddings``). Its vectors must be those of ``embeddings``.
        bulk_batch_size: Turns per batch of a bulk drain (more turns per call let the
            model sort them by length and keep every core busy).
    """

    def __init__(
        self,
        outbox: EmbeddingOutbox,
        index: VectorIndex,
        embeddings: Embeddings,
        *,
        batch_size: int = 64,
        text_of: Callable[[Turn], str] = embedding_text,
        flush_interval: float = 10.0,
        tasks: VectorTasks | None = None,
        bulk_embeddings: Embeddings | None = None,
        bulk_batch_size: int = 256,
    ) -> None:
        self.outbox = outbox
        self.tasks = (
            tasks if tasks is not None else VectorTasks(outbox.database, claimant=outbox.claimant)
        )
        self.index = index
        self.embeddings = embeddings
        self.batch_size = batch_size
        self.bulk_embeddings = bulk_embeddings if bulk_embeddings is not None else embeddings
        self.bulk_batch_size = bulk_batch_size
        self.text_of = text_of
        self.flush_interval = flush_interval
        # Embedded but not yet flushed: still queued (and claimed) in SQL, skipped by the
        # next batches.
        self._unsettled: list[PendingTurn] = []
        self._last_flush = time.monotonic()
        # One drain at a time per process: two would embed the same batch twice.
        self._lock = threading.RLock()
        # Set at shutdown: a drain stops after its current batch (the rest stays queued).
        self.halted = threading.Event()

    def open(self) -> None:
        """Open (or create) the collections this indexer fills."""
        self.index.open()

    def close(self) -> None:
        """Close the collections this indexer fills."""
        self.index.close()

    def warm_up(self) -> None:
        """Load the embedding model now, so that the first batch does not wait for it."""
        self.embeddings.embed_query("warm up")

    @property
    def unsettled(self) -> int:
        """Turns embedded but not settled yet (still queued in the outbox)."""
        return len(self._unsettled)

    def embed_batch(self, batch: list[PendingTurn], *, bulk: bool = False) -> None:
        """Embed and store one batch; it is settled in the outbox by :meth:`settle`.

        A long turn gets a point per part (:func:`chunks_of`), each pointing to the same
        turn, so a detail in its middle is found; the turn's own point keeps its whole text.
        With ``bulk`` the batch is embedded by ``bulk_embeddings``.
        """
        texts: list[str] = []
        points: list[tuple[str, TurnPayload]] = []
        for p in batch:
            turn, payload = p.turn, payload_of(p)
            texts.append(self.text_of(turn))
            points.append((point_id(p.user_id, turn.conversation_id, turn.turn_number), payload))
            for number, part in enumerate(chunks_of(turn.content), start=1):
                texts.append(self.text_of(replace(turn, content=part)))
                part_id = chunk_point_id(p.user_id, turn.conversation_id, turn.turn_number, number)
                points.append((part_id, replace(payload, content=part)))
        embeddings = self.bulk_embeddings if bulk else self.embeddings
        vectors = embeddings.embed_documents(texts)
        self.index.upsert(
            [
                VectorPoint(id=id_, vector=vector, payload=payload)
                for (id_, payload), vector in zip(points, vectors, strict=True)
            ]
        )
        self._unsettled.extend(batch)

    def settle(self, *, force: bool = True) -> int:
        """Flush the index, then remove the embedded turns from the outbox.

        A flush costs 20-200 ms whatever the batch size (and holds the GIL on the embedded
        engine), so while turns keep coming the background worker settles at most every
        ``flush_interval`` seconds (``force=False``). Until then the turns stay queued:
        after a crash they are embedded again (same point ids), never lost.

        Returns:
            How many turns were settled.
        """
        with self._lock:
            if not self._unsettled:
                return 0
            if not force and time.monotonic() - self._last_flush < self.flush_interval:
                return 0
            self.index.flush()
            self.outbox.done(self._unsettled)
            settled = len(self._unsettled)
            self._unsettled = []
            self._last_flush = time.monotonic()
            return settled

    def drain(
        self,
        *,
        limit: int | None = None,
        progress: Progress | None = None,
        settle: bool = True,
        bulk: bool = False,
    ) -> int:
        """Embed queued turns until the outbox is empty (or ``limit`` turns are done).

        Args:
            limit: Most turns to embed.
            progress: Called after each batch with (done, total).
            settle: Flush and settle everything at the end; with ``False`` only when
                ``flush_interval`` has passed (the background worker's choice).
            bulk: Embed in batches of ``bulk_batch_size`` with ``bulk_embeddings`` (every
                core): for a caller that waits for the whole queue (an import, a reindex),
                not for the background worker, which shares the CPU with chat requests.

        Returns:
            How many turns were embedded.

        Raises:
            VectorStoreUnavailableError: If the vector store is down; what was not embedded
                stays queued.
        """
        with self._lock:
            total = self.outbox.count() if progress is not None else 0
            done = 0
            while (limit is None or done < limit) and not self.halted.is_set():
                self.apply_tasks()
                most = self.bulk_batch_size if bulk else self.batch_size
                size = most if limit is None else min(most, limit - done)
                working = [pending.turn_id for pending in self._unsettled]
                batch = self.outbox.claim(size, exclude=working)
                if not batch:
                    break
                self.embed_batch(batch, bulk=bulk)
                done += len(batch)
                self.settle(force=False)
                if progress is not None:
                    progress(done, max(total, done))
            if settle:
                self.settle()
            return done

    def reindex(
        self,
        *,
        user_id: str | None = None,
        conversation_id: str | None = None,
        progress: Progress | None = None,
    ) -> int:
        """Rebuild tier 3 from tier 2: everything, one user's, or one conversation's turns.

        Points in scope are removed (the whole collection when no scope is given), every
        turn in scope is queued again, and the queue is drained.

        Returns:
            How many turns were embedded.
        """
        if user_id is None and conversation_id is None:
            self.index.drop()
            self.index.open()
        else:
            self.index.delete(VectorFilter(user_id=user_id, conversation_id=conversation_id))
        queued = self.outbox.enqueue(user_id=user_id, conversation_id=conversation_id)
        logger.info("reindex: %d turns queued", queued)
        return self.drain(progress=progress, bulk=True)

    def apply_tasks(self) -> int:
        """Do the queued tier-3 tasks, oldest first (each is removed once done).

        Returns:
            How many tasks were done.

        Raises:
            VectorStoreError: If the vector store fails; that task and the later ones stay
                queued.
        """
        done = 0
        with self._lock:
            while not self.halted.is_set():
                tasks = self.tasks.claim(100)
                if not tasks:
                    break
                for task in tasks:
                    self._apply(task)
                    self.tasks.done([task])
                    done += 1
        return done

    def _apply(self, task: VectorTask) -> None:
        if task.kind == "refresh":
            self._refresh(task)
            return
        # forget: settle first, so that no embedded turn of the scope is settled after its
        # point is deleted; then delete; then queue the turns stored in the scope now (a
        # conversation created again under the same id since the purge), which the deletion
        # just removed as well.
        self.settle()
        scope = VectorFilter(user_id=task.user_id, conversation_id=task.conversation_id)
        self.index.delete(scope)
        self.outbox.enqueue(user_id=task.user_id, conversation_id=task.conversation_id)

    def _refresh(self, task: VectorTask) -> None:
        """Rewrite the payloads of a turn range (its summary) on the points it has already."""
        if task.conversation_id is None or task.turns is None:
            return
        first, last = task.turns
        ids = tuple(point_id(task.user_id, task.conversation_id, n) for n in range(first, last + 1))
        where = VectorFilter(user_id=task.user_id, conversation_id=task.conversation_id, ids=ids)
        points = list(self.index.scroll(where))
        if not points:
            return  # not embedded yet: the backfill reads the summary when it embeds them
        summaries = self.tasks.summaries(task.user_id, task.conversation_id)
        self.index.upsert(
            [
                VectorPoint(
                    id=point.id,
                    vector=point.vector,
                    payload=replace(
                        point.payload, summary=_covering(summaries, point.payload.turn_number)
                    ),
                )
                for point in points
            ]
        )

    def try_drain(self) -> int:
        """:meth:`drain`, logging instead of raising (for background loops)."""
        try:
            return self.drain()
        except MemoryChainError as exc:
            logger.warning("tier-3 backfill postponed, turns stay queued: %s", exc)
            return 0
