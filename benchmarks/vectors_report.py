"""The report of ``bench_vectors.py``: each part's tables, with the goals' verdicts."""

from __future__ import annotations

from typing import Any

from harness import fmt, goal_line, stats_header, stats_row, verdict
from vectors_engines import (
    CONVERSATIONS,
    DIMENSION,
    GOALS,
    USERS,
    K,
    Settings,
    calibration_sizes,
)

#: The latency columns of the tables.
COLUMNS = ("p50", "p95", "max")


def report(result: dict[str, Any], settings: Settings) -> list[str]:
    """Every part's figures, with the goals' verdicts."""
    lines = populate_lines(result, settings)
    for scope, goal_key in (
        ("conversation", "edge_conversation_p95_ms"),
        ("user", "edge_user_p95_ms"),
    ):
        lines.extend(search_lines(result, scope, goal_key))
    if "calibration" in result:
        from pgvector_bench import calibration_lines

        total = settings.points + sum(calibration_sizes(settings.points))
        lines.extend(calibration_lines(result["calibration"], total, K))
    lines.extend(ingestion_lines(result["ingestion"]))
    lines.extend(retrieval_lines(result, settings))
    return lines


def populate_lines(result: dict[str, Any], settings: Settings) -> list[str]:
    """How the engines were filled, their size on disk, the RSS."""
    lines: list[str] = []
    engines = result["engines"]
    lines.append(
        f"== 1. filtered top-{K} search: {settings.points:,} points, {CONVERSATIONS:,} "
        f"conversations, {USERS} users, {DIMENSION}-d random unit vectors =="
    )
    lines.append("  populate:")
    for engine in engines.values():
        pop = engine["populate"]
        if not pop:  # another view of a populated table
            continue
        parts = []
        if "large_batches" in pop:
            large = pop["large_batches"]
            parts.append(
                f"{large['points']:,} in batches of {large['batch']:,}: "
                f"{large['points_per_second']:,.0f} points/s"
            )
        b256 = pop["batches_of_256"]
        parts.append(
            f"{b256['points']:,} in batches of 256: {fmt(b256['points_per_second'])} points/s "
            f"(batch p50 {fmt(b256['batch_ms']['p50'])} ms)"
        )
        if "hnsw_build_seconds" in pop:
            parts.append(
                f"HNSW index built in {pop['hnsw_build_seconds']:.1f} s; table and indexes "
                f"{pop['table_mb']:,.0f} MB"
            )
        lines.append(
            f"    {engine['label']:<44} {'; '.join(parts)}; total {pop['wall_seconds']:.1f} s, "
            f"RSS +{engine['rss_delta_mb']:,.0f} MB"
        )
    before_flush = result["edge_disk_mb_before_flush"]
    if result.get("disk_mb"):
        lines.append(
            "  on disk (allocated / apparent): "
            + ", ".join(
                f"{name} {size['allocated']:,.0f} / {size['apparent']:,.0f} MB"
                for name, size in result["disk_mb"].items()
            )
            + f"; edge before its first flush {before_flush['allocated']:,.0f} MB, of which WAL "
            f"{before_flush['wal_allocated']:,.0f} MB (that flush took "
            f"{engines['edge']['populate']['flush_seconds']:.2f} s)"
        )
    rss = result["rss_mb"]
    lines.append(
        f"  RSS: start {rss['start']:.0f} MB, dataset {rss['after_dataset']:.0f} MB, "
        f"after populating {rss['after_populate']:.0f} MB"
    )
    return lines


def search_lines(result: dict[str, Any], scope: str, goal_key: str) -> list[str]:
    """Latency and recall of every engine for one filter, with the goals."""
    lines: list[str] = []
    engines = result["engines"]
    header = stats_header("latency, ms", COLUMNS) + f" {'recall@5':>9}"
    search = result["search"][scope]
    lines.append(
        f"  -- filter: one {scope} ({search['matching_points_per_query']:,.0f} matching "
        f"points per query)"
    )
    lines.append(header)
    for name in engines:
        stats = search[name]
        lines.append(
            stats_row(engines[name]["label"], stats, COLUMNS, digits=3)
            + f" {fmt(stats['recall_at_5'], 4):>9}"
        )
    lines.append(
        stats_row(
            "numpy exact over prebuilt member lists (reference)",
            search["numpy_exact"],
            COLUMNS,
            digits=3,
        )
    )
    stats = search["edge"]
    goal = GOALS[goal_key]
    lines.append(
        goal_line(
            f"embedded p95, filter by {scope}",
            f"{fmt(stats['p95'], 3)} ms",
            f"<= {goal:g} ms",
            verdict(stats["p95"], goal, higher_is_better=False),
        )
    )
    for name in engines:
        stats = search[name]
        goal = GOALS["recall_at_5"]
        lines.append(
            goal_line(
                f"recall@5 {name}, filter by {scope} ({stats['n']} queries)",
                fmt(stats["recall_at_5"], 4),
                f">= {goal:g}",
                verdict(stats["recall_at_5"], goal, higher_is_better=True),
            )
        )
        if stats["hits_outside_filter"] or stats["queries_with_fewer_than_k_hits"]:
            lines.append(
                f"    !! {name}: {stats['hits_outside_filter']} hits outside the filter, "
                f"{stats['queries_with_fewer_than_k_hits']} queries with fewer than {K} hits"
            )
    for name in list(engines)[1:]:
        ratio = search[name]["over_edge_p50"]
        pg = name.startswith("pgvector")
        goal = GOALS["pgvector_over_edge_p50" if pg else "local_over_edge_p50"]
        lines.append(
            goal_line(
                f"{name} p50 / embedded p50, filter by {scope}",
                f"{fmt(ratio, 1)}x",
                f"{'<=' if pg else '>='} {goal:g}x",
                verdict(ratio, goal, higher_is_better=not pg),
            )
        )
    return lines


def ingestion_lines(ing: dict[str, Any]) -> list[str]:
    """Raw and pipeline throughput by thread setting, with the goals."""
    lines: list[str] = []
    lines.append("")
    lines.append(
        f"== 2. ingestion: {ing['sentences']:,} chat sentences (mean {ing['mean_words']:.1f} "
        f"words), all-MiniLM-L6-v2, batches of {ing['batch']}, median of {ing['rounds']} "
        f"alternating rounds =="
    )
    lines.append(f"  {'sentences/s':<58} {'threads=1':>10} {'threads=2':>10}")
    rows = (
        ("raw: embed_documents per batch of 64", "raw"),
        ("pipeline: embed_documents + EdgeIndex.upsert per batch", "pipeline"),
        ("pipeline + EdgeIndex.flush per batch (as TurnIndexer)", "pipeline_flush"),
        ("embed_documents(all texts) in one call (length-sorted)", "whole_list"),
    )
    for label, kind in rows:
        lines.append(
            f"  {label:<58} "
            + " ".join(f"{ing['threads'][t][kind]['sentences_per_second']:>10,.1f}" for t in (1, 2))
        )
    lines.append(
        f"  {'upsert share of pipeline time':<58} "
        + " ".join(f"{ing['threads'][t]['pipeline']['upsert_share']:>10.1%}" for t in (1, 2))
    )
    lines.append(
        f"  {'flush per batch, ms':<58} "
        + " ".join(f"{ing['threads'][t]['flush_ms_per_batch']:>10.1f}" for t in (1, 2))
    )
    lines.append(
        f"  {'upsert alone inside the pipeline, points/s':<58} "
        + " ".join(
            f"{ing['threads'][t]['pipeline']['upsert_points_per_second']:>10,.0f}" for t in (1, 2)
        )
    )
    goal = GOALS["ingest_pipeline_over_raw"]
    for key, label in (
        ("pipeline_over_raw", "pipeline / raw throughput, threads={} (paired batches)"),
        ("pipeline_flush_over_raw", "pipeline + flush / raw throughput, threads={}"),
    ):
        for threads in (1, 2):
            ratio = ing["threads"][threads][key]
            lines.append(
                goal_line(
                    label.format(threads),
                    f"{ratio:.3f}",
                    f">= {goal:g}",
                    verdict(ratio, goal, higher_is_better=True),
                )
            )
    lines.append(
        f"  {'pipeline / embed_documents(all texts), threads=1 (info)':<58} "
        f"{ing['threads'][1]['pipeline_over_whole_list']:>18.3f}"
    )
    lines.append(
        f"  {'raw throughput threads=2 / threads=1 (default is 1)':<58} "
        f"{ing['raw_2_over_1_threads']:>18.2f}x"
    )

    return lines


def retrieval_lines(result: dict[str, Any], settings: Settings) -> list[str]:
    """Retrieval against embedding alone, with the goal; the model's load time and RSS."""
    lines: list[str] = []
    ret = result["retrieval"]
    rss = result["rss_mb"]
    lines.append("")
    lines.append(
        f"== 3. retrieval: embed_query + EdgeIndex.search filtered by user, top-{K}, "
        f"{settings.points:,} points; threads=1, alternating with embedding alone =="
    )
    lines.append(stats_header("latency, ms", COLUMNS))
    for label, key in (
        ("embed_query alone (threads=1)", "embed_query_ms"),
        ("embed_query + search (threads=1)", "retrieval_ms"),
        ("  of which search", "search_part_ms"),
        ("embed_query alone (threads=2, info)", "embed_query_2_threads_ms"),
    ):
        lines.append(stats_row(label, ret[key], COLUMNS, digits=3))
    goal = GOALS["retrieval_p95_over_embed_p95"]
    ratio = ret["retrieval_p95_over_embed_p95"]
    lines.append(
        goal_line(
            "retrieval p95 / embed_query p95",
            f"{ratio:.3f}",
            f"<= {goal:g}",
            verdict(ratio, goal, higher_is_better=False),
        )
    )
    lines.append(
        f"  model load {result['model_load_seconds']:.1f} s; RSS after model load "
        f"{rss['after_model_load']:.0f} MB, end {rss['end']:.0f} MB"
    )
    return lines
