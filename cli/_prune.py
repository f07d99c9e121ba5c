"""`jeeves-mcp prune`: prune a file or stdin locally with the built-in engine."""

from __future__ import annotations

import enum
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from jeeves_mcp.pruning import PruneOutcome

CLI_TIMEOUT_MS = 60_000  # by hand there is no agent waiting: let big files finish
MARKER_STYLE = "bold magenta"
NUMBER_STYLE = "dim cyan"


class SourceType(enum.StrEnum):
    code = "code"
    logs = "logs"
    docs = "docs"


def _fail(message: str) -> typer.Exit:
    typer.echo(f"jeeves-mcp prune: {message}", err=True)
    return typer.Exit(2)


def _read_input(file: str) -> tuple[str, str | None]:
    """The text to prune and its path (None for stdin); errors exit 2."""
    if file == "-":
        data = sys.stdin.buffer.read()
        path = None
    else:
        source = Path(file)
        try:
            data = source.read_bytes()
        except FileNotFoundError:
            raise _fail(f"{file}: no such file") from None
        except IsADirectoryError:
            raise _fail(f"{file}: is a directory") from None
        except OSError as exc:
            raise _fail(f"{file}: cannot read: {exc.strerror or exc}") from None
        path = str(source)
    if b"\x00" in data[:8192]:
        raise _fail(f"{file}: looks binary, nothing to prune")
    return data.decode("utf-8", "replace"), path


def render_pretty(outcome: PruneOutcome, console: Console) -> None:
    """Kept lines with their original numbers, markers highlighted, then a summary line."""
    from rich.text import Text

    width = len(str(outcome.stats["original_lines"]))
    for row in outcome.rows:
        if row.marker:
            console.print(Text(row.text, style=MARKER_STYLE), soft_wrap=True)
        else:
            line = Text(f"{row.start:>{width}}│ ", style=NUMBER_STYLE)
            line.append(row.text)
            console.print(line, soft_wrap=True)
    console.print(Text(summary(outcome), style="bold"), soft_wrap=True)


def summary(outcome: PruneOutcome) -> str:
    stats = outcome.stats
    saved = stats["tokens_est_before"] - stats["tokens_est_after"]
    tokens = f"~{saved} tokens saved" if saved >= 0 else f"~{-saved} tokens added by markers"
    text = (
        f"kept {stats['kept_lines']} of {stats['original_lines']} lines "
        f"({stats['pruned_lines']} pruned in {len(outcome.annotations)} blocks, "
        f"{stats['pruned_ratio']:.0%}); {tokens} "
        f"({stats['tokens_est_before']} → {stats['tokens_est_after']} est.)"
    )
    if outcome.used_fallback:
        text += f"; fallback: {', '.join(outcome.warnings)}"
    return text


async def prune_locally(
    text: str,
    question: str,
    source_type: str,
    *,
    path: str | None,
    max_prune_ratio: float,
    min_keep_lines: int,
    annotate_lines: bool,
) -> PruneOutcome:
    """One pruning with the built-in engine, under seed 001's contract."""
    from jeeves_mcp.config import PrunerConfig
    from jeeves_mcp.pruning import LocalEngine, PruneOptions, Pruner
    from jeeves_mcp.pruning.recovery import RecoveryStore

    size = len(text.encode("utf-8", "surrogatepass"))
    config = PrunerConfig(root=Path.cwd(), max_prune_input_bytes=max(size, 1))
    store = RecoveryStore(config.store_ttl_s, max(config.store_max_bytes, size * 2))
    pruner = Pruner(config, store, LocalEngine())
    options = PruneOptions(
        max_prune_ratio=max_prune_ratio,
        min_keep_lines=min_keep_lines,
        timeout_ms=CLI_TIMEOUT_MS,
        annotate_lines=annotate_lines,
        include_markers=True,
    )
    return await pruner.prune(text, question, source_type, options, path=path)


def prune(
    file: Annotated[str, typer.Argument(metavar="FILE", help="File to prune, or - for stdin.", show_default=False)],
    question: Annotated[
        str,
        typer.Option("--question", "-q", help="What you are looking for: lines that matter to it are kept."),
    ],
    source_type: Annotated[
        SourceType | None,
        typer.Option(
            "--source-type",
            "-t",
            help="Structure rules to apply (default: guessed from the file name and content).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print seed 001's prune_text JSON instead of the view.")
    ] = False,
    max_prune_ratio: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Never prune more than this share of the lines.")
    ] = 0.9,
    min_keep_lines: Annotated[
        int, typer.Option(min=0, help="Never keep fewer lines than this.")
    ] = 0,
) -> None:
    """Prune FILE (or stdin) to the lines that matter for --question, locally.

    Uses the built-in engine (no server, no network). Every pruned block becomes
    one ⟦PRUNÉ: ... lignes a-b⟧ marker line. The view shows kept lines with their
    original numbers and ends with a summary of lines and estimated tokens saved;
    --json prints the same result as the prune_text tool returns it (pruned_text
    with N│ prefixes, annotations, stats, warnings). Exit code 2 on bad input.
    """
    import trio
    from rich.console import Console

    from jeeves_mcp.pruning.engine import guess_source_type

    if not question.strip():
        raise _fail("--question is empty")
    text, path = _read_input(file)
    kind = source_type.value if source_type is not None else guess_source_type(path, text)
    outcome = trio.run(
        lambda: prune_locally(
            text,
            question,
            kind,
            path=path,
            max_prune_ratio=max_prune_ratio,
            min_keep_lines=min_keep_lines,
            annotate_lines=as_json,
        )
    )
    if as_json:
        typer.echo(json.dumps(outcome.contract(), ensure_ascii=False, indent=2))
        return
    render_pretty(outcome, Console(highlight=False))


def register(app: typer.Typer) -> None:
    app.command()(prune)
