import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";

/**
 * The system's Chromium (Debian's `chromium` package), found on PATH or named by `CHROMIUM`:
 * playwright-core never downloads a browser of its own here.
 */
export function chromiumPath(): string {
  if (process.env.CHROMIUM) return process.env.CHROMIUM;
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    for (const name of ["chromium", "chromium-browser"]) {
      const file = join(dir, name);
      try {
        accessSync(file, constants.X_OK);
        return file;
      } catch {
        // not here; keep looking
      }
    }
  }
  throw new Error("No chromium on PATH: install Debian's chromium package (or set CHROMIUM to its executable).");
}

/** A headless Chromium with the flags that run it in a container without a display or network. */
export async function launchChromium(): Promise<Browser> {
  return await chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

/** Signs in through the console's login form; resolves once the signed-in page has loaded. */
export async function signIn(page: Page, adminUrl: string, token: string): Promise<void> {
  await page.goto(`${adminUrl}/admin/console/login`);
  await page.fill('input[name="token"]', token);
  await Promise.all([page.waitForURL((u) => !u.pathname.endsWith("/login")), page.click('button[type="submit"]')]);
}

/**
 * The little of the DOM the tests read inside the page (this project's Node-side code compiles
 * without the DOM library).
 */
export interface DomNode {
  readonly textContent: string | null;
  readonly children: ArrayLike<DomNode>;
  querySelectorAll(selectors: string): ArrayLike<DomNode>;
}

/** The rows of the first table `selector` matches (not those of tables nested in its cells), as trimmed cell text. */
export async function tableRows(page: Page, selector: string): Promise<string[][]> {
  return await page
    .locator(selector)
    .first()
    .evaluate((table: unknown) => Array.from((table as DomNode).querySelectorAll(":scope > tbody > tr"), (tr) => Array.from(tr.children, (td) => (td.textContent ?? "").trim())));
}

/** Polls `probe` until it returns a value (not undefined), for at most `ms`. */
export async function eventually<T>(probe: () => Promise<T | undefined>, ms = 15_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 100));
  }
}
