// Entry of the bench-only ledger Worker (bench/ledger.ts): the real BudgetLedger Durable Object and
// a fetch handler that drives it through the real client.
//
// Plain JavaScript on purpose: tsconfig.node.json type-checks bench/**/*.ts with Node's types, and
// the Durable Object (checked by tsconfig.json with workerd's types) cannot be checked that way.
// Everything this file names is type-checked where it lives.
export { BudgetLedger } from "../../durable-objects/budget-ledger.ts";
export { default } from "./handler.ts";
