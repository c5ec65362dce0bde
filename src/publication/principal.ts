/**
 * Who is calling, as established by the transport adapter. Opaque to the engine beyond these ids:
 * the engine looks grants up in the publication, it never sees a raw key.
 */
export interface Principal {
  readonly tenantId: string;
  readonly keyId: string;
}
