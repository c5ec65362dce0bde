// The image's HEALTHCHECK: GET /health on the public listener (liveness, not readiness: a
// draining gateway is alive). The port follows SLUICE_PUBLIC, as the entrypoint's does.
const address = process.env.SLUICE_PUBLIC || "0.0.0.0:8080";
const port = address.slice(address.lastIndexOf(":") + 1);
fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(2500) }).then(
  (res) => process.exit(res.ok ? 0 : 1),
  () => process.exit(1),
);
