"""``gatekeeper up``: the review page and the committer as supervised child processes
(``supervise``), the checks that it may start here (``checks``: one ``up`` per home, no other
committer, its port free) and the readiness signal each child gives it (``ready``)."""
