"""The committer: the only code that writes into a workspace, by exclusive creation or, for a
change, by compare-and-swap against the approved base.

``committer`` runs a pass (intent, file step, outcome) after ``checks`` (signature, digests,
policy); ``fsops`` creates one file beneath a root without following symlinks and without ever
showing a partial file; ``swap`` replaces or deletes one only while it still holds the approved
base (both open folders and look at names with ``gatekeeper.workspace``);
``lock`` keeps to one committer per server at a time (``store.claims``: one per approval, across
machines); ``policy_source`` rereads the policy as it changes; ``watch`` is the ``--watch`` loop;
``run`` wires them up; ``switches`` is the one test seam (crash points, injected faults, replaceable
steps), set only by the test harness ``faults`` (which alone installs ``planted``'s deliberate bugs).
Run it with ``gatekeeper commit``.
Imports neither the MCP SDK, FastAPI nor the CLI.
"""
