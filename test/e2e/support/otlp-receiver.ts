import { createServer, type Server } from "node:http";

/** One OTLP/HTTP export as the receiver got it. */
export interface OtlpPost {
  readonly path: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: any;
}

/** An OTLP/HTTP (JSON) receiver on loopback that keeps every export, for tests. */
export interface OtlpReceiver {
  readonly url: string;
  readonly posts: OtlpPost[];
  /** Every span of every trace export, flattened. */
  spans(): any[];
  /** The data points of every metric export named `name`, newest export last. */
  metricExports(name: string): any[][];
  /** Bodies as text, for leak scans. */
  rawBodies(): string[];
  stop(): Promise<void>;
}

/** Starts the receiver on a free loopback port. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const posts: OtlpPost[] = [];
  const raw: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      raw.push(text);
      try {
        posts.push({ path: req.url ?? "", headers: req.headers, body: JSON.parse(text) });
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      } catch {
        res.writeHead(400).end("not json");
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const addr = server.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    posts,
    spans: () => posts.filter((p) => p.path === "/v1/traces").flatMap((p) => p.body.resourceSpans.flatMap((rs: any) => rs.scopeSpans.flatMap((ss: any) => ss.spans))),
    metricExports: (name) =>
      posts
        .filter((p) => p.path === "/v1/metrics")
        .map((p) => p.body.resourceMetrics.flatMap((rm: any) => rm.scopeMetrics.flatMap((sm: any) => sm.metrics.filter((m: any) => m.name === name).flatMap((m: any) => (m.sum ?? m.gauge ?? m.histogram).dataPoints)))),
    rawBodies: () => [...raw],
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
