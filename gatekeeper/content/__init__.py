"""What a proposal says, read as text and bytes, with no I/O and no store: destination paths as
text (``paths``), a change's result from its base (``changes``), the diff a reviewer reads
(``diff``), characters a reader cannot see (``invisible``, ``unicode_ignorable``) and the warnings
the review page gives from the bytes alone (``cautions``). Above the policy (a change follows its
rule), below the store, the proxy, the review page and the committer."""
