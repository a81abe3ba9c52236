"""Reconciling a client's history with the stored turns (the plan; the core applies it)."""

from __future__ import annotations

from memory_chain.chat.reconcile import Said, plan_history


def _history(*pairs: tuple[str, str]) -> list[Said]:
    return [Said(role, text) for role, text in pairs]


STORED = _history(("user", "a"), ("assistant", "A"), ("user", "b"), ("assistant", "B"))


def test_plan_in_sync_appends() -> None:
    assert plan_history([], [], 0, "a").action == "append"
    assert plan_history(STORED, STORED, 4, "c").action == "append"
    spaced = _history(("user", " a "), ("assistant", "A\n"), ("user", "b"), ("assistant", "B"))
    assert plan_history(spaced, STORED, 4, "c").action == "append"


def test_plan_imports_what_the_server_lacks() -> None:
    plan = plan_history(STORED, STORED[:2], 2, "c")
    assert plan.action == "import"
    assert plan.missing == tuple(STORED[2:])
    assert plan_history(STORED, [], 0, "c").missing == tuple(STORED)


def test_plan_recognizes_a_repeat_of_the_last_exchange() -> None:
    assert plan_history(STORED[:2], STORED, 4, "b").action == "repeat"
    assert plan_history([], STORED[:2], 2, "a").action == "repeat"
    # Only the last four stored turns are passed when the server has more than the client.
    assert plan_history(STORED[:2], STORED[-4:], 10, "b").action == "repeat"


def test_plan_retries_a_stored_unanswered_message() -> None:
    unanswered = [*STORED, Said("user", "c")]
    assert plan_history(STORED, unanswered, 5, "c").action == "retry"
    assert plan_history(STORED, unanswered, 5, " c ").action == "retry"
    assert plan_history([], unanswered[:1], 1, "a").action == "retry"
    assert plan_history(STORED, unanswered[-4:], 9, "c").action == "retry"
    # Another message after the unanswered one: the history diverged (it lacks "c").
    assert plan_history(STORED, unanswered, 5, "d").action == "diverged"


def test_plan_diverged_histories_store_only_the_new_exchange() -> None:
    edited = _history(("user", "a"), ("assistant", "A"), ("user", "b2"), ("assistant", "B2"))
    assert plan_history(edited, STORED, 4, "c").action == "diverged"
    assert plan_history(STORED[:2], STORED, 4, "b2").action == "diverged"  # an edit
    assert plan_history([], STORED, 4, "b").action == "diverged"  # newest-message-only client
    assert plan_history([], STORED, 4, "hello").action == "diverged"
