/** `npm run build`: bundles the Worker into dist/ exactly as `wrangler deploy` would upload it. */
import { buildBundle } from "../local-stack/build.ts";

console.log(`bundle written to ${buildBundle()}`);
