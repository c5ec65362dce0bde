/**
 * HTTP/1.1 chunked-encoding bytes of `body` cut into `chunk`-byte chunks, terminator included:
 * what a client sending tiny chunks puts on the wire (the request-edge tests and the tiny-chunk
 * bench send it on a raw socket). Sized exactly, so a megabyte in 1-byte chunks is built once.
 */
export function chunkedWire(body: Buffer, chunk: number): Buffer {
  const sizeLine = (n: number) => `${n.toString(16)}\r\n`;
  const full = Math.floor(body.length / chunk);
  const rest = body.length % chunk;
  const wire = Buffer.allocUnsafe(full * (sizeLine(chunk).length + chunk + 2) + (rest > 0 ? sizeLine(rest).length + rest + 2 : 0) + 5);
  let at = 0;
  for (let i = 0; i < body.length; i += chunk) {
    const n = Math.min(chunk, body.length - i);
    at += wire.write(sizeLine(n), at, "latin1");
    at += body.copy(wire, at, i, i + n);
    at += wire.write("\r\n", at, "latin1");
  }
  at += wire.write("0\r\n\r\n", at, "latin1");
  return wire.subarray(0, at);
}
