/**
 * The Worker's fetcher bindings by name — a workerd external service `sluice serve` rendered for a
 * backend's `tls`, or a Cloudflare mTLS certificate binding — as plain fetch functions; undefined
 * when nothing with a `fetch` is bound by that name.
 */
export function fetcherBindings(env: object): (name: string) => typeof fetch | undefined {
  const bindings = env as Readonly<Record<string, { fetch?: unknown } | undefined>>;
  return (name) => {
    const binding = bindings[name];
    const f = binding?.fetch;
    // Called as the binding's method: a fetcher's fetch needs its receiver.
    return typeof f === "function" ? (input, init) => (f as typeof fetch).call(binding, input, init) : undefined;
  };
}
