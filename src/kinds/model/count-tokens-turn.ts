import type { AdmissionLease } from "../../admit/admission.ts";
import type { RequestContext } from "../../context/request-context.ts";
import type { TokenCountRecord } from "../../context/request-record.ts";
import { decideChat } from "../../decide/decide.ts";
import type { DispatchPlan } from "../../decide/dispatch-plan.ts";
import { estimatePromptTokens } from "../../protocol/prompt-estimate.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import type { NeutralRequest } from "../../protocol/neutral.ts";
import type { TokenCountCodec } from "../../protocol/token-count.ts";
import type { CompiledEntrypoint } from "../../publication/compile-publication.ts";
import type { Principal } from "../../publication/principal.ts";
import { prepareUncharged, UNCHARGED } from "../../reserve/reserve-phase.ts";
import type { SignalSet } from "../../signals/signal-set.ts";
import type { Subject } from "../../signals/subject.ts";
import type { PinnedSnapshot } from "../../snapshot/pinned-snapshot.ts";
import type { AdmissionKey, Early, KindTurn, Responded } from "../traffic-kind.ts";
import type { Ingress, Reply } from "./model-api.ts";
import { ModelCaller, type ModelKindDeps } from "./model-caller.ts";

/**
 * A token count through the phases (the model kind's `count_tokens` operation, Anthropic's `POST
 * /v1/messages/count_tokens`): authenticated and authorized as a chat of the entrypoint it names,
 * decided like one (the plan's first tier is the model that would answer), then counted by a
 * backend of that model whose protocol counts tokens, or estimated by the gateway when none does
 * or asking failed. Counting is free at the provider, so nothing is reserved or charged: the
 * reserve phase only checks attribution, and the attempts owe no usage. The answer says which
 * figure it is (`ReplyMeta.tokenCount`), and so does the record.
 */
export class CountTokensTurn implements KindTurn<Reply> {
  readonly kind = "model";
  readonly #caller: ModelCaller;
  #wire: TokenCountCodec | undefined;
  #request: NeutralRequest | undefined;
  #entrypoint: CompiledEntrypoint | undefined;
  #plan: DispatchPlan | undefined;
  #decision: { readonly name: string; readonly plugins: readonly string[] } | undefined;
  #count: TokenCountRecord | undefined;
  #headers: Readonly<Record<string, string>> = {};

  constructor(deps: ModelKindDeps, ctx: RequestContext, ingress: Ingress, pin: () => Promise<PinnedSnapshot>) {
    this.#caller = new ModelCaller(deps, ctx, { ingress }, pin);
  }

  get caller(): ModelCaller {
    return this.#caller;
  }

  /** The plan as decided (for the adapter's dispatch action); a count shows no chat request to dispatch. */
  get decided(): { readonly plan: DispatchPlan; readonly request: undefined } {
    return { plan: this.#plan!, request: undefined };
  }

  authenticate(): Promise<Principal> {
    return this.#caller.authenticate();
  }

  async decode(): Promise<Early<Reply> | undefined> {
    const caller = this.#caller;
    const body = await caller.readIngress();
    const wire = caller.deps.codecs.get(caller.ingress!.protocol)?.countTokens;
    if (!wire) throw new GatewayError("not_found", "Token counting is not served in this protocol.");
    this.#wire = wire;
    this.#request = wire.decodeRequest(body);
    caller.ctx.record.stream = false;
    return undefined;
  }

  async authorize(): Promise<Early<Reply> | undefined> {
    const request = this.#request!;
    // A count is of a chat: the entrypoint must serve chat, and the key be granted it.
    this.#entrypoint = this.#caller.authorizeChat(request);
    return undefined;
  }

  /** The conversation, as a chat's: a `request_safe` plugin's redaction applies to what is sent to be counted. */
  subject(): Subject | undefined {
    return this.#request === undefined ? undefined : { kind: "model", request: this.#request };
  }

  async decide(signals: SignalSet): Promise<Early<Reply> | undefined> {
    const { ctx, deps } = this.#caller;
    const decided = await decideChat(deps.publication, this.#entrypoint!, this.#request!, this.#caller.decisionInput(), signals);
    this.#plan = decided.plan;
    this.#decision = decided.decision;
    ctx.record.route = decided.plan.route;
    ctx.record.decision = decided.record;
    ctx.setDeadline(decided.plan.deadlineAt);
    return undefined;
  }

  trusted(): ReadonlyMap<string, string> {
    return this.#caller.trusted;
  }

  /** As a chat's: what is sent to be counted is what the message would send. */
  plugins(): { readonly names: readonly string[]; readonly decision: string | undefined } {
    const own = this.#entrypoint?.plugins ?? [];
    const chosen = this.#decision?.plugins ?? [];
    return { names: chosen.length === 0 ? own : [...own, ...chosen], decision: this.#decision?.name };
  }

  amend(subject: Subject): void {
    if (subject.kind === "model") this.#request = subject.request;
  }

  async reserve(): Promise<void> {
    const caller = this.#caller;
    await prepareUncharged(caller.deps.reserve, caller.deps.publication, this.#entrypoint!, caller.ctx, caller.principal!, caller.trusted);
  }

  admission(): AdmissionKey {
    return { tenant: this.#caller.principal!.tenantId, model: this.#plan!.entrypoint };
  }

  async invoke(lease: AdmissionLease): Promise<void> {
    const caller = this.#caller;
    const request = this.#request!;
    const execution = await caller.deps.invoker.countTokens(this.#plan!, request, await caller.invocation(UNCHARGED, lease));
    if (execution.ok) {
      this.#count = { source: "reported", inputTokens: execution.inputTokens };
      this.#headers = execution.headers;
    } else {
      // The request's own end (a client gone, its deadline, a drain) is not a reason to estimate.
      caller.ctx.checkpoint();
      this.#count = { source: "estimated", inputTokens: estimatePromptTokens(request), fallback: { reason: execution.reason, errorCode: execution.error.code } };
    }
    caller.ctx.record.tokenCount = this.#count;
  }

  respond(): Responded<Reply> {
    const count = this.#count!;
    const meta = { ...this.#caller.replyMeta(undefined, [], this.#headers), tokenCount: count.source };
    return { reply: { kind: "buffered", body: this.#wire!.encodeResponse(count.inputTokens), meta }, streaming: false };
  }

  failed(error: GatewayError): Reply {
    return { kind: "error", error, meta: this.#caller.replyMeta(undefined, []) };
  }
}
