"""Destinations an agent might send that must never be proposed. Shared by the unit tests and
the end-to-end proxy test. ``{ws}`` is replaced with the workspace's absolute path."""

from __future__ import annotations

HOSTILE = [
    # traversal
    "../escape.md",
    "notes/../../escape.md",
    "notes/../escape.md",
    "..",
    ".",
    "./notes/a.md",
    "notes/./a.md",
    "notes/..",
    "a/b/../../../c.md",
    # absolute, outside or tricky
    "/etc/passwd",
    "/tmp/x.md",
    "{ws}/../escape.md",
    "{ws}x/evil.md",
    "//etc/passwd",
    "{ws}/",
    # empty and malformed components
    "",
    "notes//a.md",
    "notes/",
    "/",
    "notes/a.md/",
    # NUL and control characters
    "notes/a\x00.md",
    "notes/a\n.md",
    "notes/a\r.md",
    "notes/a\t.md",
    "notes/\x1b[31mred.md",
    "notes/a\x7f.md",
    # bidi and zero-width
    "notes/a\u202egnp.md",
    "notes/\u2066a.md",
    "notes/a\u200b.md",
    "notes/a\u200d.md",
    "notes/\ufeffa.md",
    "notes/a\u200e.md",
    "notes/a\u061c.md",
    # Windows reserved names
    "CON",
    "notes/con.md",
    "notes/NUL.txt",
    "notes/com1",
    "notes/LPT9.md",
    "aux/a.md",
    # over-long
    "notes/" + "a" * 300 + ".md",
    "/".join(["d"] * 40) + "/a.md",
    "notes/" + "\u00e9" * 200 + ".md",
    # trailing dots and spaces
    "notes/a.md.",
    "notes/a.md ",
    "notes /a.md",
    " notes/a.md",
    "notes/a...",
    # mixed separators and Windows syntax
    "notes\\a.md",
    "notes/..\\..\\escape.md",
    "C:\\Windows\\x.md",
    "c:/x.md",
    "notes/a:b.md",
    "notes/a|b.md",
    'notes/a"b.md',
    "notes/a?.md",
    "notes/a*.md",
    "notes/<a>.md",
    # Unicode look-alikes of / and .
    "notes\u2215a.md",
    "notes\u2044a.md",
    "notes\uff0fa.md",
    "notes/a\u2024md",
    "notes/a\uff0emd",
    "\uff0e\uff0e/x.md",
    "notes/a\u3002md",
    "notes\u29f8a.md",
    "notes/\u00a0a.md",
    "notes/\u3000a.md",
    # compatibility forms and hidden names
    "notes/\ufb01le.md",
    "notes/\uff41.md",
    ".git/config",
    "notes/.env",
    ".ssh/authorized_keys",
    # not a string at all
    None,
    42,
    ["notes/a.md"],
    {"path": "notes/a.md"},
]
