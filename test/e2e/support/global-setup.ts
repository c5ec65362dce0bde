import { buildBundle } from "../../../local-stack/build.ts";

/** Bundle the Worker once for all end-to-end files (each then starts its own workerd). */
export default function setup(): void {
  buildBundle();
}
