import type { AdmissionLease } from "../../admit/admission.ts";
import type { RequestContext } from "../../context/request-context.ts";
import { planEmbeddings } from "../../decide/decide.ts";
import type { DispatchPlan } from "../../decide/dispatch-plan.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import type { NeutralEmbeddingRequest, NeutralEmbeddingResponse } from "../../protocol/embeddings.ts";
import type { CompiledEntrypoint } from "../../publication/compile-publication.ts";
import type { Principal } from "../../publication/principal.ts";
import { embeddingSizing, prepareCharges, type RequestCharges } from "../../reserve/reserve-phase.ts";
import type { Subject } from "../../signals/subject.ts";
import type { PinnedSnapshot } from "../../snapshot/pinned-snapshot.ts";
import type { AdmissionKey, Early, KindTurn, Responded } from "../traffic-kind.ts";
import type { EmbeddingSubcall, Ingress, Reply } from "./model-api.ts";
import { ModelCaller, type Inherited, type ModelKindDeps } from "./model-caller.ts";

const NO_PLUGINS = { names: [], decision: undefined } as const;

const UNBILLED: RequestCharges = { billing: undefined, budget: undefined, callBudget: undefined, injectedCap: undefined, task: undefined };

/**
 * An embeddings request through the phases (the model kind's embeddings operation): `POST
 * /v1/embeddings` from the HTTP adapter, or the gateway's own embedding of a prompt for a
 * similarity signal (an internal sub-call). The same authentication, budgets (input tokens,
 * priced and reserved strictly), attempts, evidence, breakers and records as chat; never streamed.
 */
export class EmbeddingsTurn implements KindTurn<Reply> {
  readonly kind = "model";
  readonly #caller: ModelCaller;
  readonly #sub: EmbeddingSubcall | undefined;
  #request: NeutralEmbeddingRequest | undefined;
  #entrypoint: CompiledEntrypoint | undefined;
  #plan: DispatchPlan | undefined;
  #charges: RequestCharges | undefined;
  #response: NeutralEmbeddingResponse | undefined;
  #headers: Readonly<Record<string, string>> = {};

  constructor(deps: ModelKindDeps, ctx: RequestContext, from: { readonly ingress: Ingress } | { readonly inherited: Inherited; readonly sub: EmbeddingSubcall }, pin: () => Promise<PinnedSnapshot>) {
    this.#caller = new ModelCaller(deps, ctx, from, pin);
    this.#sub = "sub" in from ? from.sub : undefined;
  }

  get caller(): ModelCaller {
    return this.#caller;
  }

  /** The plan as decided (for the adapter's dispatch action); an embedding shows no neutral chat request. */
  get decided(): { readonly plan: DispatchPlan; readonly request: undefined } {
    return { plan: this.#plan!, request: undefined };
  }

  authenticate(): Promise<Principal> {
    return this.#caller.authenticate();
  }

  async decode(): Promise<Early<Reply> | undefined> {
    const caller = this.#caller;
    const body = await caller.readIngress();
    if (this.#sub) this.#request = { model: this.#sub.model, inputs: this.#sub.inputs, dimensions: this.#sub.dimensions, encodingFormat: "float" };
    else {
      const wire = caller.deps.codecs.get(caller.ingress!.protocol)?.embeddings;
      if (!wire) throw new GatewayError("not_found", "Embeddings are not served in this protocol.");
      this.#request = wire.decodeRequest(body);
    }
    caller.ctx.record.stream = false;
    return undefined;
  }

  async authorize(): Promise<Early<Reply> | undefined> {
    const request = this.#request!;
    this.#entrypoint = this.#caller.authorize(request.model, "embeddings", () => request.inputs.map((i) => (typeof i === "string" ? i : `[${i.length} tokens]`)).join("\n"));
    return undefined;
  }

  /** Nothing for signals or request plugins to read: an embedding request carries no conversation. */
  subject(): Subject | undefined {
    return undefined;
  }

  trusted(): ReadonlyMap<string, string> {
    return this.#caller.trusted;
  }

  plugins(): { readonly names: readonly string[]; readonly decision: string | undefined } {
    return NO_PLUGINS;
  }

  async decide(): Promise<Early<Reply> | undefined> {
    const { ctx, deps } = this.#caller;
    const plan = planEmbeddings(deps.publication, this.#entrypoint!, this.#caller.decisionInput());
    this.#plan = plan;
    ctx.record.route = plan.route;
    ctx.setDeadline(plan.deadlineAt);
    return undefined;
  }

  amend(): void {}

  async reserve(): Promise<void> {
    const caller = this.#caller;
    // An explain's embedding is the operator's question, not the caller's traffic: nothing is
    // reserved against the caller's budgets (docs/routing.md, "Explain and evaluate").
    if (caller.explaining) {
      this.#charges = UNBILLED;
      return;
    }
    const inputs = this.#request!.inputs;
    this.#charges = await prepareCharges(caller.deps.reserve, caller.deps.publication, this.#entrypoint!, caller.ctx, caller.principal!, () => embeddingSizing(inputs), caller.trusted, caller.callBudget, caller.taskBudget);
  }

  admission(): AdmissionKey {
    return { tenant: this.#caller.principal!.tenantId, model: this.#plan!.entrypoint };
  }

  async invoke(lease: AdmissionLease): Promise<void> {
    const caller = this.#caller;
    const execution = await caller.deps.invoker.embed(this.#plan!, this.#request!, await caller.invocation(this.#charges!, lease));
    if (!execution.ok) throw execution.error;
    this.#response = execution.response;
    this.#headers = execution.headers;
  }

  respond(): Responded<Reply> {
    const { deps, ingress } = this.#caller;
    const response = this.#response!;
    const meta = this.#caller.replyMeta(this.#charges, [], this.#headers);
    const wire = ingress ? deps.codecs.get(ingress.protocol)?.embeddings : undefined;
    const body = wire ? wire.encodeResponse(response, this.#request!, this.#plan!.entrypoint) : undefined;
    return { reply: { kind: "buffered", embeddings: response, body, meta }, streaming: false };
  }

  failed(error: GatewayError): Reply {
    return { kind: "error", error, meta: this.#caller.replyMeta(this.#charges, []) };
  }
}
