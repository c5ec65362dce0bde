/**
 * The workload behind a call — which agent instance, on behalf of which end user — as trusted
 * metadata: read only from headers the operator named (gateway.yaml `governance.workload`, each
 * also in `security.trustedHeaders`, so only a trusted hop sets them). It is recorded beside the
 * call, never used as identity or for money: the principal (tenant, team, project, key) is
 * whoever the credential says.
 */
export interface Workload {
  readonly agent?: string | undefined;
  readonly endUser?: string | undefined;
}

/** Which trusted headers carry the workload. */
export interface WorkloadHeaders {
  readonly agentHeader?: string | undefined;
  readonly endUserHeader?: string | undefined;
}

/** The workload a request's headers carry (each value cut to 128 characters), or undefined when none. */
export function workloadOf(headers: { get(name: string): string | null }, names: WorkloadHeaders): Workload | undefined {
  const read = (name: string | undefined) => {
    const v = name === undefined ? null : headers.get(name);
    return v === null || v.trim() === "" ? undefined : v.trim().slice(0, 128);
  };
  const agent = read(names.agentHeader);
  const endUser = read(names.endUserHeader);
  return agent === undefined && endUser === undefined ? undefined : { ...(agent !== undefined ? { agent } : {}), ...(endUser !== undefined ? { endUser } : {}) };
}
