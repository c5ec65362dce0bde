/** `npm run build`: bundles the Worker into dist/ exactly as `wrangler deploy` would upload it. */
import { bundleReport } from "../local-stack/build.ts";

const built = bundleReport();
console.log(built.reused ? `bundle in ${built.dir} is newer than every source and config file: reused (delete it to rebuild)` : `bundle written to ${built.dir}`);
