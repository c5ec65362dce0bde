import type { AdmissionLease } from "../../admit/admission.ts";
import type { RequestContext } from "../../context/request-context.ts";
import { planInputOperation } from "../../decide/decide.ts";
import type { DispatchPlan } from "../../decide/dispatch-plan.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import type { InputOperation } from "../../protocol/input-operation.ts";
import type { InputRequest, InputResponse } from "../../protocol/input-wire.ts";
import type { CompiledEntrypoint } from "../../publication/compile-publication.ts";
import type { Principal } from "../../publication/principal.ts";
import { inputSizing, prepareCharges, type RequestCharges } from "../../reserve/reserve-phase.ts";
import type { Subject } from "../../signals/subject.ts";
import type { PinnedSnapshot } from "../../snapshot/pinned-snapshot.ts";
import type { AdmissionKey, Early, KindTurn, Responded } from "../traffic-kind.ts";
import type { Ingress, Reply } from "./model-api.ts";
import { ModelCaller, type Inherited, type ModelKindDeps } from "./model-caller.ts";


const NO_PLUGINS = { names: [], decision: undefined } as const;

const UNBILLED: RequestCharges = { billing: undefined, budget: undefined, callBudget: undefined, injectedCap: undefined, task: undefined };

/**
 * An input-only request through the phases (the model kind's embeddings and moderations
 * operations): `POST /v1/embeddings` or `POST /v1/moderations` from the HTTP adapter, or the
 * gateway's own call on a request's behalf for a signal (an internal sub-call, its request already
 * neutral). The same authentication, budgets (input tokens, priced and reserved strictly),
 * attempts, evidence, breakers and records as chat; never streamed.
 */
export class InputTurn<Req extends InputRequest, Res extends InputResponse> implements KindTurn<Reply> {
  readonly kind = "model";
  readonly #op: InputOperation<Req, Res>;
  readonly #caller: ModelCaller;
  #request: Req | undefined;
  #entrypoint: CompiledEntrypoint | undefined;
  #plan: DispatchPlan | undefined;
  #charges: RequestCharges | undefined;
  #response: Res | undefined;
  #headers: Readonly<Record<string, string>> = {};

  constructor(
    op: InputOperation<Req, Res>,
    deps: ModelKindDeps,
    ctx: RequestContext,
    from: { readonly ingress: Ingress } | { readonly inherited: Inherited; readonly request: Req },
    pin: () => Promise<PinnedSnapshot>,
  ) {
    this.#op = op;
    this.#caller = new ModelCaller(deps, ctx, from, pin);
    this.#request = "request" in from ? from.request : undefined;
  }

  get caller(): ModelCaller {
    return this.#caller;
  }

  /** The plan as decided (for the adapter's dispatch action); such a request shows no neutral chat request. */
  get decided(): { readonly plan: DispatchPlan; readonly request: undefined } {
    return { plan: this.#plan!, request: undefined };
  }

  /** The answer in neutral form, once the request succeeded (a signal reads it). */
  get response(): Res | undefined {
    return this.#response;
  }

  authenticate(): Promise<Principal> {
    return this.#caller.authenticate();
  }

  async decode(): Promise<Early<Reply> | undefined> {
    const caller = this.#caller;
    const body = await caller.readIngress();
    if (this.#request === undefined) {
      const codec = caller.deps.codecs.get(caller.ingress!.protocol);
      const wire = codec && this.#op.wire(codec);
      if (!wire) throw new GatewayError("not_found", `The ${this.#op.id} operation is not served in this protocol.`);
      this.#request = wire.decodeRequest(body);
    }
    caller.ctx.record.stream = false;
    return undefined;
  }

  async authorize(): Promise<Early<Reply> | undefined> {
    const request = this.#request!;
    this.#entrypoint = this.#caller.authorize(request.model, this.#op.id, () => request.inputs.map((i) => (typeof i === "string" ? i : `[${i.length} tokens]`)).join("\n"));
    return undefined;
  }

  /** Nothing for signals or request plugins to read: such a request carries no conversation. */
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
    const plan = planInputOperation(deps.publication, this.#entrypoint!, this.#caller.decisionInput());
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
    this.#charges = await prepareCharges(caller.deps.reserve, caller.deps.publication, this.#entrypoint!, caller.ctx, caller.principal!, () => inputSizing(inputs), caller.trusted, caller.callBudget, caller.taskBudget);
  }

  admission(): AdmissionKey {
    return { tenant: this.#caller.principal!.tenantId, model: this.#plan!.entrypoint };
  }

  async invoke(lease: AdmissionLease): Promise<void> {
    const caller = this.#caller;
    const execution = await caller.deps.invoker.executeInput(this.#op, this.#plan!, this.#request!, await caller.invocation(this.#charges!, lease));
    if (!execution.ok) throw execution.error;
    this.#response = execution.response;
    this.#headers = execution.headers;
  }

  respond(): Responded<Reply> {
    const { deps, ingress } = this.#caller;
    const meta = this.#caller.replyMeta(this.#charges, [], this.#headers);
    const codec = ingress ? deps.codecs.get(ingress.protocol) : undefined;
    const wire = codec && this.#op.wire(codec);
    // An in-process caller gets no body.
    const body = wire ? wire.encodeResponse(this.#response!, this.#request!, this.#caller.stamp(this.#plan!.entrypoint)) : undefined;
    return { reply: { kind: "buffered", body, meta }, streaming: false };
  }

  failed(error: GatewayError): Reply {
    return { kind: "error", error, meta: this.#caller.replyMeta(this.#charges, []) };
  }
}
