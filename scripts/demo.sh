#!/usr/bin/env bash
# The guided tour, as far as Gatekeeper is built today: a fresh home in a temporary folder,
# the example policy checked, and the audit log shown and verified. Later issues extend it
# (proxy, review page, committer); nothing here pretends they exist yet.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/gatekeeper-demo.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
export GATEKEEPER_HOME="$tmp/home"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. Create a private home: database (migrated), secret.key, first audit event"
gatekeeper init

step "2. Load and check the example policy (a notes server; writes become proposals)"
cp "$repo/policy.yaml" "$tmp/policy.yaml"
mkdir -p "$tmp/workspace/notes"
gatekeeper policy check --policy "$tmp/policy.yaml"

step "3. The audit log so far"
gatekeeper audit log

step "4. Verify the hash chain, and print the head to keep elsewhere"
gatekeeper audit verify
gatekeeper audit head

step "5. Pending proposals (none yet: the proxy that records them is the next piece)"
gatekeeper audit proposals --status pending

printf '\nDemo home was %s (removed on exit).\n' "$GATEKEEPER_HOME"
