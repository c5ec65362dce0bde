// The image's HEALTHCHECK: GET /health on the public listener (liveness, not readiness: a
// draining gateway is alive). The port follows SLUICE_PUBLIC, as the entrypoint's does; the
// scheme follows SLUICE_TLS_CERT. Over HTTPS the certificate is not verified: this asks the
// container's own loopback listener whether it answers, sends nothing secret, and the image has no
// CA for a certificate a private CA issued.
import { request } from "node:https";

const address = process.env.SLUICE_PUBLIC || "0.0.0.0:8080";
const port = address.slice(address.lastIndexOf(":") + 1);
if (process.env.SLUICE_TLS_CERT) {
  const req = request(`https://127.0.0.1:${port}/health`, { rejectUnauthorized: false, timeout: 2500 }, (res) => {
    res.resume();
    process.exit(res.statusCode === 200 ? 0 : 1);
  });
  req.on("timeout", () => req.destroy());
  req.on("error", () => process.exit(1));
  req.end();
} else {
  fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(2500) }).then(
    (res) => process.exit(res.ok ? 0 : 1),
    () => process.exit(1),
  );
}
