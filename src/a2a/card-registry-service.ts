import { z } from "zod";
import type { AlarmStorage } from "../deps/alarm-storage.ts";
import type { Clock } from "../deps/clock.ts";
import { checkEgress, type EgressPolicy } from "../egress/egress-guard.ts";
import { decodeUtf8Strict, readBounded } from "../io/bounded-read.ts";
import { generationsOf, readAgentCard, type AgentCardView } from "../protocol/a2a/agent-card.ts";
import { credentialHeader } from "../egress/credential-header.ts";

/**
 * An agent's card registry: what the AgentCardRegistry Durable Object (one per agent) serves over
 * RPC and runs on its alarm, runnable without it.
 *
 * The card is fetched only on the alarm, never because a request read it: `watch` stores where the
 * card is and arms the alarm (at once when no card is held yet), and each alarm fetches the card
 * through the egress guard, validates it, keeps it when good and re-arms `refreshMs` later. A card
 * that fails — unreachable, refused by the guard, not JSON, invalid, or naming a JSON-RPC endpoint
 * the guard refuses — is recorded with its reasons and the last good card stays; the next try
 * comes sooner (`FAILURE_RETRY_MS`, at most `refreshMs`).
 *
 * Credentials: the agent's credential is sent with the card fetch only when the config says the
 * card needs it (`credential.onCardFetch`): agent cards are public documents, and a secret sent
 * where it is not needed is a secret one more server holds. Only the secret's name is stored.
 */

/** Where an agent's card is and how to fetch it (secrets by name only). */
export const cardTargetSchema = z.strictObject({
  agent: z.string().min(1),
  url: z.url({ protocol: /^https?$/ }),
  refreshMs: z.number().int().min(1000),
  credential: z.strictObject({ secret: z.string().min(1), scheme: z.enum(["bearer", "x-api-key"]) }).optional(),
});
export type CardTarget = z.infer<typeof cardTargetSchema>;

/** The last good card and when it was fetched. */
export interface StoredCard {
  readonly view: AgentCardView;
  readonly fetchedAt: number;
}

/** The last failed fetch: when, and every reason. */
export interface CardFailure {
  readonly at: number;
  readonly reasons: readonly string[];
}

/** What a registry keeps besides its target. */
export interface CardRecord {
  readonly card: StoredCard | undefined;
  readonly lastFailure: CardFailure | undefined;
}

/** What a registry answers. */
export interface CardRegistryView extends CardRecord {
  /** True while a target is stored and fetched on the alarm. */
  readonly watching: boolean;
  /** {@link cardTargetKey} of the stored target; undefined when not watching. */
  readonly targetKey: string | undefined;
  /** When the next fetch is due (ms); undefined when none is scheduled. */
  readonly nextFetchAt: number | undefined;
}

/** Where a registry's target and record live (the object's SQLite storage, or memory in tests). */
export interface CardStore {
  /** Runs `fn` atomically, with no other call interleaved (a Durable Object's `transactionSync`). */
  transaction<T>(fn: () => T): T;
  loadTarget(): CardTarget | undefined;
  saveTarget(target: CardTarget): void;
  loadRecord(): CardRecord;
  saveRecord(record: CardRecord): void;
  /** Deletes everything stored, the alarm included; the store stays usable afterwards. */
  drop(): Promise<void>;
}

/** The fetch a registry uses: a plain function (the global fetch in the object, a fake in tests). */
export type CardFetch = (input: string, init: RequestInit) => Promise<Response>;

export interface CardRegistryDeps {
  readonly store: CardStore;
  readonly alarm: AlarmStorage;
  readonly clock: Clock;
  /** The egress rules every fetch and every card's endpoints pass, read per fetch. */
  readonly egress: () => EgressPolicy;
  /** A secret's value by name, read at fetch time; undefined when it is not set. */
  readonly secret: (name: string) => string | undefined;
  /** Give up on a fetch after this long, in ms. Default 10000. */
  readonly timeoutMs?: number;
}

/** The global `fetch`, as the registry calls it: a plain function, never a method of something else. */
export const globalCardFetch: CardFetch = (input, init) => fetch(input, init);

/** After a failed fetch, the next try comes this soon (or after `refreshMs`, when that is sooner). */
export const FAILURE_RETRY_MS = 30_000;
/** The largest card read, in bytes. */
export const MAX_CARD_BYTES = 1024 * 1024;

/** A stable key of a target: a changed target is stored again, an unchanged one costs nothing. */
export function cardTargetKey(target: CardTarget): string {
  const c = target.credential;
  return JSON.stringify([target.agent, target.url, target.refreshMs, c?.secret ?? null, c?.scheme ?? null]);
}

/** What an AgentCardRegistry object serves and runs on its alarm (see this file's opening comment). */
export class CardRegistryService {
  readonly #store: CardStore;
  readonly #alarm: AlarmStorage;
  readonly #clock: Clock;
  readonly #egress: () => EgressPolicy;
  readonly #secret: (name: string) => string | undefined;
  readonly #timeoutMs: number;

  constructor(deps: CardRegistryDeps) {
    this.#store = deps.store;
    this.#alarm = deps.alarm;
    this.#clock = deps.clock;
    this.#egress = deps.egress;
    this.#secret = deps.secret;
    this.#timeoutMs = deps.timeoutMs ?? 10_000;
  }

  /** Stores `target` and arms the alarm: at once when no card is held, else when the held one is due. @throws ZodError on an invalid target. */
  async watch(target: CardTarget): Promise<CardRegistryView> {
    const parsed = cardTargetSchema.parse(target);
    const record = this.#store.transaction(() => {
      const current = this.#store.loadTarget();
      const changed = current === undefined || cardTargetKey(current) !== cardTargetKey(parsed);
      if (changed) this.#store.saveTarget(parsed);
      return { record: this.#store.loadRecord(), changed };
    });
    const now = this.#clock.now();
    // A new target (another URL or credential) is fetched at once; an unchanged one when due.
    const due = record.changed || record.record.card === undefined ? now : Math.max(now, record.record.card.fetchedAt + parsed.refreshMs);
    const armed = await this.#alarm.getAlarm();
    if (armed === null || armed > due) await this.#alarm.setAlarm(due);
    return this.state();
  }

  async state(): Promise<CardRegistryView> {
    const { target, record } = this.#store.transaction(() => ({ target: this.#store.loadTarget(), record: this.#store.loadRecord() }));
    const next = target === undefined ? null : await this.#alarm.getAlarm();
    return { ...record, watching: target !== undefined, targetKey: target === undefined ? undefined : cardTargetKey(target), nextFetchAt: next ?? undefined };
  }

  async unwatch(): Promise<void> {
    await this.#store.drop();
  }

  /** Fetches the watched card once with `fetchFn`, records the outcome and re-arms; nothing when unwatched. */
  async alarm(fetchFn: CardFetch): Promise<void> {
    const target = this.#store.transaction(() => this.#store.loadTarget());
    if (target === undefined) return;
    const outcome = await this.#fetchCard(target, fetchFn);
    const next = this.#store.transaction(() => {
      const current = this.#store.loadTarget();
      // Replaced while the fetch was in flight: the new target's own fetch is already armed.
      if (current === undefined || cardTargetKey(current) !== cardTargetKey(target)) return undefined;
      const now = this.#clock.now();
      const before = this.#store.loadRecord();
      if (outcome.ok) {
        this.#store.saveRecord({ card: { view: outcome.view, fetchedAt: now }, lastFailure: undefined });
        return now + current.refreshMs;
      }
      this.#store.saveRecord({ card: before.card, lastFailure: { at: now, reasons: outcome.reasons } });
      return now + Math.min(current.refreshMs, FAILURE_RETRY_MS);
    });
    if (next !== undefined) await this.#alarm.setAlarm(next);
  }

  async #fetchCard(target: CardTarget, fetchFn: CardFetch): Promise<{ ok: true; view: AgentCardView } | { ok: false; reasons: string[] }> {
    const policy = this.#egress();
    const verdict = checkEgress(target.url, policy);
    if (!verdict.ok) return { ok: false, reasons: [`egress_refused: ${verdict.refusal.message}`] };
    // A 1.0 agent that also speaks 0.3 serves the 0.3 card to a request without A2A-Version.
    let headers: Record<string, string> = { accept: "application/json", "a2a-version": "1.0" };
    if (target.credential !== undefined) {
      const value = this.#secret(target.credential.secret);
      if (value === undefined || value === "") return { ok: false, reasons: [`credential_missing: ${target.credential.secret}`] };
      headers = { ...headers, ...credentialHeader(target.credential.scheme, value) };
    }
    let body: string;
    try {
      // No redirects: a redirect's target has not passed the egress guard.
      const res = await fetchFn(verdict.url.href, { method: "GET", headers, redirect: "manual", signal: AbortSignal.timeout(this.#timeoutMs) });
      if (res.status !== 200) {
        await res.body?.cancel();
        return { ok: false, reasons: [`status ${res.status}${res.status >= 300 && res.status < 400 ? " (redirects are not followed)" : ""}`] };
      }
      if (res.body === null) return { ok: false, reasons: ["empty body"] };
      const read = await readBounded(res.body, { maxBytes: MAX_CARD_BYTES });
      if (read.overflowed) return { ok: false, reasons: [`the card is larger than ${MAX_CARD_BYTES} bytes`] };
      body = decodeUtf8Strict(read.bytes);
    } catch (err) {
      return { ok: false, reasons: [`unreachable: ${err instanceof Error ? err.name : "error"}`] };
    }
    let json: unknown;
    try {
      json = JSON.parse(body);
    } catch {
      return { ok: false, reasons: ["not JSON"] };
    }
    const reading = readAgentCard(json);
    if (!reading.ok) return { ok: false, reasons: [...reading.reasons] };
    const refused = endpointRefusals(reading.view, policy);
    return refused.length > 0 ? { ok: false, reasons: refused } : { ok: true, view: reading.view };
  }
}

/** The card's JSON-RPC endpoints the egress guard refuses (the gateway would send calls there). */
export function endpointRefusals(view: AgentCardView, policy: EgressPolicy): string[] {
  return generationsOf(view).flatMap((g) => {
    const verdict = checkEgress(view.jsonRpc[g]!, policy);
    return verdict.ok ? [] : [`egress_refused: the A2A ${g} JSON-RPC endpoint: ${verdict.refusal.message}`];
  });
}
