import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { tableCells } from "./support/markdown-table.ts";

const ROOT = resolve(import.meta.dirname, "..", "..");

function files(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

const parse = (text: string, name = "inline.ts") => ts.createSourceFile(name, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);

const parsed = new Map<string, ts.SourceFile>();
/** A repo file's syntax tree, parsed once for all the rules. */
function sourceFile(file: string): ts.SourceFile {
  let tree = parsed.get(file);
  if (tree === undefined) parsed.set(file, (tree = parse(readFileSync(join(ROOT, file), "utf8"), file)));
  return tree;
}

/**
 * Every module specifier a source names, in the order written: static imports (`import type`
 * included), side-effect imports, `export … from` and `export * from`, `import x = require(…)`,
 * dynamic `import(…)` and type-position `import(…)`. Read from the syntax tree, so a specifier in a
 * comment or a string is not an import and a statement's layout does not matter.
 */
function importSpecifiers(source: string | ts.SourceFile): string[] {
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier !== undefined && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push(node.moduleSpecifier.text);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference) && ts.isStringLiteral(node.moduleReference.expression)) {
      found.push(node.moduleReference.expression.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [arg] = node.arguments;
      // A computed specifier cannot be checked: it is reported, never skipped.
      found.push(arg !== undefined && ts.isStringLiteralLike(arg) ? arg.text : `<computed import: ${node.getText()}>`);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      found.push(node.argument.literal.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(typeof source === "string" ? parse(source) : source);
  return found;
}

const resolved = new Map<string, string[]>();
/** A file's import specifiers, relative ones resolved to repo paths (`src/x/y.ts`). */
function imports(file: string): string[] {
  let specs = resolved.get(file);
  if (specs === undefined) resolved.set(file, (specs = importSpecifiers(sourceFile(file)).map((s) => (s.startsWith(".") ? relative(ROOT, resolve(ROOT, dirname(file), s)) : s))));
  return specs;
}

const concern = (path: string) => /^src\/([^/]+)\//.exec(path)?.[1];

/**
 * One total order of the layers, innermost first: a folder may import only folders before it.
 * The request runtime's phase folders sit between the pure building blocks below them and the
 * engine that runs them in order above them, in the order of {@link PHASES}; the adapters (worker,
 * http) come last.
 */
const LAYERS = [
  "errors",
  "digest",
  "deps",
  "io",
  "egress",
  "traffic",
  "protocol",
  "signals",
  "cache",
  "attribution",
  "audit",
  "mcp",
  "approvals",
  "ledger",
  "call-budget",
  "tasks",
  "config",
  "publication",
  "a2a",
  "context",
  "snapshot",
  "publication-lifecycle",
  "telemetry",
  "task-ledger",
  "plugins",
  "auth",
  "decide",
  "reserve",
  "admit",
  "invoker",
  "respond",
  "settle",
  "looper",
  "kinds",
  "engine",
  "worker",
  "http",
] as const;

/**
 * The request runtime's phase folders in the order the engine runs them: no phase imports a later
 * one. `auth` is authenticate and authorize, `invoker` is invoke. `protocol` runs as the decode
 * phase but is also a building block every later phase speaks (neutral requests, events, codecs),
 * so it sits low in {@link LAYERS} and is not listed here.
 */
const PHASES = ["auth", "decide", "reserve", "admit", "invoker", "respond", "settle"] as const;

/** Folders that must stay transport-neutral: no Hono, no Workers runtime modules, no bindings. */
const ADAPTERS = new Set(["worker", "http"]);

/** The composition root: the one file of src/ that may name the Durable Object classes. */
const COMPOSITION_ROOT = "src/index.ts";

/**
 * A Durable Object is an RPC shell over logic in src/ that is unit-tested without it. Every class in
 * durable-objects/ that extends `DurableObject` (from `cloudflare:workers`) is checked on its
 * syntax tree, member by member (constructor, methods, getters, setters and field initializers,
 * private ones and the arrow functions inside them included):
 *
 * - **Straight line.** No `if`, `switch`, loop, `try`, `throw` or label, no `?:`, no `&&`, `||` or
 *   `??`, no `?.`, no operator at all (arithmetic, comparison, `!`, `typeof`, `in`, `instanceof`,
 *   `delete`, `++`, the comma), no template with substitutions, no computed property access, no
 *   parameter default. Each of those is a decision or a computation, and a decision made in the
 *   object can only be tested through the object. What is left: calls, `await`, `const`, `return`,
 *   literals, property reads, object and array literals with spreads, arrow functions (held to
 *   the same rule) and type assertions.
 * - **Short.** A method's body, and an arrow function's, is at most {@link MAX_SHELL_STATEMENTS}
 *   statements. The constructor has no limit but only three kinds of statement: `super(…)`, an
 *   assignment to a field of `this`, and a call (`ctx.blockConcurrencyWhile(…)` to load state).
 * - **Calls go into src/.** A call's callee is a function imported from src/ (or a storage
 *   adapter), a method of a field of the class (a collaborator, below), a method of the class
 *   itself (held to this rule too), or one of the runtime's own storage and alarm calls
 *   ({@link RUNTIME_CALLS}: transactions and alarms, never `sql`, which belongs in a store). Nothing
 *   else is called: no global (`Date.now`, `JSON.parse`), nothing on a call's result or on an
 *   arrow function's parameter. `new` appears only in the constructor and field initializers,
 *   of a class imported from src/ or from a storage adapter.
 * - **No state of its own.** Every field holds a collaborator: it is typed with, or initialized from,
 *   something imported from src/ or from a storage adapter. A flag or a cache kept by the object
 *   is state a decision reads, so it belongs to the logic in src/.
 * - **Nothing beside the classes.** A Durable Object's file holds imports, re-exports and its
 *   Durable Object classes only: no helper function, class or constant to hide logic in.
 *
 * The storage adapters, `durable-objects/sqlite-*-store.ts`, are not RPC shells: they are the I/O
 * edge, SQL queries and the mapping of rows, and they cannot run without a Durable Object's storage.
 * They are held instead to implementing, each class of them, a store interface declared in src/:
 * the logic is written and unit-tested against that interface (with an in-memory store), and the
 * adapter is covered by the Durable Object's own runtime tests. A file of durable-objects/ must be
 * one or the other.
 */
function shellOffenses(file: string, tree: ts.SourceFile): string[] {
  const offenses: string[] = [];
  const origin = new Map<string, string>();
  for (const st of tree.statements) {
    if (!ts.isImportDeclaration(st) || !ts.isStringLiteral(st.moduleSpecifier) || st.importClause === undefined) continue;
    const spec = st.moduleSpecifier.text;
    const from = spec.startsWith(".") ? relative(ROOT, resolve(ROOT, dirname(file), spec)) : spec;
    const clause = st.importClause;
    if (clause.name) origin.set(clause.name.text, from);
    const bindings = clause.namedBindings;
    if (bindings && ts.isNamespaceImport(bindings)) origin.set(bindings.name.text, from);
    if (bindings && ts.isNamedImports(bindings)) for (const el of bindings.elements) origin.set(el.name.text, from);
  }
  const isAdapterPath = (path: string) => /^durable-objects\/sqlite-[a-z0-9-]+-store\.ts$/.test(path);
  const fromLogic = (name: string) => {
    const from = origin.get(name);
    return from !== undefined && (from.startsWith("src/") || isAdapterPath(from));
  };
  const where = (node: ts.Node) => `${file}:${tree.getLineAndCharacterOfPosition(node.getStart(tree)).line + 1}`;
  const isDurableObject = (c: ts.ClassDeclaration) =>
    (c.heritageClauses ?? []).some(
      (h) => h.token === ts.SyntaxKind.ExtendsKeyword && h.types.some((t) => ts.isIdentifier(t.expression) && t.expression.text === "DurableObject" && origin.get("DurableObject") === "cloudflare:workers"),
    );

  const classes = tree.statements.filter(ts.isClassDeclaration);
  if (isAdapterPath(file)) {
    for (const c of classes) {
      const name = c.name?.text ?? "(anonymous class)";
      if (isDurableObject(c)) offenses.push(`${where(c)} ${name}: a storage adapter may not be a Durable Object`);
      const implementsLogic = (c.heritageClauses ?? []).some((h) => h.token === ts.SyntaxKind.ImplementsKeyword && h.types.some((t) => ts.isIdentifier(t.expression) && origin.get(t.expression.text)?.startsWith("src/")));
      if (!implementsLogic) offenses.push(`${where(c)} ${name}: a storage adapter implements a store interface declared in src/`);
    }
    return offenses;
  }
  const shells = classes.filter(isDurableObject);
  if (shells.length === 0) return [`${file}: neither a Durable Object's file nor a storage adapter (sqlite-*-store.ts)`];
  for (const st of tree.statements) {
    const allowed = ts.isImportDeclaration(st) || (ts.isExportDeclaration(st) && st.moduleSpecifier !== undefined) || (ts.isClassDeclaration(st) && shells.includes(st));
    if (!allowed) offenses.push(`${where(st)} ${ts.SyntaxKind[st.kind]} beside the Durable Object classes`);
  }

  for (const shell of shells) {
    const className = shell.name?.text ?? "(anonymous class)";
    const memberName = (m: ts.ClassElement) => (m.name !== undefined && (ts.isIdentifier(m.name) || ts.isPrivateIdentifier(m.name)) ? m.name.text : ts.isConstructorDeclaration(m) ? "constructor" : "(member)");
    const methods = new Set(shell.members.filter((m) => ts.isMethodDeclaration(m) || ts.isGetAccessor(m) || ts.isSetAccessor(m)).map(memberName));
    const fields = new Set<string>();
    for (const m of shell.members.filter(ts.isPropertyDeclaration)) {
      const typeName = m.type !== undefined && ts.isTypeReferenceNode(m.type) && ts.isIdentifier(m.type.typeName) ? m.type.typeName.text : undefined;
      const init = m.initializer;
      const built = init !== undefined && ((ts.isNewExpression(init) && ts.isIdentifier(init.expression) && fromLogic(init.expression.text)) || (ts.isIdentifier(init) && fromLogic(init.text)));
      if ((typeName !== undefined && fromLogic(typeName)) || built) fields.add(memberName(m));
      else offenses.push(`${where(m)} ${className}.${memberName(m)}: a field holds a collaborator from src/, not state of its own`);
    }

    for (const member of shell.members) {
      const name = `${className}.${memberName(member)}`;
      const inConstructor = ts.isConstructorDeclaration(member);
      const ctxParam = inConstructor ? member.parameters[0]?.name : undefined;
      const ctxName = ctxParam !== undefined && ts.isIdentifier(ctxParam) ? ctxParam.text : undefined;
      const report = (node: ts.Node, why: string) => offenses.push(`${where(node)} ${name}: ${why}`);

      /** The dotted path of a property chain, or undefined when its root is not a name or `this`. */
      const path = (e: ts.Expression): string | undefined => {
        if (ts.isIdentifier(e)) return e.text;
        if (e.kind === ts.SyntaxKind.ThisKeyword) return "this";
        if (ts.isPropertyAccessExpression(e) && e.questionDotToken === undefined) {
          const left = path(e.expression);
          return left === undefined ? undefined : `${left}.${e.name.text}`;
        }
        return undefined;
      };
      const callee = (call: ts.CallExpression): void => {
        if (call.expression.kind === ts.SyntaxKind.SuperKeyword) {
          if (!inConstructor) report(call, "`super(…)` outside the constructor");
          return;
        }
        const p = path(call.expression);
        const parts = p?.split(".") ?? [];
        const ok =
          p !== undefined &&
          (fromLogic(parts[0]!) ||
            (parts[0] === "this" && parts.length === 2 && methods.has(parts[1]!)) ||
            (parts[0] === "this" && parts.length >= 3 && fields.has(parts[1]!)) ||
            RUNTIME_CALLS.has(p.replace(/^this\.ctx\./, "ctx.")) ||
            (ctxName !== undefined && parts[0] === ctxName && RUNTIME_CALLS.has(`ctx.${parts.slice(1).join(".")}`)));
        if (!ok) report(call, `calls \`${call.expression.getText(tree)}\`, which is neither logic imported from src/, a collaborator's method nor a runtime storage call`);
      };
      const params = (fn: ts.SignatureDeclarationBase) => {
        for (const param of fn.parameters) {
          if (param.initializer !== undefined) report(param, "a parameter default is a decision");
          if (!ts.isIdentifier(param.name)) report(param, "a destructured parameter");
        }
      };
      const expression = (e: ts.Expression, allowNew: boolean): void => {
        if (
          ts.isIdentifier(e) ||
          ts.isStringLiteral(e) ||
          ts.isNumericLiteral(e) ||
          ts.isNoSubstitutionTemplateLiteral(e) ||
          [ts.SyntaxKind.ThisKeyword, ts.SyntaxKind.TrueKeyword, ts.SyntaxKind.FalseKeyword, ts.SyntaxKind.NullKeyword].includes(e.kind)
        )
          return;
        if (ts.isPropertyAccessExpression(e)) {
          if (e.questionDotToken !== undefined) report(e, "`?.` is a branch");
          return expression(e.expression, allowNew);
        }
        if (ts.isParenthesizedExpression(e) || ts.isAsExpression(e) || ts.isSatisfiesExpression(e) || ts.isNonNullExpression(e) || ts.isTypeAssertionExpression(e) || ts.isAwaitExpression(e)) return expression(e.expression, allowNew);
        if (ts.isObjectLiteralExpression(e)) {
          for (const prop of e.properties) {
            if (ts.isPropertyAssignment(prop) && !ts.isComputedPropertyName(prop.name)) expression(prop.initializer, allowNew);
            else if (ts.isSpreadAssignment(prop)) expression(prop.expression, allowNew);
            else if (!ts.isShorthandPropertyAssignment(prop)) report(prop, `${ts.SyntaxKind[prop.kind]} in an object literal`);
          }
          return;
        }
        if (ts.isArrayLiteralExpression(e)) {
          for (const el of e.elements) expression(ts.isSpreadElement(el) ? el.expression : el, allowNew);
          return;
        }
        if (ts.isCallExpression(e)) {
          if (e.questionDotToken !== undefined) report(e, "`?.` is a branch");
          callee(e);
          if (!ts.isIdentifier(e.expression) && e.expression.kind !== ts.SyntaxKind.SuperKeyword) expression(e.expression, allowNew);
          for (const arg of e.arguments) expression(arg, allowNew);
          return;
        }
        if (ts.isNewExpression(e)) {
          if (!allowNew) report(e, "`new` outside the constructor and field initializers");
          if (!ts.isIdentifier(e.expression) || !fromLogic(e.expression.text)) report(e, `\`new ${e.expression.getText(tree)}\` is not of a class from src/ or a storage adapter`);
          for (const arg of e.arguments ?? []) expression(arg, allowNew);
          return;
        }
        if (ts.isArrowFunction(e)) {
          params(e);
          if (ts.isBlock(e.body)) body(e.body, allowNew);
          else expression(e.body, allowNew);
          return;
        }
        report(e, `${ts.SyntaxKind[e.kind]} (\`${e.getText(tree).slice(0, 40)}\`) is logic`);
      };
      const statement = (st: ts.Statement, allowNew: boolean): void => {
        if (ts.isReturnStatement(st)) {
          if (st.expression !== undefined) expression(st.expression, allowNew);
        } else if (ts.isExpressionStatement(st)) {
          expression(st.expression, allowNew);
        } else if (ts.isVariableStatement(st) && (st.declarationList.flags & ts.NodeFlags.Const) !== 0) {
          for (const d of st.declarationList.declarations) {
            const hasDefault = (n: ts.Node): boolean => (ts.isBindingElement(n) && n.initializer !== undefined) || (ts.forEachChild(n, hasDefault) ?? false);
            if (hasDefault(d.name)) report(d, "a destructuring default is a decision");
            if (d.initializer === undefined) report(d, "a `const` without a value");
            else expression(d.initializer, allowNew);
          }
        } else if (ts.isVariableStatement(st)) report(st, "`let` or `var`: a variable that changes is state");
        else report(st, `${ts.SyntaxKind[st.kind]} is logic`);
      };
      const body = (block: ts.Block, allowNew: boolean): void => {
        if (block.statements.length > MAX_SHELL_STATEMENTS) report(block, `${block.statements.length} statements (at most ${MAX_SHELL_STATEMENTS})`);
        for (const st of block.statements) statement(st, allowNew);
      };

      if (ts.isPropertyDeclaration(member)) {
        if (member.initializer !== undefined) expression(member.initializer, true);
      } else if (ts.isConstructorDeclaration(member)) {
        params(member);
        for (const st of member.body?.statements ?? []) {
          const e = ts.isExpressionStatement(st) ? st.expression : undefined;
          if (e !== undefined && ts.isBinaryExpression(e) && e.operatorToken.kind === ts.SyntaxKind.EqualsToken) {
            const target = path(e.left);
            if (target === undefined || !/^this\.[^.]+$/.test(target)) report(st, "the constructor assigns only fields of `this`");
            expression(e.right, true);
          } else if (e !== undefined && ts.isCallExpression(e)) expression(e, true);
          else report(st, `${ts.SyntaxKind[st.kind]} in the constructor is logic`);
        }
      } else if (ts.isMethodDeclaration(member) || ts.isGetAccessor(member) || ts.isSetAccessor(member)) {
        params(member);
        if (member.body !== undefined) body(member.body, false);
      } else if (!ts.isSemicolonClassElement(member)) {
        report(member, `${ts.SyntaxKind[member.kind]} is not a member a shell has`);
      }
    }
  }
  return offenses;
}

/** The most statements a Durable Object's method (or an arrow function in it) may have. */
const MAX_SHELL_STATEMENTS = 3;

/** The runtime calls a Durable Object shell may make itself: transactions and alarms. */
const RUNTIME_CALLS = new Set(["ctx.blockConcurrencyWhile", "ctx.storage.transactionSync", "ctx.storage.getAlarm", "ctx.storage.setAlarm", "ctx.storage.deleteAlarm", "ctx.storage.deleteAll"]);

describe("the import parser", () => {
  it("finds every form of import a module can write", () => {
    const source = `
      import value from "./static.ts";
      import { a,
        b } from "./multi-line.ts";
      import type { T } from "./type-only.ts";
      import { type U } from "./inline-type.ts";
      import "./side-effect.ts";
      export { c } from "./re-export.ts";
      export type { V } from "./re-export-type.ts";
      export * from "./star.ts";
      export * as ns from "./star-as.ts";
      import legacy = require("./require.ts");
      async function later() { return import("./dynamic.ts"); }
      type W = typeof import("./type-query.ts");
      const x = 1; export { x };
    `;
    expect(importSpecifiers(source)).toEqual([
      "./static.ts",
      "./multi-line.ts",
      "./type-only.ts",
      "./inline-type.ts",
      "./side-effect.ts",
      "./re-export.ts",
      "./re-export-type.ts",
      "./star.ts",
      "./star-as.ts",
      "./require.ts",
      "./dynamic.ts",
      "./type-query.ts",
    ]);
  });

  it("ignores specifiers in comments and strings, and reports a computed import", () => {
    const source = `
      // import "./commented.ts";
      /* export * from "./block-commented.ts"; */
      const s = 'import x from "./in-a-string.ts"';
      const t = \`export * from "./in-a-template.ts"\`;
      const name = "./computed.ts";
      void import(name);
    `;
    expect(importSpecifiers(source)).toEqual(["<computed import: import(name)>"]);
  });
});

describe("module boundaries", () => {
  const src = files("src");
  const durableObjects = files("durable-objects");
  const all = [...src, ...durableObjects];

  it("places every folder of src/ in the layer order, and every phase in it in phase order", () => {
    const concerns = new Set(src.map(concern).filter((c): c is string => c !== undefined));
    expect([...concerns].filter((c) => !(LAYERS as readonly string[]).includes(c))).toEqual([]);
    expect(LAYERS.filter((l) => (PHASES as readonly string[]).includes(l))).toEqual([...PHASES]);
  });

  it("resolves every relative import to a file that exists", () => {
    // An import the graph cannot place would escape every rule below.
    const offenders = all.flatMap((f) =>
      importSpecifiers(sourceFile(f))
        .filter((s) => s.startsWith(".") && !existsSync(resolve(ROOT, dirname(f), s)))
        .map((s) => `${f} → ${s}`),
    );
    expect(offenders).toEqual([]);
  });

  it("keeps the engine, its phases and their building blocks transport-neutral", () => {
    const offenders: string[] = [];
    for (const f of src.filter((f) => !ADAPTERS.has(concern(f) ?? "worker"))) {
      for (const spec of imports(f)) {
        if (spec === "hono" || spec.startsWith("hono/") || spec.startsWith("cloudflare:")) offenders.push(`${f} imports ${spec}`);
      }
      const named = (node: ts.Node): boolean => (ts.isIdentifier(node) && node.text === "Env") || (ts.forEachChild(node, named) ?? false);
      if (named(sourceFile(f))) offenders.push(`${f} names the Env bindings type`);
    }
    expect(offenders).toEqual([]);
  });

  it("keeps durable-objects/ out of src/: only the composition root names the classes", () => {
    const offenders = src.filter((f) => f !== COMPOSITION_ROOT).flatMap((f) => imports(f).filter((s) => s.startsWith("durable-objects/")).map((s) => `${f} imports ${s}`));
    expect(offenders).toEqual([]);
  });

  it("lets imports point only to earlier layers", () => {
    const rank = new Map<string, number>(LAYERS.map((l, i) => [l, i]));
    const offenders: string[] = [];
    for (const f of src) {
      const from = concern(f);
      if (!from) continue;
      for (const spec of imports(f)) {
        const to = concern(spec);
        if (to && to !== from && !(rank.get(to)! < rank.get(from)!)) offenders.push(`${f} → ${spec}`);
      }
    }
    expect(offenders).toEqual([]);
  });

  it("lets no phase import a later phase", () => {
    const order = new Map<string, number>(PHASES.map((p, i) => [p, i]));
    const offenders: string[] = [];
    for (const f of src) {
      const from = order.get(concern(f) ?? "");
      if (from === undefined) continue;
      for (const spec of imports(f)) {
        const to = order.get(concern(spec) ?? "");
        if (to !== undefined && to > from) offenders.push(`${f} (${PHASES[from]}) → ${spec} (${PHASES[to]})`);
      }
    }
    expect(offenders).toEqual([]);
  });

  it("has no import cycle between files of src/ and durable-objects/, inside a folder or across folders", () => {
    const known = new Set(all);
    const graph = new Map<string, string[]>(all.map((f) => [f, imports(f).filter((s) => known.has(s))]));
    const cycles: string[] = [];
    const state = new Map<string, "visiting" | "done">();
    const stack: string[] = [];
    const visit = (f: string) => {
      state.set(f, "visiting");
      stack.push(f);
      for (const to of graph.get(f) ?? []) {
        if (state.get(to) === "visiting") cycles.push([...stack.slice(stack.indexOf(to)), to].join(" → "));
        else if (state.get(to) === undefined) visit(to);
      }
      stack.pop();
      state.set(f, "done");
    };
    for (const f of all) if (state.get(f) === undefined) visit(f);
    expect(cycles).toEqual([]);
  });

  it("keeps every Durable Object an RPC shell whose members only delegate, and every storage adapter behind an interface of src/", () => {
    const offenses = durableObjects.flatMap((f) => shellOffenses(f, sourceFile(f)));
    expect(offenses).toEqual([]);
  });
});

describe("the Durable Object shell rule", () => {
  const check = (text: string, file = "durable-objects/example.ts") => shellOffenses(file, parse(text, file));
  const head = `
    import { DurableObject } from "cloudflare:workers";
    import { Core, helper, type Clock, systemClock } from "../src/example/core.ts";
    import { SqliteExampleStore } from "./sqlite-example-store.ts";
  `;
  const shell = (members: string) => `${head}
    export class Example extends DurableObject<Env> {
      readonly #core: Core;
      readonly #store: SqliteExampleStore;
      readonly #clock: Clock = systemClock;
      constructor(ctx: DurableObjectState, env: Env) {
        super(ctx, env);
        this.#store = new SqliteExampleStore(ctx.storage);
        this.#core = new Core(this.#store, env);
        ctx.blockConcurrencyWhile(async () => this.#core.load());
      }
      ${members}
    }`;

  it("accepts a shell whose members only delegate", () => {
    const ok = shell(`
      async get(id: string): Promise<string> {
        return this.#store.transaction(() => this.#core.get(id, { now: this.#clock.now(), ...helper(id) }));
      }
      override async alarm(): Promise<void> {
        const next = this.#core.next(this.ctx.storage);
        await this.ctx.storage.setAlarm(next as number);
        await this.#arm();
      }
      async #arm(): Promise<void> {
        await this.#core.arm(this.ctx.storage, [1, "a", null]);
      }`);
    expect(check(ok)).toEqual([]);
  });

  it("reports each form of logic a member may not hold", () => {
    const members = [
      "a(x: number) { if (x) return 1; return 2; }",
      "b(x: number[]) { for (const y of x) this.#core.get(y); }",
      "c(x: number) { return x > 1 ? this.#core.get(x) : undefined; }",
      "d(x?: string) { return x ?? this.#core.get(); }",
      "e(x: { y?: string }) { return x?.y; }",
      "f(x: number) { return this.#core.get(x + 1); }",
      "g() { try { return this.#core.get(); } catch { return undefined; } }",
      "h() { throw new RangeError(\"no\"); }",
      "i() { return this.ctx.storage.sql.exec(\"SELECT 1\"); }",
      "j() { return Date.now(); }",
      "k() { this.#clock = systemClock; }",
      "l() { const x = this.#core.get(); return x.y(); }",
      "m() { this.#core.a(); this.#core.b(); this.#core.c(); this.#core.d(); }",
      "n(x: string) { switch (x) { default: return this.#core.get(); } }",
      "o(x: unknown) { return typeof x === \"string\"; }",
      "p() { let x = this.#core.get(); return x; }",
      "q() { return this.#store.transaction((m: Core) => m.get()); }",
      "r() { return new Core(this.#store); }",
      "s(x: string) { return this.#core.get(`id:${x}`); }",
      "t(x: Record<string, string>, k: string) { return this.#core.get(x[k]); }",
      "u(x = 1) { return this.#core.get(x); }",
      "v() { return (this.#core.a(), this.#core.b()); }",
    ];
    const offenses = check(shell(members.join("\n")));
    for (const name of "abcdefghijklmnopqrstuv") {
      expect(offenses.filter((o) => o.includes(`Example.${name}:`)), `member ${name}`).not.toEqual([]);
    }
  });

  it("reports state of its own, logic beside the class, and a storage adapter outside src/'s interfaces", () => {
    const stateful = shell("").replace("readonly #clock: Clock = systemClock;", "#armed = false;");
    expect(check(stateful)).toEqual([expect.stringContaining("#armed")]);
    const beside = `${head}\nfunction decide(x: number): boolean { return x > 1; }\n${shell("").slice(head.length)}`;
    expect(check(beside)).toEqual([expect.stringContaining("FunctionDeclaration")]);
    const adapter = `import type { ExampleStore } from "../src/example/core.ts";
      export class SqliteExampleStore implements ExampleStore {}
      export class SqliteOtherStore {}`;
    expect(check(adapter, "durable-objects/sqlite-example-store.ts")).toEqual([expect.stringContaining("SqliteOtherStore")]);
    expect(check("export const x = 1;", "durable-objects/helpers.ts")).toEqual([expect.stringContaining("neither")]);
  });
});

describe("docs/architecture.md agrees with these rules", () => {
  const doc = readFileSync(join(ROOT, "docs/architecture.md"), "utf8");
  const LEAD = "`test/architecture/dependency-rules.test.ts` enforces the rules";
  const paragraph = doc.slice(doc.indexOf(LEAD), doc.indexOf("\n\n", doc.indexOf(LEAD)));
  /** The run of backticked names after `lead` in the rules paragraph; undefined when the lead is missing. */
  const listAfter = (lead: string) => {
    const run = new RegExp(`${lead}((?:\\s*\`[^\`]+\`,?)+)`).exec(paragraph)?.[1];
    return run === undefined ? undefined : [...run.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
  };

  it("has the rules paragraph", () => {
    expect(doc.indexOf(LEAD)).toBeGreaterThanOrEqual(0);
  });

  it("lists the layers in the test's order", () => {
    expect(listAfter("each imports only folders before it:")).toEqual([...LAYERS]);
  });

  it("lists the phases in the test's order", () => {
    expect(listAfter("no phase imports a later one:")).toEqual([...PHASES]);
  });

  it("has one Modules row per folder of src/, plus the composition root and durable-objects/", () => {
    const start = doc.indexOf("\n## Modules\n");
    expect(start).toBeGreaterThanOrEqual(0);
    const section = doc.slice(start + 1, doc.indexOf("\n## ", start + 1));
    const rows = section.split("\n").filter((l) => l.startsWith("|")).slice(2);
    expect(rows.length).toBeGreaterThan(0);
    // One path per row: a row naming two folders would let one of them go undescribed.
    const named = rows.map((r) => /^`([^`]+)`$/.exec(tableCells(r)[0] ?? "")?.[1] ?? `(not one path: ${tableCells(r)[0]})`);
    const folders = readdirSync(join(ROOT, "src"), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => `src/${e.name}`);
    const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
    expect(named.sort(byName)).toEqual([COMPOSITION_ROOT, ...folders, "durable-objects/"].sort(byName));
  });
});
