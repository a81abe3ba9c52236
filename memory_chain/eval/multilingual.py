"""A small multilingual probe of an embedding model: Portuguese and German questions.

Memory is searched in the user's language. Each pair below is a question and the chat turn
that answers it, written by hand in the same language and worded differently (few shared
words, so the embedding has to understand rather than match). :func:`probe` embeds every
turn as a stored document and every question as a query, and counts how often the turn that
answers a question is the most similar of all the turns (accuracy at 1) and among the first
three, per language. English pairs of the same kind are the control.

Example:
    >>> result = probe(build_embeddings(MemorySettings()))  # doctest: +SKIP
    >>> result.top1["pt"], result.top1["en"]
    (0.5, 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from langchain_core.embeddings import Embeddings

#: (language, question, the turn that answers it).
PAIRS: tuple[tuple[str, str, str], ...] = (
    ("pt", "Onde é que a Ana mora agora?", "user: Mudámo-nos para o Porto no mês passado."),
    ("pt", "Qual é o nome do meu cão?", "user: O Bolinhas adora correr na praia de manhã."),
    ("pt", "Quando é o aniversário da minha mãe?", "user: A mãe faz anos a 12 de março."),
    ("pt", "Que desporto pratico ao fim de semana?", "user: Aos sábados jogo futebol."),
    ("pt", "Em que trabalha o meu irmão?", "user: O Rui é enfermeiro no hospital."),
    ("pt", "Que comida não posso comer?", "user: Sou alérgico a amendoins."),
    ("pt", "Para onde vamos de férias?", "user: Reservámos uma semana nos Açores em julho."),
    ("pt", "Que instrumento estou a aprender?", "user: Comecei aulas de guitarra."),
    ("de", "Wo wohnt Jonas jetzt?", "user: Wir sind letzten Monat nach Hamburg gezogen."),
    ("de", "Wie heißt meine Katze?", "user: Minka schläft den ganzen Tag auf dem Sofa."),
    ("de", "Wann hat meine Schwester Geburtstag?", "user: Lena feiert am 4. Juni."),
    ("de", "Welchen Sport mache ich am Wochenende?", "user: Samstags gehe ich klettern."),
    ("de", "Was ist der Beruf meines Vaters?", "user: Papa arbeitet als Tischler."),
    ("de", "Was darf ich nicht essen?", "user: Ich vertrage keine Laktose."),
    ("de", "Wohin fahren wir im Urlaub?", "user: Wir haben zwei Wochen in Kroatien gebucht."),
    ("de", "Welches Instrument lerne ich?", "user: Ich nehme seit Kurzem Klavierstunden."),
    ("en", "Where does Sam live now?", "user: We moved to Leeds last month."),
    ("en", "What is my dog called?", "user: Biscuit loves running on the beach."),
    ("en", "When is my mother's birthday?", "user: Mum turns 60 on 12 March."),
    ("en", "Which sport do I play at weekends?", "user: On Saturdays I go bouldering."),
    ("en", "What does my brother do for a living?", "user: Tom works as a nurse."),
    ("en", "What food must I avoid?", "user: I'm allergic to peanuts."),
    ("en", "Where are we going on holiday?", "user: We booked a week in Crete in July."),
    ("en", "Which instrument am I learning?", "user: I started guitar lessons."),
)


@dataclass(frozen=True)
class ProbeResult:
    """Per language: the share of questions whose answer is first (``top1``), in the top 3."""

    top1: dict[str, float]
    top3: dict[str, float]


def probe(embeddings: Embeddings, pairs: tuple[tuple[str, str, str], ...] = PAIRS) -> ProbeResult:
    """Accuracy at 1 and 3 of ``embeddings`` on ``pairs``, per language (see the module)."""
    turns = np.asarray(embeddings.embed_documents([turn for _, _, turn in pairs]))
    top1: dict[str, list[bool]] = {}
    top3: dict[str, list[bool]] = {}
    for index, (language, question, _) in enumerate(pairs):
        cosines = turns @ np.asarray(embeddings.embed_query(question))
        order = list(np.argsort(-cosines))
        top1.setdefault(language, []).append(order[0] == index)
        top3.setdefault(language, []).append(index in order[:3])
    return ProbeResult(
        {language: float(sum(hits)) / len(hits) for language, hits in top1.items()},
        {language: float(sum(hits)) / len(hits) for language, hits in top3.items()},
    )
