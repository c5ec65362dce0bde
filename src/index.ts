export default { fetch() { return new Response("x"); } };
export class BackendSnapshotController {}
