// Passkeys on the review page: enrol one, log in with one, approve with one (a proposal, or the
// queue's selection with one signature). Same-origin fetches only (CSP: connect-src 'self');
// the server checks every answer, so this file only carries bytes and says what went wrong.
"use strict";
(function () {
  const NO_WEBAUTHN = "This browser cannot use passkeys; use a current Chrome, Edge, Safari or Firefox.";
  const NOT_SIGNED = "Your passkey did not answer: the browser's dialog was cancelled or timed out, or it could not " +
    "verify you (PIN, fingerprint or face). Nothing was approved or changed; try again.";

  function b64urlToBytes(text) {
    const b64 = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
    const raw = atob(b64);
    const out = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
    return out.buffer;
  }
  function bytesToB64url(buffer) {
    const bytes = new Uint8Array(buffer);
    let raw = "";
    for (let i = 0; i < bytes.length; i++) raw += String.fromCharCode(bytes[i]);
    return btoa(raw).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  function credentials(list) {
    return (list || []).map(function (c) { return Object.assign({}, c, { id: b64urlToBytes(c.id) }); });
  }
  // py_webauthn's options_to_json is the JSON form; the browser wants bytes where it says base64url.
  function creationOptions(o) {
    return Object.assign({}, o, {
      challenge: b64urlToBytes(o.challenge),
      user: Object.assign({}, o.user, { id: b64urlToBytes(o.user.id) }),
      excludeCredentials: credentials(o.excludeCredentials),
    });
  }
  function requestOptions(o) {
    return Object.assign({}, o, { challenge: b64urlToBytes(o.challenge), allowCredentials: credentials(o.allowCredentials) });
  }
  function credentialJSON(c) {
    const r = c.response, out = { id: c.id, rawId: bytesToB64url(c.rawId), type: c.type, response: {} };
    out.response.clientDataJSON = bytesToB64url(r.clientDataJSON);
    if (r.attestationObject) {
      out.response.attestationObject = bytesToB64url(r.attestationObject);
      out.response.transports = r.getTransports ? r.getTransports() : [];
    } else {
      out.response.authenticatorData = bytesToB64url(r.authenticatorData);
      out.response.signature = bytesToB64url(r.signature);
      if (r.userHandle) out.response.userHandle = bytesToB64url(r.userHandle);
    }
    out.clientExtensionResults = c.getClientExtensionResults ? c.getClientExtensionResults() : {};
    return out;
  }

  // The origin passkeys are made for (the policy's review_url, or localhost on one machine), from the page.
  const ORIGIN = document.body.dataset.reviewOrigin || "the address in the policy's review_url";
  const errorBox = document.getElementById("passkey-error");
  function say(message) {
    if (!errorBox) return;
    errorBox.textContent = message;
    errorBox.hidden = !message;
  }
  function supported() {
    if (window.PublicKeyCredential && navigator.credentials) return true;
    say(NO_WEBAUTHN);
    return false;
  }
  // A same-origin form post; the answer is JSON, an error's message is shown as the server wrote it.
  async function post(url, fields) {
    const response = await fetch(url, {
      method: "POST", credentials: "same-origin", headers: { Accept: "application/json" },
      body: new URLSearchParams(fields),
    });
    let data = {};
    try { data = await response.json(); } catch (e) { data = { error: "The review page answered " + response.status + "." }; }
    if (!response.ok) throw new Error(data.error || "The review page answered " + response.status + ".");
    return data;
  }
  async function ask(how, options) {
    try {
      return how === "create"
        ? await navigator.credentials.create({ publicKey: creationOptions(options) })
        : await navigator.credentials.get({ publicKey: requestOptions(options) });
    } catch (e) {
      if (e && (e.name === "NotAllowedError" || e.name === "AbortError")) throw new Error(NOT_SIGNED);
      if (e && e.name === "SecurityError") throw new Error("Passkeys work only at " + ORIGIN + ", the review page's own address: open it there. " + e.message);
      if (e && e.name === "InvalidStateError") throw new Error("This authenticator already holds a passkey for you here.");
      throw new Error("The passkey could not be used: " + (e && e.message ? e.message : e));
    }
  }
  function busy(button, on) { if (button) button.disabled = on; }

  // -- enrol ----------------------------------------------------------------------------------
  const enrol = document.getElementById("enrol");
  if (enrol) {
    if (supported()) {
      enrol.addEventListener("submit", async function (event) {
        event.preventDefault();
        const button = document.getElementById("enrol-button");
        busy(button, true); say("");
        try {
          const credential = await ask("create", JSON.parse(enrol.dataset.options));
          const label = document.getElementById("passkey-label").value;
          const data = await post("/api/enrol/" + encodeURIComponent(enrol.dataset.token),
            { credential: JSON.stringify(credentialJSON(credential)), label: label });
          document.getElementById("enrol-label").textContent = "“" + data.label + "”";
          document.getElementById("enrol-done").hidden = false;
          enrol.hidden = true;
        } catch (e) { say(e.message); busy(button, false); }
      });
    } else {
      document.getElementById("enrol-button").disabled = true;
    }
  }

  // -- log in ---------------------------------------------------------------------------------
  const login = document.getElementById("passkey-login");
  if (login) {
    login.addEventListener("click", async function () {
      if (!supported()) return;
      busy(login, true); say("");
      try {
        const csrf = login.dataset.csrf;
        const start = await post("/api/login/passkey/options", { csrf_token: csrf });
        const credential = await ask("get", start.options);
        await post("/api/login/passkey", { csrf_token: csrf, ticket: start.ticket, credential: JSON.stringify(credentialJSON(credential)) });
        window.location.assign(login.dataset.next || "/");  // the server put only a local path there
      } catch (e) { say(e.message); busy(login, false); }
    });
  }

  // -- approve one ----------------------------------------------------------------------------
  const approve = document.getElementById("approve-passkey");
  if (approve) {
    approve.addEventListener("submit", async function (event) {
      event.preventDefault();
      if (!supported()) return;
      const button = document.getElementById("approve");
      busy(button, true); say("");
      const fields = Object.fromEntries(new FormData(approve));
      const base = "/api/proposals/" + encodeURIComponent(approve.dataset.id);
      try {
        const start = await post(base + "/challenge", { csrf_token: fields.csrf_token });
        const credential = await ask("get", start.options);
        await post(base + "/approve", Object.assign({}, fields, {
          nonce: start.nonce, digests: JSON.stringify(start.digests), credential: JSON.stringify(credentialJSON(credential)),
        }));
        window.location.assign("/proposals/" + encodeURIComponent(approve.dataset.id));
      } catch (e) { say(e.message); busy(button, false); }
    });
  }

  // -- approve the queue's selection with one assertion ---------------------------------------
  const batch = document.getElementById("batch");
  if (batch) {
    const button = document.getElementById("approve-selected");
    const count = document.getElementById("selected-count");
    const picks = function () { return Array.from(document.querySelectorAll("input.pick:checked")); };
    const update = function () {
      const n = picks().length;
      button.disabled = n === 0;
      button.textContent = n ? "Approve " + n + " selected" : "Approve selected";
      if (n) count.textContent = n + " selected: one passkey confirmation approves them all.";
    };
    document.querySelectorAll("input.pick").forEach(function (box) { box.addEventListener("change", update); });
    const all = document.getElementById("pick-all");
    if (all) all.addEventListener("change", function () {
      document.querySelectorAll("input.pick").forEach(function (box) { box.checked = all.checked; });
      update();
    });
    button.addEventListener("click", async function () {
      if (!supported()) return;
      const chosen = picks();
      busy(button, true); say("");
      try {
        const fields = new URLSearchParams({ csrf_token: batch.dataset.csrf });
        chosen.forEach(function (box) { fields.append("ids", box.value); });
        const start = await post("/api/challenge", fields);
        const credential = await ask("get", start.options);
        const items = chosen.map(function (box) {
          return { id: box.value, sha256: box.dataset.sha256, path: box.dataset.path, mode: box.dataset.mode };
        });
        const done = await post("/api/approve-selected", {
          csrf_token: batch.dataset.csrf, items: JSON.stringify(items), nonce: start.nonce,
          digests: JSON.stringify(start.digests), credential: JSON.stringify(credentialJSON(credential)),
        });
        window.location.assign("/?status=pending&approved=" + done.approved.length);
      } catch (e) { say(e.message); update(); }
    });
  }
})();
