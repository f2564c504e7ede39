"""The committer: the only code that writes into a workspace, by exclusive creation or, for a
change, by compare-and-swap against the approved base.

``committer`` runs a pass (intent, file step, outcome) after ``checks`` (signature, digests,
policy); ``fsops`` creates one file beneath a root without following symlinks and without ever
showing a partial file; ``swap`` replaces or deletes one only while it still holds the approved
base; ``reading`` reads what is at a path now (read-only); ``syscalls`` reaches openat2/renameat2;
``lock`` keeps to one committer per server at a time (``store.claims``: one per approval, across
machines); ``policy_source`` rereads the policy as it changes; ``watch`` is the ``--watch`` loop;
``run`` wires them up; ``testing`` is the one seam for test-only switches (crash points, injected
faults, and the steps that ``planted``'s deliberate bugs replace). Run it with ``gatekeeper commit``.
Imports neither the MCP SDK, FastAPI nor the CLI.
"""
