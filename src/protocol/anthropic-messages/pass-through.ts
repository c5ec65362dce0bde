import type { PassThroughParts, PassThroughScanner, ResponseStamp, SseEvent, StreamErrorEvent, StreamFacts } from "../codec.ts";
import type { NeutralRequest } from "../neutral.ts";
import { noteEventFacts } from "../stream-facts.ts";
import { literalChars, matchDelta, templateOf, type DeltaTemplate } from "../delta-template.ts";

const DELTA_HEAD = "event: content_block_delta\ndata: ";

/**
 * The Anthropic Messages pass-through (provider and client both speak Messages). A plain text or
 * thinking delta of a shape just seen — the bulk of a stream — is neither parsed nor re-encoded:
 * it matches the shape learnt from the delta before it (see DeltaTemplate), its string is measured
 * in place and put into the client's event as the provider wrote it. Every other event goes
 * through the full path's decoder and encoder, so what the client sees (block indexes renumbered
 * past skipped blocks, the gateway's message id and model, usage as the gateway read it, no
 * `message_stop` after a cut) is the full path's.
 *
 * A shape holds only until the next event that is not one of its deltas: any such event may move
 * the encoder to another block, so it clears what was learnt, and the delta after it is parsed
 * (and teaches the shape again). Between two deltas of one block the decoder and the encoder
 * change no state, which is why skipping both for the second is the same as running them.
 */
export function createAnthropicPassThrough(_stamp: ResponseStamp, _request: NeutralRequest, stream: PassThroughParts): PassThroughScanner {
  const { decoder, encoder } = stream;
  let shape: DeltaTemplate | undefined;
  let failed = false;

  /** Any event but a delta of the learnt shape: the full path's decode and encode, its facts noted. */
  function full(event: SseEvent, facts: StreamFacts): string | StreamErrorEvent {
    shape = undefined;
    const events = decoder.decode(event);
    let out = "";
    for (const ev of events) {
      if (ev.type === "error") {
        failed = true;
        return ev;
      }
      noteEventFacts(ev, facts);
      out += encoder.encode(ev);
    }
    // A delta that became one delta of the block already open teaches the shape of those after it.
    if (events.length === 1 && out.startsWith(DELTA_HEAD) && out.indexOf(DELTA_HEAD, 1) < 0) {
      const ev = events[0]!;
      const client = out.slice(DELTA_HEAD.length, -2);
      if (ev.type === "text") shape = templateOf(event.data, '"text":', ev.text, client);
      else if (ev.type === "reasoning") shape = templateOf(event.data, '"thinking":', ev.text, client);
    }
    return out;
  }

  return {
    scan(event: SseEvent, facts: StreamFacts): string | StreamErrorEvent {
      if (failed) return "";
      const t = shape;
      const close = t === undefined ? -1 : matchDelta(event.data, t);
      if (close < 0) return full(event, facts);
      // An empty string is no content, and the full path writes nothing for it.
      const chars = literalChars();
      if (chars === 0) return "";
      facts.content(chars);
      return `${DELTA_HEAD}${t!.outPrefix}${event.data.slice(t!.inPrefix.length, close)}${t!.outSuffix}\n\n`;
    },
    finish(): StreamErrorEvent | undefined {
      if (failed) return undefined;
      const cut = decoder.finish().find((ev): ev is StreamErrorEvent => ev.type === "error");
      if (cut) failed = true;
      return cut;
    },
    end(): string {
      return failed ? "" : encoder.end();
    },
  };
}
