"""The report of ``bench_updates.py``: each scenario's counts and verdict, the table, the traces.

:func:`score` counts what a scenario's result holds (``bench_updates.run_scenario`` calls it on
each); :func:`report` prints the run: a row per scenario, what happened in those that did not
pass, the goals' verdicts and the answers to the last probe.
"""

from __future__ import annotations

from typing import Any

from harness import goal_line, summarize, verdict


def score(result: dict[str, Any]) -> None:
    """The scenario's counts, and whether it passed."""
    probes = [step["probe"] for step in result["steps"]]
    retired = {(f["text"], f["status"]) for p in probes for f in p["retired_in_facts"]}
    stale = {item["expect"] for p in probes for item in p["stale_in_facts"]}
    elsewhere = {(f["text"], f["status"]) for p in probes for f in p["retired_elsewhere"]}
    noted = {(f["text"], f["status"]) for p in probes for f in p.get("retired_noted", [])}
    ranges = [r for step in result["steps"] for r in step["ranges"]]
    result["counts"] = {
        "stale_current": len(result.get("stale_current", [])),
        "retired_in_prompt": len(retired),
        "stale_in_prompt": len(stale),
        "retired_elsewhere": len(elsewhere),
        "retired_noted": len(noted - elsewhere),
        "ranges": len(ranges),
        "facts_extracted": sum(len(r["facts"]) for r in ranges),
        "extraction_failures": sum(s["extraction_failures"] for s in result["steps"]),
        "saved": sum(len(s["requests"]["saved"]) for s in result["steps"]),
        "dismissed": sum(len(s["requests"]["dismissed"]) for s in result["steps"]),
    }
    counts = result["counts"]
    result["passed"] = (
        result["error"] is None
        and result.get("missing", 1) == 0
        and counts["stale_current"] + counts["retired_in_prompt"] + counts["stale_in_prompt"] == 0
    )


#: The table's count columns: heading, its second line, width, count.
COLUMNS = (
    ("stale", "curr.", 5, "stale_current"),
    ("retired", "prompt", 7, "retired_in_prompt"),
    ("stale", "prompt", 6, "stale_in_prompt"),
    ("elsewh.", "(info)", 7, "retired_elsewhere"),
    ("ranges", "", 6, "ranges"),
    ("facts", "found", 5, "facts_extracted"),
    ("failed", "", 6, "extraction_failures"),
    ("saved", "", 5, "saved"),
    ("forgot", "", 6, "dismissed"),
)


def table(results: list[dict[str, Any]]) -> list[str]:
    """One row per scenario."""
    first = f"  {'scenario':<22} {'kind':<8} {'result':<6} {'current':>7} "
    first += " ".join(f"{head:>{width}}" for head, _, width, _ in COLUMNS) + f" {'seconds':>7}"
    second = f"  {'':<38} {'found':>7} " + " ".join(f"{h:>{w}}" for _, h, w, _ in COLUMNS)
    rows = [first, second]
    for r in results:
        wanted = len(r.get("expected", []))
        found = f"{wanted - r.get('missing', wanted)}/{wanted}"
        outcome = "pass" if r["passed"] else ("ERROR" if r["error"] else "FAIL")
        counts = " ".join(f"{r['counts'][key]:>{width}}" for _, _, width, key in COLUMNS)
        head = f"  {r['name']:<22} {r['kind']:<8} {outcome:<6} {found:>7}"
        rows.append(f"{head} {counts} {r['seconds']:>7.1f}")
    return rows


def trace(result: dict[str, Any]) -> list[str]:
    """What happened in a scenario that did not pass, conversation by conversation."""
    lines = [f"\n{result['name']} ({result['kind']}, {result['topic']}):"]
    if result["error"]:
        lines.append(f"  error: {result['error']}")
    for number, step in enumerate(result["steps"], 1):
        asked = step["requests"]
        done = [f"saved {t!r}" for t in asked["saved"]]
        done += [f"dismissed {t!r}" for t in asked["dismissed"]]
        took = f" ({step['seconds']:.0f} s)" if "seconds" in step else ""
        lines.append(f"  c{number}{took} requests: {'; '.join(done) or 'none'}")
        if step["consolidation_error"]:
            lines.append(f"  c{number} consolidation failed: {step['consolidation_error']}")
        for r in step["ranges"]:
            head = f"  c{number} turns {r['turns'][0]}-{r['turns'][-1]} ({r['seconds']:.1f} s): "
            if r["error"]:
                lines.append(head + f"extraction failed: {r['error']}")
                continue
            # One change per fact, in order, unless the store refused one; then by text.
            by_text = {f["text"]: f for f in r["filed"]}
            aligned = len(r["filed"]) == len(r["facts"])
            parts = []
            for index, f in enumerate(r["facts"]):
                did = r["filed"][index] if aligned else by_text.get(f["text"], {})
                action = did.get("action", "not filed")
                if did.get("replaced"):
                    action += f" {did['replaced']!r}"
                parts.append(
                    f"{f['text']!r} [{f['subject']}; replaces {f['label'] or '-'}] {action}"
                )
            lines.append(head + (f"{len(parts)} facts: " + "; ".join(parts) if parts else "none"))
    for item in result.get("expected", []):
        if not item["found"]:
            lines.append(f"  missing {item['expect']}: {item['why']}")
    for item in result.get("stale_current", []):
        shown = "; ".join(
            f"{f['text']!r} ({f['origin']}, subject {f['subject']})" for f in item["facts"]
        )
        lines.append(f"  stale {item['expect']} still current: {shown}")
    for name, said in result.get("answers", {}).items():
        verdict_ = "right" if said["right"] else "wrong"
        lines.append(f"  answer, facts {name} ({verdict_}): {said['reply'][:160]!r}")
    for number, step in enumerate(result["steps"], 1):
        for f in step["probe"]["retired_in_facts"]:
            lines.append(f"  c{number} probe: {f['status']} fact {f['text']!r} in the facts")
        for item in step["probe"]["stale_in_facts"]:
            lines.append(
                f"  c{number} probe: stale {item['expect']} in the facts: {item['line']!r}"
            )
    return lines


def report(results: list[dict[str, Any]]) -> tuple[list[str], dict[str, Any], dict[str, str]]:
    lines = ["", *table(results)]
    for result in results:
        if not result["passed"]:
            lines += trace(result)
    total = {key: sum(r["counts"][key] for r in results) for key in results[0]["counts"]}
    passing = {}
    for kind in ("plain", "explicit"):
        of_kind = [r for r in results if r["kind"] == kind]
        passing[kind] = (sum(r["passed"] for r in of_kind), len(of_kind))
    passed = sum(r["passed"] for r in results)
    in_prompt = total["retired_in_prompt"] + total["stale_in_prompt"]
    ranges = [rng for r in results for step in r["steps"] for rng in step["ranges"]]
    range_s = summarize([rng["seconds"] * 1e9 for rng in ranges], unit="ms")
    scenario_s = summarize([r["seconds"] * 1e9 for r in results], unit="ms")
    verdicts = {
        "scenarios_passing": verdict(passed, len(results), True),
        "stale_values_current": verdict(total["stale_current"], 0, False),
        "retired_in_prompt": verdict(in_prompt, 0, False),
    }
    split = ", ".join(f"{kind} {p}/{n}" for kind, (p, n) in passing.items())
    figures = [
        (f"scenarios passing ({split})", f"{passed}/{len(results)}", "all", "scenarios_passing"),
        ("stale values still current", str(total["stale_current"]), "0", "stale_values_current"),
        (
            "retired facts / stale values in a prompt's facts",
            f"{total['retired_in_prompt']} / {total['stale_in_prompt']}",
            "0",
            "retired_in_prompt",
        ),
    ]
    lines += [
        "",
        *(goal_line(label, value, goal, verdicts[key]) for label, value, goal, key in figures),
    ]
    info = "retired facts' text in recalled turns or summaries, unmarked"
    noted = "retired facts' text only in recalled turns noted as outdated"
    lines += [
        goal_line(info, str(total["retired_elsewhere"]), "none", "(info)"),
        goal_line(noted, str(total["retired_noted"]), "-", "(info)"),
        f"  extraction: {total['ranges']} ranges, {total['facts_extracted']} facts found, "
        f"{total['extraction_failures']} failed; explicit requests: {total['saved']} saved, "
        f"{total['dismissed']} dismissed",
        f"  extraction seconds per range p50 {range_s.get('p50', 0) / 1000:.1f}, max "
        f"{range_s.get('max', 0) / 1000:.1f}; per scenario p50 "
        f"{scenario_s.get('p50', 0) / 1000:.1f}, max {scenario_s.get('max', 0) / 1000:.1f}",
    ]
    answered = [r for r in results if r.get("answers")]
    right: dict[str, Any] = {}
    if answered:
        stuck = [r for r in answered if r["counts"]["stale_current"]]
        for name in ("dated", "undated"):
            right[name] = {
                "all": sum(r["answers"][name]["right"] for r in answered),
                "stale_current": sum(r["answers"][name]["right"] for r in stuck),
            }
            for kind in ("plain", "explicit"):
                of_kind = [r for r in answered if r["kind"] == kind]
                right[name][kind] = sum(r["answers"][name]["right"] for r in of_kind)
        lines += [
            f"  answers to the last probe (greedy; right: every current value named, no stale "
            f"one), {len(answered)} scenarios:",
            *(
                f"    facts {name:<8} {right[name]['all']:>2}/{len(answered)} right (plain "
                f"{right[name]['plain']}, explicit {right[name]['explicit']}); where a stale "
                f"value is still current: {right[name]['stale_current']}/{len(stuck)}"
                for name in ("dated", "undated")
            ),
        ]
        better = sum(
            r["answers"]["dated"]["right"] and not r["answers"]["undated"]["right"]
            for r in answered
        )
        worse = sum(
            r["answers"]["undated"]["right"] and not r["answers"]["dated"]["right"]
            for r in answered
        )
        lines.append(f"    dated right where undated wrong: {better}; the reverse: {worse}")
        right |= {"dated_only": better, "undated_only": worse, "scenarios": len(answered)}
    summary = {"passed": passed, "scenarios": len(results), "by_kind": passing, "totals": total}
    summary["answers"] = right
    summary |= {"range_ms": range_s, "scenario_ms": scenario_s}
    return lines, summary, verdicts
