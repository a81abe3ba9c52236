"""The Qdrant backend's payload: the indexes it keeps, and our filters in qdrant-client's types.

The turn payload (:class:`~.index.TurnPayload`) is stored as it is; the fields a search
filters on are indexed (:data:`PAYLOAD_INDEXES`, on a server only: the local modes have no
payload indexes), and a :class:`~.index.VectorFilter` becomes a ``models.Filter`` whose
conditions must all hold (:func:`to_filter`).
"""

from __future__ import annotations

from qdrant_client import models

from memory_chain.tiers.vectors.index import HasIds, Match, VectorFilter, filter_conditions

#: The payload indexes of a collection, by field.
PAYLOAD_INDEXES: dict[str, models.PayloadSchemaType | models.KeywordIndexParams] = {
    # A tenant index keeps each conversation's points together on the server.
    "conversation_id": models.KeywordIndexParams(
        type=models.KeywordIndexType.KEYWORD, is_tenant=True
    ),
    "user_id": models.PayloadSchemaType.KEYWORD,
    "role": models.PayloadSchemaType.KEYWORD,
    "tags": models.PayloadSchemaType.KEYWORD,
    "timestamp": models.PayloadSchemaType.DATETIME,
}


def to_filter(where: VectorFilter | None) -> models.Filter | None:
    """``where`` as a Qdrant filter (``None`` when it selects every point)."""
    must: list[models.Condition] = []
    for condition in filter_conditions(where):
        if isinstance(condition, Match):
            values = list(condition.values)
            match: models.MatchValue | models.MatchAny = (
                models.MatchValue(value=values[0])
                if len(values) == 1
                else models.MatchAny(any=values)
            )
            must.append(models.FieldCondition(key=condition.key, match=match))
        elif isinstance(condition, HasIds):
            must.append(models.HasIdCondition(has_id=list(condition.ids)))
        else:
            window = models.DatetimeRange(gte=condition.gte, lte=condition.lte)
            must.append(models.FieldCondition(key=condition.key, range=window))
    return models.Filter(must=must) if must else None
