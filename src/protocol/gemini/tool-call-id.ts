/*
 * A Gemini function call has no id the client must echo (Gemini matches a function's response to
 * its call by name and order), but thinking models sign their calls: a `thoughtSignature` on the
 * `functionCall` part that Gemini 3 requires back, verbatim, when the call is replayed in history.
 * No client protocol has a field for it, so the gateway's own call id carries it: every client
 * echoes a call's id back in the assistant turn that replays the call. Ids are `call_<32 hex>`,
 * followed by `_gs_<the signature's UTF-8 in base64url>` when the call was signed: base64url keeps
 * the id in the character set every client protocol allows for ids, and any signature text comes
 * back exactly.
 */

const SIGNED = /^call_[0-9a-f]{32}_gs_([A-Za-z0-9_-]+)$/;

/** A fresh call id, carrying the call's thought signature when it has one. */
export function geminiCallId(signature: string | undefined): string {
  const id = `call_${crypto.randomUUID().replaceAll("-", "")}`;
  return signature === undefined || signature === "" ? id : `${id}_gs_${toBase64Url(signature)}`;
}

/** The thought signature a call id of {@link geminiCallId} carries, else undefined. */
export function signatureOfCallId(id: string): string | undefined {
  const m = SIGNED.exec(id);
  return m ? fromBase64Url(m[1]!) : undefined;
}

function toBase64Url(text: string): string {
  let bin = "";
  for (const b of new TextEncoder().encode(text)) bin += String.fromCharCode(b);
  return btoa(bin).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

function fromBase64Url(s: string): string | undefined {
  try {
    const bin = atob(s.replaceAll("-", "+").replaceAll("_", "/"));
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
  } catch {
    // Not an id the gateway wrote: it carries no signature.
    return undefined;
  }
}
