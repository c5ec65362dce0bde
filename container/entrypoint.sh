#!/bin/sh
# The image's entrypoint: `sluice serve` on the image's paths and ports, each overridable from
# the environment. CI runs this same script natively (test/e2e/container-entrypoint.test.ts).
# `exec`, so that the CLI is PID 1 and receives SIGTERM: it drains, then stops workerd.
# The admin listener stays on the container's loopback unless SLUICE_ADMIN says otherwise (a
# published admin port needs SLUICE_ADMIN=0.0.0.0:8081; compose.yaml sets it).
set -eu
root="${SLUICE_HOME:-$(cd "$(dirname "$0")/.." && pwd)}"
set -- serve \
  --config "${SLUICE_CONFIG_DIR:-/etc/sluice}" \
  --state "${SLUICE_STATE_DIR:-/var/lib/sluice}" \
  --public "${SLUICE_PUBLIC:-0.0.0.0:8080}" \
  --admin "${SLUICE_ADMIN:-127.0.0.1:8081}" \
  --drain-timeout "${SLUICE_DRAIN_TIMEOUT:-30s}" \
  --bundle "${SLUICE_BUNDLE_DIR:-$root/dist}" \
  "$@"
# HTTPS listeners: a PEM certificate chain and key per listener (files mounted into the container).
if [ -n "${SLUICE_TLS_CERT:-}" ] || [ -n "${SLUICE_TLS_KEY:-}" ]; then
  set -- "$@" --tls-cert "${SLUICE_TLS_CERT:-}" --tls-key "${SLUICE_TLS_KEY:-}"
fi
if [ -n "${SLUICE_ADMIN_TLS_CERT:-}" ] || [ -n "${SLUICE_ADMIN_TLS_KEY:-}" ]; then
  set -- "$@" --admin-tls-cert "${SLUICE_ADMIN_TLS_CERT:-}" --admin-tls-key "${SLUICE_ADMIN_TLS_KEY:-}"
fi
# Secrets no config file names yet (backends a snapshot will add later), comma-separated.
for name in $(printf '%s' "${SLUICE_EXTRA_SECRETS:-}" | tr ',' ' '); do
  set -- "$@" --secret "$name"
done
exec node "$root/cli/main.ts" "$@"
