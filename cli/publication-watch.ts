import { readFileSync, watch, type FSWatcher } from "node:fs";
import { join } from "node:path";
import { parseDocument } from "yaml";
import type { ConfigIssue } from "../src/config/parse-file.ts";
import { pinnedRequest } from "./pinned-https.ts";

/** What `serve --watch` needs to publish the config directory's publication.yaml. */
export interface PublicationWatchOptions {
  readonly dir: string;
  /** The admin API's origin, e.g. `http://127.0.0.1:8788`. */
  readonly adminUrl: string;
  readonly token: string;
  /** The admin listener's own certificate when it serves TLS: the watcher trusts that one certificate (it may be self-signed). */
  readonly certFile?: string | undefined;
  readonly progress: (line: string) => void;
  /** How long a burst of file events is let settle before one publish (editors write in steps). */
  readonly debounceMs?: number;
}

/** Stops watching (the file and SIGHUP). */
export interface PublicationWatch {
  stop(): void;
}

const FILE = "publication.yaml";

/**
 * `sluice serve --watch`: when publication.yaml changes, or on SIGHUP, it is published to the
 * running gateway (which checks it, then activates it). An invalid file changes nothing: the
 * running revision keeps serving and every issue is printed as `file: path: reason`. One publish
 * at a time; a change during one is published after it.
 */
export function watchPublication(o: PublicationWatchOptions): PublicationWatch {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running = false;
  let again = false;
  const run = async (why: string): Promise<void> => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      o.progress(`${why}: publishing ${FILE}`);
      for (const line of await publishOnce(o)) o.progress(line);
    } finally {
      running = false;
      if (again) {
        again = false;
        void run("changed again");
      }
    }
  };
  const schedule = (why: string) => {
    if (timer !== undefined) clearTimeout(timer);
    timer = setTimeout(() => void run(why), o.debounceMs ?? 200);
  };
  // The directory, not the file: editors that save by renaming replace the file's inode.
  const watcher: FSWatcher = watch(o.dir, (_event, name) => {
    if (name === FILE) schedule(`${FILE} changed`);
  });
  const onHup = () => schedule("SIGHUP");
  process.on("SIGHUP", onHup);
  return {
    stop() {
      if (timer !== undefined) clearTimeout(timer);
      watcher.close();
      process.off("SIGHUP", onHup);
    },
  };
}

/** One publish of the file; the lines to print. */
async function publishOnce(o: PublicationWatchOptions): Promise<string[]> {
  let text: string;
  try {
    text = readFileSync(join(o.dir, FILE), "utf8");
  } catch (err) {
    return [`${FILE}: (root): cannot read it (${(err as NodeJS.ErrnoException).code ?? String(err)}); the running revision keeps serving`];
  }
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length > 0) {
    return [...doc.errors.map((e) => `${FILE}: ${e.linePos ? `line ${e.linePos[0].line}, column ${e.linePos[0].col}` : "(root)"}: ${e.message.split("\n")[0]}`), "the running revision keeps serving"];
  }
  let res: { status: number; text: string };
  try {
    const init = { method: "PUT", headers: { authorization: `Bearer ${o.token}`, "content-type": "application/json" }, body: JSON.stringify(doc.toJS()), signal: AbortSignal.timeout(30_000) };
    const url = `${o.adminUrl}/admin/publication`;
    res = o.certFile !== undefined ? await pinnedRequest(url, o.certFile, init) : await fetch(url, init).then(async (r) => ({ status: r.status, text: await r.text() }));
  } catch (err) {
    return [`publish failed: cannot reach ${o.adminUrl}/admin/publication (${(err as Error).message}); the running revision keeps serving`];
  }
  let body: { status?: string; revision?: number; error?: { code?: string; message?: string; details?: readonly ConfigIssue[] } } = {};
  try {
    body = JSON.parse(res.text) as typeof body;
  } catch {
    // An answer that is not JSON is reported by its status below.
  }
  if (res.status >= 200 && res.status < 300) return [body.status === "unchanged" ? `publication unchanged: revision ${body.revision} is active` : `publication revision ${body.revision} activated`];
  if (res.status === 422 && body.error?.details) {
    return [...body.error.details.map((i) => `${i.file}: ${i.path || "(root)"}: ${i.message}`), `${FILE} rejected (${body.error.details.length} issue${body.error.details.length === 1 ? "" : "s"}); the running revision keeps serving`];
  }
  return [`publish failed: ${res.status} ${body.error?.code ?? ""}: ${body.error?.message ?? ""}; the running revision keeps serving`];
}
