"""Passwords, session cookies, CSRF tokens and log-in links.

One itsdangerous salt per purpose, always a max age; a bad or old signature means "not logged
in", never a crash. itsdangerous signs but does not stop replay: log-in link nonces are stored
UNIQUE. Passwords are argon2id (argon2-cffi defaults). Tokens compare with hmac.compare_digest.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta
from typing import Any

from itsdangerous import BadSignature, URLSafeTimedSerializer

from gatekeeper.trust.passwords import hash_password, verify_password

# The password helpers live in gatekeeper.trust.passwords (the store checks step-up passwords); named here too.
__all__ = [
    "LINK_TTL",
    "LOGIN_COOKIE",
    "LOGIN_FORM_TTL",
    "SESSION_COOKIE",
    "SESSION_TTL",
    "Tokens",
    "hash_password",
    "verify_password",
]

SESSION_COOKIE = "gk_session"
LOGIN_COOKIE = "gk_login"
SESSION_TTL = timedelta(hours=8)
LINK_TTL = timedelta(minutes=10)
LOGIN_FORM_TTL = timedelta(hours=1)


class Tokens:
    """Every signed thing the page hands out, each under its own salt."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._session = URLSafeTimedSerializer(key, salt="gatekeeper.review.session")
        self._login_form = URLSafeTimedSerializer(key, salt="gatekeeper.review.login-form")
        self._link = URLSafeTimedSerializer(key, salt="gatekeeper.review.login-link")

    def _loads(self, serializer: URLSafeTimedSerializer, value: str | None, max_age: timedelta) -> Any:
        if not value:
            return None
        try:
            return serializer.loads(value, max_age=int(max_age.total_seconds()))
        except BadSignature:  # also SignatureExpired
            return None

    # typed log-in names: a name field may hold a password typed in the wrong place, so the
    # database keeps only keyed hashes of it (keyed: no offline dictionary without secret.key)
    def _name_mac(self, name: str) -> str:
        return hmac.new(self._key, b"gatekeeper.review.login-name:" + name.encode(), hashlib.sha256).hexdigest()

    def name_key(self, name: str) -> str:
        """The log-in throttle's key for a typed name (full keyed hash)."""
        return self._name_mac(name)

    def name_tag(self, name: str) -> str:
        """What an event says about a typed name that is no enabled reviewer: a short keyed hash,
        enough to see that the same unknown name came back, useless for recovering it."""
        return f"unknown name (keyed sha256 prefix {self._name_mac(name)[:8]})"

    # session cookie: carries the server-side session id, which logout and disabling revoke
    def session_cookie(self, sid: str) -> str:
        return self._session.dumps({"sid": sid})

    def session_id(self, cookie: str | None) -> str | None:
        data = self._loads(self._session, cookie, SESSION_TTL)
        return data.get("sid") if isinstance(data, dict) and isinstance(data.get("sid"), str) else None

    # CSRF: a synchronizer token bound to the session
    def csrf(self, sid: str) -> str:
        return hmac.new(self._key, b"gatekeeper.review.csrf:" + sid.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, sid: str, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(self.csrf(sid), token or "")

    # the log-in form's CSRF, before there is a session: bound to a signed nonce cookie
    def login_form_cookie(self, next_page: str | None = None) -> tuple[str, str]:
        """The cookie and the form's token; ``next_page`` (already checked local) rides in the signed
        cookie, so a one-time link opened in this browser also ends where the log-in started."""
        nonce = secrets.token_urlsafe(16)
        data = {"n": nonce} | ({"next": next_page} if next_page else {})
        return self._login_form.dumps(data), self._login_csrf(nonce)

    def _login_csrf(self, nonce: str) -> str:
        return hmac.new(self._key, b"gatekeeper.review.login-csrf:" + nonce.encode(), hashlib.sha256).hexdigest()

    def login_form_ok(self, cookie: str | None, token: str | None) -> bool:
        data = self._loads(self._login_form, cookie, LOGIN_FORM_TTL)
        if not isinstance(data, dict) or not isinstance(data.get("n"), str) or not token:
            return False
        return hmac.compare_digest(self._login_csrf(data["n"]), token)

    def login_form_next(self, cookie: str | None) -> str | None:
        """The page the last log-in form in this browser was to return to, if any (unchecked: the
        caller passes it through ``next_page.safe``)."""
        data = self._loads(self._login_form, cookie, LOGIN_FORM_TTL)
        found = data.get("next") if isinstance(data, dict) else None
        return found if isinstance(found, str) else None

    # one-time log-in links
    def login_link(self, reviewer: str) -> str:
        return self._link.dumps({"r": reviewer, "n": secrets.token_urlsafe(16)})

    def login_link_data(self, token: str | None) -> tuple[str, str] | None:
        data = self._loads(self._link, token, LINK_TTL)
        if isinstance(data, dict) and isinstance(data.get("r"), str) and isinstance(data.get("n"), str):
            return data["r"], data["n"]
        return None
