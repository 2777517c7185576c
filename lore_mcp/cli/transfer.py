"""``lore-memory export``, ``import`` and ``reembed``: files and counts; the services do the rest."""

from __future__ import annotations

import argparse
import collections
import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from lore_mcp.app import open_app
from lore_mcp.cli.common import open_or_report, report_failure, say
from lore_mcp.settings import Settings

if TYPE_CHECKING:
    from lore_mcp.services.transfer import FileReport


def export_lessons(args: argparse.Namespace, settings: Settings) -> int:
    """`lore-memory export`: JSON Lines to --out or stdout; counts to stderr."""
    from lore_mcp.services.lesson_input import check_project
    from stores import StoreError

    try:
        project = check_project(args.export_project) if args.export_project else None
        app = open_app(settings)
    except StoreError as exc:
        return report_failure(exc)
    except Exception as exc:
        return say(f"VALIDATION_ERROR: {exc}", 2)
    counts = {"lesson": 0, "commit": 0}
    try:
        out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout  # noqa: SIM115
    except OSError as exc:
        app.close()
        return say(f"VALIDATION_ERROR: cannot write {args.out}: {exc.strerror}.", 2)
    try:
        lines = app.transfer.export_lines(
            settings.org, project, with_history=args.with_history, with_vectors=args.with_vectors
        )
        for line in lines:
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
            counts[line["type"]] = counts.get(line["type"], 0) + 1
    except StoreError as exc:
        return report_failure(exc)
    finally:
        if out is not sys.stdout:
            out.close()
        app.close()
    history = f" and {counts['commit']} commits" if args.with_history else ""
    return say(f"exported {counts['lesson']} lessons{history}.")


def _read_import(args: argparse.Namespace) -> tuple[str | None, Iterable[str], list[str]] | int:
    """(project, lines, foreign errors) of `import FILE`, or the exit status after a refusal."""
    from lore_mcp.errors import describe
    from lore_mcp.services.lesson_input import check_project
    from lore_mcp.services.transfer import file_lines

    try:
        project = check_project(args.import_project) if args.import_project else None
        # utf-8-sig: a byte order mark (as some editors write) is not part of the first line.
        with open(args.file, encoding="utf-8-sig") as f:
            if args.import_from == "lore":  # only decoded here: the import reads it again, line by line
                collections.deque(f, maxlen=0)
            text = f.read()
    except OSError as exc:
        return say(f"cannot read {args.file}: {exc.strerror}", 2)
    except Exception as exc:
        return say(f"VALIDATION_ERROR: {describe(exc)[1]}", 2)
    if args.import_from == "lore":
        return project, file_lines(args.file), []
    from lore_mcp.cli.importers import convert  # another server's export, as Lore lesson lines

    converted = convert(args.import_from, text)
    # --strict with a record left out writes nothing; the report below says why.
    return project, [] if args.strict and converted.errors else converted.lines, converted.errors


def import_lessons(args: argparse.Namespace, settings: Settings) -> int:
    """`lore-memory import FILE`: every line checked, embedded in batches, progress on stderr."""
    from lore_mcp.cli.progress import counter
    from lore_mcp.services.transfer import FILE_BATCH

    read = _read_import(args)
    if isinstance(read, int):
        return read
    project, lines, foreign = read
    app = open_or_report(settings)
    if app is None:
        return 1
    if not args.strict:
        say(
            f"importing in batches of {FILE_BATCH} lessons, each its own transaction and `import` "
            "commit; if this stops part-way, run the same command again: lessons already imported "
            "are skipped."
        )
    try:
        with app, counter("import") as bar:
            report = app.transfer.import_file(
                lines,
                org=settings.org,
                project=project,
                strict=args.strict,
                started=bar.reset,
                progress=bar.update,
            )
    except Exception as exc:  # describe() logs anything unexpected
        return report_failure(exc)
    return _print_import_report(report, foreign, strict=args.strict)


def _print_import_report(report: FileReport, foreign: list[str], *, strict: bool) -> int:
    """Malformed lines then a summary; exit 1 on any, so a script notices a partial import."""
    from lore_mcp.embedding.identity import describe_model

    report.errors[:0] = foreign
    for error in report.errors:
        say(error)
    if strict and report.errors:
        return say(f"{len(report.errors)} malformed lines; nothing was imported (--strict).", 1)
    if report.foreign_model is not None:
        say(
            f"the file's vectors come from {describe_model(report.foreign_model)}, not this store's "
            "model; its lessons were embedded anew."
        )
    redacted = f"; redacted {', '.join(sorted(report.redacted))}" if report.redacted else ""
    kept = f"; {report.kept_vectors} kept the vector the file carried" if report.kept_vectors else ""
    return say(
        f"imported {report.added} lessons, skipped {report.skipped} already present, "
        f"{len(report.errors)} malformed lines skipped, {report.commits} commit lines not replayed, "
        f"{report.merged} merged into a stored lesson they added nothing to{redacted}{kept}.",
        1 if report.errors else 0,
    )


def reembed_lessons(args: argparse.Namespace, settings: Settings) -> int:
    """`lore-memory reembed`, progress on stderr."""
    from lore_mcp.cli.progress import counter
    from lore_mcp.services.reembed import BATCH_SIZE, reembed_store

    batch_size = args.batch_size if args.batch_size is not None else BATCH_SIZE
    if not 1 <= batch_size <= 10_000:
        return say("VALIDATION_ERROR: --batch-size must be between 1 and 10000.", 2)
    app = open_or_report(settings)
    if app is None:
        return 1
    try:
        with app, counter("reembed") as bar:

            def started(done: int, total: int) -> None:
                bar.reset(total)
                if done:  # what a killed run already kept
                    bar.update(done)

            report = reembed_store(
                app.store, app.embedder, batch_size=batch_size, started=started, progress=bar.update
            )
    except Exception as exc:  # describe() logs anything unexpected
        return report_failure(exc)
    model = f"{report.model.name} ({report.model.dimension} dimensions)"
    if not report.switched:
        return say(f"the store already records {model}; nothing to re-embed.")
    kept = f" ({report.kept} kept from an earlier run)" if report.kept else ""
    return say(
        f"re-embedded {report.reembedded} lessons{kept} with {model} in {report.seconds:.1f} s; "
        f"the store now records {model}."
    )
