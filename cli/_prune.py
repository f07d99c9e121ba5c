"""`jeeves-mcp prune`: prune a file or stdin locally with the built-in engine."""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, BinaryIO

import typer

from jeeves_mcp.cli._common import EXIT_USAGE, fail, json_text, visible
from jeeves_mcp.pruning.render import Row, annotation, human_bytes, plural

if TYPE_CHECKING:
    from rich.console import Console

    from jeeves_mcp.pruning import PruneOutcome

CLI_TIMEOUT_MS = 60_000  # by hand there is no agent waiting: let big files finish
# Inputs above the bound are not pruned: an engine pass over hundreds of MB took
# minutes and gigabytes. Larger than the children's bound: by hand, one can wait.
DEFAULT_MAX_INPUT_BYTES = 16 * 1024 * 1024
STREAM_CHUNK = 1024 * 1024
EDGE_BYTES = 4096  # kept from each end of an input over the bound
MARKER_STYLE = "bold magenta"
NUMBER_STYLE = "dim cyan"


class SourceType(enum.StrEnum):
    code = "code"
    logs = "logs"
    docs = "docs"


def _fail(message: str, error: str) -> typer.Exit:
    """A usage error, ending in the code the `read` tool gives the same input."""
    return fail("prune", message, EXIT_USAGE, error=error)


@dataclass
class Oversized:
    """An input above the pruning bound: counted while streamed, only its ends kept."""

    size: int
    lines: int
    head: bytes
    tail: bytes


def _open_input(file: str) -> tuple[BinaryIO, str | None]:
    if file == "-":
        return sys.stdin.buffer, None
    source = Path(file)
    try:
        handle = source.open("rb")
    except FileNotFoundError:
        raise _fail(f"{file}: no such file", "NOT_FOUND") from None
    except IsADirectoryError:
        raise _fail(f"{file}: is a directory", "INVALID_REQUEST") from None
    except OSError as exc:
        raise _fail(f"{file}: cannot read: {exc.strerror or exc}", "FAILED") from None
    return handle, str(source)


def _read_input(file: str, limit: int) -> tuple[str | Oversized, str | None]:
    """The text to prune, or what is kept of an input above `limit` bytes, and its path.

    At most `limit` + 1 bytes are read before deciding: a larger input is then
    streamed (counted a chunk at a time, its last bytes kept), never held whole."""
    handle, path = _open_input(file)
    try:
        data = handle.read(limit + 1)
        if b"\x00" in data[:8192]:
            raise _fail(f"{file}: looks binary, nothing to prune", "INVALID_REQUEST")
        if len(data) <= limit:
            return data.decode("utf-8", "replace"), path
        size, lines = len(data), data.count(b"\n")
        head, tail = data[:EDGE_BYTES], data[-EDGE_BYTES:]
        del data
        while chunk := handle.read(STREAM_CHUNK):
            size += len(chunk)
            lines += chunk.count(b"\n")
            tail = (tail + chunk)[-EDGE_BYTES:]
        if not tail.endswith(b"\n"):
            lines += 1  # a last line without its newline
        return Oversized(size, lines, head, tail), path
    except OSError as exc:
        raise _fail(f"{file}: cannot read: {exc.strerror or exc}", "FAILED") from None
    finally:
        if path is not None:
            handle.close()


def oversized_rows(over: Oversized) -> tuple[list[Row], dict]:
    """Whole lines from both ends of an oversized input around one marker for the rest."""
    head_lines = over.head.decode("utf-8", "replace").split("\n")[:-1] or [
        over.head.decode("utf-8", "ignore") + "…"]  # one line longer than the head: clipped
    tail_text = over.tail.decode("utf-8", "replace").removesuffix("\n")
    tail_lines = tail_text.split("\n")[1:] if "\n" in tail_text else ["…" + tail_text]
    tail_lines = tail_lines[: max(0, over.lines - len(head_lines) - 1)]
    first_tail = over.lines - len(tail_lines) + 1
    start, end = len(head_lines) + 1, first_tail - 1
    if start > end:  # one line longer than the bound: the marker stands for part of it
        start = end = min(start, over.lines)
    block = annotation("-", start, end, "entrée trop grande (input_too_large)")
    rows = [Row(n, n, line) for n, line in enumerate(head_lines, 1)]
    rows.append(Row(start, end, block["marker"], marker=True))
    rows.extend(Row(n, n, line) for n, line in enumerate(tail_lines, first_tail))
    return rows, block


def oversized_summary(over: Oversized, limit: int, shown: int) -> str:
    return (
        f"not pruned: the input is {human_bytes(over.size)}, above the {human_bytes(limit)} bound "
        f"(--max-input-bytes); showing {shown} of {over.lines} lines from its ends [input_too_large]"
    )


def print_oversized(over: Oversized, limit: int, as_json: bool, file: str) -> None:
    from rich.console import Console
    from rich.text import Text

    rows, block = oversized_rows(over)
    shown = sum(1 for row in rows if not row.marker)
    line = oversized_summary(over, limit, shown)
    typer.echo(visible(f"jeeves-mcp prune: {file}: {line}"), err=True)  # the fallback, said where it shows
    if as_json:
        contract = {
            "prune_id": None,
            "pruned_text": "\n".join(row.text if row.marker else f"{row.start}│ {row.text}" for row in rows),
            "annotations": [block],
            "stats": {"original_lines": over.lines, "kept_lines": shown, "pruned_lines": over.lines - shown,
                      "original_bytes": over.size, "used_fallback": True},
            "warnings": ["input_too_large"],
        }
        typer.echo(json_text(contract, indent=2))
        return
    console = Console(highlight=False)
    width = len(str(over.lines))
    for row in rows:
        if row.marker:
            console.print(Text(row.text, style=MARKER_STYLE), soft_wrap=True)
        else:
            console.print(Text(f"{row.start:>{width}}│ ", style=NUMBER_STYLE).append(visible(row.text)), soft_wrap=True)
    console.print(Text(line, style="bold"), soft_wrap=True)


def render_pretty(outcome: PruneOutcome, console: Console) -> None:
    """Kept lines with their original numbers, markers highlighted, then a summary line."""
    from rich.text import Text

    width = len(str(outcome.stats["original_lines"]))
    for row in outcome.rows:
        if row.marker:
            console.print(Text(row.text, style=MARKER_STYLE), soft_wrap=True)
        else:
            line = Text(f"{row.start:>{width}}│ ", style=NUMBER_STYLE)
            line.append(visible(row.text))
            console.print(line, soft_wrap=True)
    console.print(Text(summary(outcome), style="bold"), soft_wrap=True)


def summary(outcome: PruneOutcome) -> str:
    stats = outcome.stats
    saved = stats["tokens_est_before"] - stats["tokens_est_after"]
    tokens = f"~{saved} tokens saved" if saved >= 0 else f"~{-saved} tokens added by markers"
    text = (
        f"kept {stats['kept_lines']} of {plural(stats['original_lines'], 'line')} "
        f"({stats['pruned_lines']} pruned in {plural(len(outcome.annotations), 'block')}, "
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
    history_of: Path | None = None,
) -> PruneOutcome:
    """One pruning with the built-in engine, under seed 001's contract; `history_of`: the
    file `text` was read from, blamed for the recency prior a focused `read` gets."""
    from jeeves_mcp.pruner_config import PrunerConfig
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
    prior = None
    if history_of is not None and source_type == "code":
        from jeeves_mcp.pruning.history import line_history

        lines = text.removesuffix("\n").split("\n")
        prior = await line_history(
            history_of, lines, root=history_of.parent, timeout_s=10.0,
            kill_grace_s=1.0,
        )
    return await pruner.prune(text, question, source_type, options, path=path, line_prior=prior)


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
    max_input_bytes: Annotated[
        int, typer.Option(min=1, help="Larger inputs are not pruned: their two ends are shown, "
                          "the rest streamed past and counted (memory stays bounded).")
    ] = DEFAULT_MAX_INPUT_BYTES,
    history: Annotated[
        bool, typer.Option("--history/--no-history", help="In a git repository, weigh the lines "
                           "the file's last commits changed, as a focused read does (git blame).")
    ] = True,
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
        raise _fail("--question is empty", "INVALID_REQUEST")
    text, path = _read_input(file, max_input_bytes)
    if isinstance(text, Oversized):
        print_oversized(text, max_input_bytes, as_json, file)
        return
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
            history_of=Path(file).resolve() if history and file != "-" else None,
        )
    )
    if as_json:
        typer.echo(json_text(outcome.contract(), indent=2))
        return
    render_pretty(outcome, Console(highlight=False))

