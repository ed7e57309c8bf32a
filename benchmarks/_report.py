"""The printed result of ``benchmarks/compare.py``: the comparison, the scaling table and
the targets, each met or not. Pure: figures in, text out (the smoke test reads it)."""

from __future__ import annotations

from collections.abc import Iterator

COLUMNS = ("plain Python", "raw Celery", "in process, SQLite", "in process, PostgreSQL",
           "flowpilot on Celery")  # fmt: skip

# The targets of docs/benchmarks.md: (name, limit).
PER_STEP_SQLITE_MS = 1.0
PER_STEP_POSTGRES_MS = 1.0
HOP_VS_RAW = 1.0
WIDE_VS_RAW = 1.5
FANOUT_IN_PROCESS = 1.2
FANOUT_CELERY = 1.5
SCALE_FLAT = 1.25
FIXED_COST_MS = 5.0
FIXED_COST_POSTGRES_MS = 4.0
MEMORY_LINEAR = 1.25
TRACING_ON = 0.05


def report(results: dict) -> str:
    machine = results["machine"]
    lines = [
        f"flowpilot beside plain Python and raw Celery — commit {machine['commit']}, Python "
        f"{machine['python']}, {machine['cores']} cores, load {machine['load']:.1f}; "
        f"median of {results['args']['repeat']} after a warm-up; {results['args']['slots']} "
        "slots (Celery: one prefork worker, -c slots, Redis; in process: slots threads)",
        "",
    ]
    if "inprocess" in results or "celery" in results:
        lines += [*comparison(results), ""]
    if results.get("scale"):
        lines += [*scaling(results["scale"]), ""]
    if results.get("celery", {}).get("scale"):
        lines += [*celery_scaling(results["celery"]["scale"]), ""]
    if results.get("tracing"):
        lines += [*tracing(results["tracing"]), ""]
    lines += targets(results)
    return "\n".join(lines)


def _cells(results: dict, row: str) -> dict[str, dict]:
    """Per column: {"t": seconds, "plain": the plain time measured beside it, "n": steps}."""
    cells: dict[str, dict] = {}
    local = results.get("inprocess", {})
    for db, column in (("sqlite", COLUMNS[2]), ("postgresql", COLUMNS[3])):
        if db in local:
            fig = local[db][row]
            cells[column] = {"t": fig["flowpilot"], "plain": fig["plain"], "n": fig["n"]}
            cells.setdefault(COLUMNS[0], {"t": fig["plain"], "plain": fig["plain"], "n": fig["n"]})
    if "celery" in results:
        fig = results["celery"][row]
        cells[COLUMNS[1]] = {"t": fig["raw_celery"], "plain": fig["plain"], "n": fig["n"]}
        cells[COLUMNS[4]] = {"t": fig["flowpilot"], "plain": fig["plain"], "n": fig["n"]}
        cells.setdefault(COLUMNS[0], {"t": fig["plain"], "plain": fig["plain"], "n": fig["n"]})
    return cells


def comparison(results: dict) -> list[str]:
    args = results["args"]
    rows = [
        ("chain", f"chain of {args['chain']}", ("total", "per step", "ratio")),
        ("fanout", f"fan-out {args['fanout']} x {args['delay_ms']} ms", ("total", "ratio")),
        ("wide", f"{args['wide']} independent calls", ("total", "per step", "ratio")),
        ("one", "1-step run (fixed cost)", ("total", "overhead")),
    ]
    out = ["| shape | figure | " + " | ".join(COLUMNS) + " |", "|---|---|" + "---|" * 5]
    for key, name, figures in rows:
        cells = _cells(results, key)
        for figure in figures:
            values = [_figure(figure, cells.get(column)) for column in COLUMNS]
            out.append(f"| {name} | {_LABELS[figure]} | " + " | ".join(values) + " |")
    return out


_LABELS = {
    "total": "wall time",
    "per step": "overhead per step (over plain)",
    "ratio": "x plain Python",
    "overhead": "overhead (over plain)",
}


def _figure(figure: str, cell: dict | None) -> str:
    if cell is None:
        return "-"
    if figure == "total":
        return f"{cell['t'] * 1000:.1f} ms"
    if figure == "ratio":
        return f"{cell['t'] / cell['plain']:.2f}x" if cell["plain"] else "-"
    per = (cell["t"] - cell["plain"]) * 1000 / (cell["n"] if figure == "per step" else 1)
    return f"{per:.2f} ms"


def scaling(rows: list[dict]) -> list[str]:
    out = [
        "| shape (in process, SQLite) | steps | wall time | plain | overhead per step "
        "| vs 100 steps | peak RSS | per step | heap peak | per step |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        per = _per_step_ms(row)
        base = _at(rows, row["shape"], 100)
        versus = f"{per / _per_step_ms(base):.2f}x" if base and _per_step_ms(base) > 0 else "-"
        out.append(
            f"| {row['shape']} | {row['n']:,} | {row['flowpilot'] * 1000:.1f} ms | "
            f"{row['plain'] * 1000:.1f} ms | {per:.2f} ms | {versus} | "
            f"{row['peak_mb']:.1f} MiB | {row['peak_mb'] * 1024 / row['n']:.1f} KiB | "
            f"{_mib(row.get('heap_mb'))} | {_kib_per_step(row.get('heap_mb'), row['n'])} |"
        )
    return out


def celery_scaling(rows: list[dict]) -> list[str]:
    out = [
        "| shape (on Celery) | steps | flowpilot | raw Celery | flowpilot per step "
        "| raw Celery per step | x raw Celery | per step vs 100 steps |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        per, raw = row["flowpilot"] * 1000 / row["n"], row["raw_celery"] * 1000 / row["n"]
        base = _at(rows, row["shape"], 100)
        versus = f"{per / (base['flowpilot'] * 10):.2f}x" if base else "-"
        out.append(
            f"| {row['shape']} | {row['n']:,} | {row['flowpilot'] * 1000:.1f} ms | "
            f"{row['raw_celery'] * 1000:.1f} ms | {per:.2f} ms | {raw:.2f} ms | "
            f"{per / raw:.2f}x | {versus} |"
        )
    return out


def _per_step_ms(row: dict) -> float:
    return (row["flowpilot"] - row["plain"]) * 1000 / row["n"]


def _at(rows: list[dict], shape: str, n: int) -> dict | None:
    return next((r for r in rows if r["shape"] == shape and r["n"] == n), None)


def tracing(rows: dict) -> list[str]:
    out = [
        "| chain in process | steps | tracing off | tracing on, spans sent | on vs off (90 %) "
        "| of which sending | spans received |",
        "|---|---|---|---|---|---|---|",
    ]
    for db, fig in rows.items():
        sending = (fig["on"] - fig["inline"]) / fig["off"] * 100
        out.append(
            f"| {db} | {fig['n']} | {fig['off'] * 1000:.1f} ms | {fig['on'] * 1000:.1f} ms | "
            f"{_on_vs_off(fig) * 100:+.1f} %{_interval(fig)} | {sending:.1f} % | "
            f"{fig['spans']:,} |"
        )
    return out


def _on_vs_off(fig: dict) -> float:
    """What tracing adds: the median of the paired blocks' ratios (a result file from
    before pairing has only the medians)."""
    return fig.get("ratio", fig["on"] / fig["off"]) - 1


def _interval(fig: dict) -> str:
    if "interval" not in fig:
        return ""
    low, high = fig["interval"]
    return f" ({(low - 1) * 100:+.1f} to {(high - 1) * 100:+.1f})"


def targets(results: dict) -> list[str]:
    out = ["| target | measured | met |", "|---|---|---|"]
    for name, measured, met in _checks(results):
        out.append(f"| {name} | {measured} | {'met' if met else 'NOT MET'} |")
    return out


def _checks(results: dict) -> Iterator[tuple[str, str, bool]]:
    chain = _cells(results, "chain") if ("inprocess" in results or "celery" in results) else {}
    for column, limit in ((COLUMNS[2], PER_STEP_SQLITE_MS), (COLUMNS[3], PER_STEP_POSTGRES_MS)):
        if column in chain:
            per = float(_figure("per step", chain[column]).split()[0])
            yield (
                f"{column}: overhead per chain step <= {limit:g} ms",
                f"{per:.2f} ms",
                per <= limit,
            )
    if COLUMNS[4] in chain:
        steps = chain[COLUMNS[4]]["n"]
        hop, raw = chain[COLUMNS[4]]["t"] * 1000 / steps, chain[COLUMNS[1]]["t"] * 1000 / steps
        yield (
            f"Celery chain hop <= {HOP_VS_RAW:g}x raw Celery's",
            f"{hop:.2f} vs {raw:.2f} ms: {hop / raw:.2f}x",
            hop / raw <= HOP_VS_RAW,
        )
    wide = _cells(results, "wide") if chain else {}
    if COLUMNS[4] in wide:
        steps = wide[COLUMNS[4]]["n"]
        per, raw = wide[COLUMNS[4]]["t"] * 1000 / steps, wide[COLUMNS[1]]["t"] * 1000 / steps
        yield (
            f"Celery wide graph per step <= {WIDE_VS_RAW:g}x raw Celery's",
            f"{per:.2f} vs {raw:.2f} ms: {per / raw:.2f}x",
            per / raw <= WIDE_VS_RAW,
        )
    fanout = _cells(results, "fanout") if chain else {}
    for column, limit in ((COLUMNS[2], FANOUT_IN_PROCESS), (COLUMNS[3], FANOUT_IN_PROCESS),
                          (COLUMNS[4], FANOUT_CELERY)):  # fmt: skip
        if column in fanout:
            ratio = fanout[column]["t"] / fanout[column]["plain"]
            yield f"{column}: fan-out <= {limit:g}x the floor", f"{ratio:.2f}x", ratio <= limit
    one = _cells(results, "one") if chain else {}
    for column, limit in ((COLUMNS[2], FIXED_COST_MS), (COLUMNS[3], FIXED_COST_POSTGRES_MS)):
        if column in one:
            cost = (one[column]["t"] - one[column]["plain"]) * 1000
            yield (
                f"{column}: fixed per-run cost <= {limit:g} ms",
                f"{cost:.2f} ms",
                cost <= limit,
            )
    yield from _scale_checks(results.get("scale") or [])
    for db, fig in (results.get("tracing") or {}).items():
        extra = _on_vs_off(fig)
        yield (
            f"{db}: chain with tracing on <= {TRACING_ON * 100:g} % over tracing off",
            f"{extra * 100:+.1f} %",
            extra <= TRACING_ON,
        )


def _scale_checks(rows: list[dict]) -> Iterator[tuple[str, str, bool]]:
    for shape in ("chain", "wide"):
        sizes = sorted(r["n"] for r in rows if r["shape"] == shape)
        base, top = _at(rows, shape, 100), _at(rows, shape, sizes[-1]) if sizes else None
        if base and top and top is not base:
            ratio = _per_step_ms(top) / max(_per_step_ms(base), 1e-9)
            yield (
                f"{shape}: overhead per step at {top['n']:,} steps <= {SCALE_FLAT:g}x that at 100",
                f"{_per_step_ms(top):.2f} vs {_per_step_ms(base):.2f} ms: {ratio:.2f}x",
                ratio <= SCALE_FLAT,
            )
        if len(sizes) >= 2:
            low, high = _at(rows, shape, sizes[-2]), _at(rows, shape, sizes[-1])
            # The engine's own allocations (tracemalloc); peak RSS, shown beside, also
            # counts memory earlier runs freed for reuse and SQLite's page cache.
            key = "heap_mb" if "heap_mb" in low and "heap_mb" in high else "peak_mb"
            per_low, per_high = low[key] / low["n"], high[key] / high["n"]
            ratio = per_high / per_low if per_low > 0 else float("inf")
            rss = ""
            if key == "heap_mb":
                rss = f"; peak RSS {high['peak_mb'] * 1024 / high['n']:.1f} vs "
                rss += f"{low['peak_mb'] * 1024 / low['n']:.1f} KiB"
            yield (
                f"{shape}: peak memory linear (heap per step at {high['n']:,} <= "
                f"{MEMORY_LINEAR:g}x that at {low['n']:,})",
                f"{per_high * 1024:.1f} vs {per_low * 1024:.1f} KiB{rss}",
                ratio <= MEMORY_LINEAR,
            )


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} MiB"


def _kib_per_step(value: float | None, n: int) -> str:
    return "-" if value is None else f"{value * 1024 / n:.1f} KiB"
