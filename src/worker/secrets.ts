/**
 * A reader of the Worker's secrets by name, as the logic that needs one takes it: the string a
 * binding of that name holds, undefined when there is none or it is not a string.
 */
export function secretReader(env: Env): (name: string) => string | undefined {
  const bindings = env as unknown as Readonly<Record<string, unknown>>;
  return (name) => {
    const value = bindings[name];
    return typeof value === "string" ? value : undefined;
  };
}
