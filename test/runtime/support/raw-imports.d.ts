/** A file imported as text (`?raw`), as the test bundler serves it: docs a test checks against the code. */
declare module "*.md?raw" {
  const text: string;
  export default text;
}
