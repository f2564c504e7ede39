"""A small MCP notes server (stdio), bundled so the demo and the tests need nothing else.

It is an ordinary, unguarded server: ``create_note`` really writes. Behind Gatekeeper that
call becomes a proposal and never reaches it. Usage: ``python -m gatekeeper.demo.notes_server DIR``.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import Completion, CompletionArgument, CompletionContext, PromptReference, ResourceTemplateReference

MAX_READ = 1 << 20
SHOWN = 120  # characters of a path an error repeats: a 10 MB path must not come back whole


def _shown(rel: str) -> str:
    return repr(rel if len(rel) <= SHOWN else rel[:SHOWN] + "…")


def _slug(title: str) -> str:
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii").lower()
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")[:80] or "untitled"


def build(root: Path) -> MCPServer:
    root = root.resolve()
    server = MCPServer("demo-notes", version="1.0", instructions="Markdown notes in one folder.")

    def inside(rel: str) -> Path:
        path = (root / rel).resolve()
        if root not in path.parents:
            raise ToolError(f"{_shown(rel)} is outside the notes folder: give a path inside it, e.g. notes/hello.md")
        return path

    _reading_tools(server, root, inside)
    _writing_tools(server, root, inside)
    _completions(server, root)
    return server


def _reading_tools(server: MCPServer, root: Path, inside: Callable[[str], Path]) -> None:
    @server.tool(description="List every note (a path relative to the notes folder).")
    def list_notes() -> list[str]:
        return sorted(str(p.relative_to(root)) for p in root.rglob("*.md") if p.is_file())

    @server.tool(description="Read one note by its relative path, e.g. notes/hello.md.")
    def read_note(path: str) -> str:
        # A ToolError's words reach the caller; any other exception becomes "Error executing tool"
        # and a traceback in the log (with the 10 MB argument rendered: tens of seconds).
        try:
            return inside(path).read_bytes()[:MAX_READ].decode("utf-8", errors="replace")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ToolError(f"no note at {_shown(path)}: list_notes shows every note") from None
        except OSError as exc:
            raise ToolError(f"cannot read {_shown(path)}: {exc.strerror}") from None

    @server.tool(description="Find notes whose text contains the query (case-insensitive).")
    def search_notes(query: str) -> list[str]:
        q = query.lower()
        return sorted(
            str(p.relative_to(root))
            for p in root.rglob("*.md")
            if p.is_file() and q in p.read_text(errors="replace").lower()
        )

    @server.tool(description="Count slowly to n, reporting progress and logging each step (for demos of progress).")
    async def count_slowly(n: int, ctx: Context, delay_ms: int = 50) -> int:
        import anyio

        for i in range(1, n + 1):
            await ctx.report_progress(i, n, f"step {i} of {n}")
            await ctx.info(f"counted {i}")
            await anyio.sleep(delay_ms / 1000)  # the pace is the point: a demo of progress
        return n

    @server.resource("note://{name}", description="The text of notes/<name>.", mime_type="text/markdown")
    def note_resource(name: str) -> str:
        return read_note(f"notes/{name}")

    @server.prompt(description="Ask for a summary of one note.")
    def summarize(path: str) -> str:
        return f"Summarise the note {path} in three bullet points."


def _completions(server: MCPServer, root: Path) -> None:
    """Note paths for the ``summarize`` prompt's ``path``, note names for ``note://{name}``."""

    @server.completion()  # type: ignore[no-untyped-call,untyped-decorator]  # the SDK's decorator is untyped
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        if isinstance(ref, PromptReference) and (ref.name, argument.name) == ("summarize", "path"):
            found = sorted(str(p.relative_to(root)) for p in root.rglob("*.md") if p.is_file())
        elif isinstance(ref, ResourceTemplateReference) and (ref.uri, argument.name) == ("note://{name}", "name"):
            found = sorted(p.stem for p in (root / "notes").glob("*.md") if p.is_file())
        else:
            return None
        values = [v for v in found if v.startswith(argument.value)]
        return Completion(values=values[:100], total=len(values), has_more=len(values) > 100)


def _writing_tools(server: MCPServer, root: Path, inside: Callable[[str], Path]) -> None:
    """What Gatekeeper turns into proposals (or denies): the server itself writes at once."""

    @server.tool(description="Create a new note notes/<slug of title>.md with the given body.")
    def create_note(title: str, body: str) -> str:
        path = inside(f"notes/{_slug(title)}.md")
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("x", encoding="utf-8") as f:
            f.write(body)
        return str(path.relative_to(root))

    @server.tool(description="Write a note at a relative path (creates folders as needed).")
    def write_note(path: str, body: str) -> str:
        target = inside(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, encoding="utf-8")
        return f"wrote {path}"

    @server.tool(description="Delete a note.")
    def delete_note(path: str) -> str:
        inside(path).unlink()
        return f"deleted {path}"


def main() -> None:
    if len(sys.argv) != 2:
        print("usage: python -m gatekeeper.demo.notes_server NOTES_DIR", file=sys.stderr)
        raise SystemExit(2)
    root = Path(sys.argv[1])
    root.mkdir(parents=True, exist_ok=True)
    print(f"demo-notes: serving {root.resolve()}", file=sys.stderr)
    build(root).run("stdio")


if __name__ == "__main__":
    main()
