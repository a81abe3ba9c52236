"""Leave-one-conversation-out cross-validation of the fusion weights on a LoCoMo file.

Tuning retrieval on the conversations it is then measured on overstates its recall. Here each
conversation is held out in turn: the weights (:class:`~memory_chain.retrieval.FusionWeights`)
that do best on the other conversations (the sum of Recall@k over every k) are chosen from a
grid, and the held-out conversation is measured with them. The held-out figures, pooled over
questions, are what to expect on conversations nobody tuned on; the report also gives, for
every mode, which weights each fold chose (weights that differ between folds are a sign of
overfitting) and the whole file ranked with the shipped defaults.

A fold of a few dozen questions moves by one question's worth of recall (over a point) with
any change, so the hybrid is also compared with each other mode question by question: per
fold and k, on how many questions its held-out recall is higher and on how many lower, and
the two-sided sign test of those counts (:func:`sign_test`). A fold where a mode is behind
by a few questions at a p of 0.5 is not evidence that it is worse there.

Every mode is measured the same way: ``hybrid`` tunes every weight, ``keyword`` only the time
bonus, ``dense`` every weight but the keyword one. Candidates are gathered once per question
(the same :meth:`MemorySearch.gather <memory_chain.retrieval.MemorySearch.gather>` a chat
uses) and ranked under each grid point, so a run costs one evaluation plus the ranking.

- :mod:`.folds`: the grids, each fold's choice, the held-out recall, the sign test;
- :mod:`.run`: a run on a LoCoMo file (:func:`cross_validate_locomo`);
- :mod:`.report`: what a run measured, as JSON and as plain-text tables.

Example:
    >>> report = cross_validate_locomo("locomo-dev.json")  # doctest: +SKIP
    >>> report.held_out["hybrid"].recall[10]
    76.9
"""

from memory_chain.eval.crossval.folds import (
    GRIDS,
    Asked,
    FoldResult,
    Paired,
    fold_choices,
    sign_test,
)
from memory_chain.eval.crossval.report import CrossValReport, format_crossval
from memory_chain.eval.crossval.run import Timings, cross_validate_locomo, gather_questions

__all__ = [
    "GRIDS",
    "Asked",
    "CrossValReport",
    "FoldResult",
    "Paired",
    "Timings",
    "cross_validate_locomo",
    "fold_choices",
    "format_crossval",
    "gather_questions",
    "sign_test",
]
