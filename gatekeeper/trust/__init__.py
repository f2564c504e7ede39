"""Who may approve, and the proof that they did: approval statements and their checks
(``approval``), passkey enrolment (``enrolment``), reviewer passwords (``passwords``), the Ed25519
keys and their home (``keys``), signatures over rows and checkpoints (``signing``) and the newest
signed change of each reviewer and passkey row (``row_marks``). Below the store: the store keeps
what these sign; nothing here reads the database."""
