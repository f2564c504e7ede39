"""gatekeeper.content.changeset: entries check their own shape, and the digest binds every field a commit acts on."""

from __future__ import annotations

import dataclasses

import pytest

from gatekeeper.content.changeset import ChangeSet, FileChange


def _set() -> ChangeSet:
    return ChangeSet.of(
        [
            FileChange("b.md", "change", base=b"old\n", result=b"new\n", mode=0o644, base_mode=0o644),
            FileChange("new/a.md", "move", base=b"x", result=b"x", mode=0o600, base_mode=0o644, source="a.md"),
            FileChange("new", "mkdir", mode=0o755),
            FileChange("c.md", "delete", base=b"gone", base_mode=0o644),
        ]
    )


def test_entries_sort_by_path_and_count_by_operation() -> None:
    cs = _set()
    assert [f.path for f in cs] == ["b.md", "c.md", "new", "new/a.md"]
    assert cs.counts() == {"change": 1, "delete": 1, "mkdir": 1, "move": 1}
    assert cs.total_bytes() == len(b"old\nnew\nxxgone")


@pytest.mark.parametrize(
    "field,value",
    [("result", b"new!\n"), ("mode", 0o600), ("base", b"older\n"), ("path", "b2.md"), ("base_mode", 0o640)],
)
def test_the_digest_changes_with_every_field_a_commit_acts_on(field: str, value: object) -> None:
    cs = _set()
    first = cs.files[0]
    given = {f.name: getattr(first, f.name) for f in dataclasses.fields(first) if f.init}
    changed = FileChange(**{**given, field: value})
    other = ChangeSet.of([changed, *cs.files[1:]])
    assert other.digest() != cs.digest()
    assert ChangeSet.of(reversed(cs.files)).digest() == cs.digest()


def test_a_move_source_is_bound_too() -> None:
    a = ChangeSet.of([FileChange("n.md", "move", base=b"x", result=b"x", source="a.md")])
    b = ChangeSet.of([FileChange("n.md", "move", base=b"x", result=b"x", source="b.md")])
    assert a.digest() != b.digest()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"path": "a", "op": "create"},
        {"path": "a", "op": "create", "result": b"", "base": b""},
        {"path": "a", "op": "delete"},
        {"path": "a", "op": "mkdir", "result": b""},
        {"path": "a", "op": "move", "base": b"", "result": b""},
        {"path": "a", "op": "change", "base": b"", "result": b"", "source": "b"},
        {"path": "a", "op": "chmod"},
    ],
)
def test_a_malformed_entry_is_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        FileChange(**kwargs)  # type: ignore[arg-type]


def test_one_path_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        ChangeSet.of([FileChange("a", "delete", base=b""), FileChange("b", "move", base=b"", result=b"", source="a")])


def test_the_inverse_undoes_every_entry_and_twice_is_the_same_set() -> None:
    cs = _set()
    back = cs.inverse()
    by_path = {f.path: f for f in back}
    assert by_path["a.md"].op == "move" and by_path["a.md"].source == "new/a.md"
    assert (by_path["a.md"].mode, by_path["a.md"].base_mode) == (0o644, 0o600)
    assert by_path["b.md"].base == b"new\n" and by_path["b.md"].result == b"old\n"
    assert by_path["c.md"].op == "create" and by_path["c.md"].result == b"gone" and by_path["c.md"].mode == 0o644
    assert by_path["new"].op == "rmdir"
    assert back.digest() != cs.digest()
    assert back.inverse().digest() == cs.digest()
