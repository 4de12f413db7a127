// Reading the line: the members older than ours, as etcd's waitDeletes reads
// them (Get(<key>/, newest create revision first, max create revision =
// ours)), kept to the line's two ends when it is long.
import { OlderMembers, type ListedMember } from "./line";
import { fromLine, type Member } from "./member";
import type { MemberKeys } from "./member-keys";
import type { V3Membership } from "./membership";
import type { EtcdV3Port, RangeAnswer, RangeRequest } from "./port";

/**
 * Members listed at each end of a long line (line.ts), one
 * more at the oldest end. A follower reads the oldest end again before it runs
 * out (REFILL_SPREAD in follower.ts), and lists the whole line again once this many members
 * just before it have gone.
 */
export const LINE_END_MEMBERS = 8;

/** The members older than ours, from one listing: the leader and the one just before ours in full. */
export interface MembersAhead {
  older: OlderMembers;
  leader: Member;
  /** The leader itself when only one member is older. */
  predecessor: Member;
}

/** Where a membership stands: whether its key is in line, who is ahead of it (nobody: it leads), and the revision read at. */
export interface PlaceInLine {
  ours: boolean;
  ahead: MembersAhead | undefined;
  revision: number;
}

/** What one read of the line found: its members (keys of no member left out), and whether it stopped at its limit. */
interface Listing {
  members: ListedMember[];
  revision: number;
  full: boolean;
}

export class LineReader {
  constructor(
    private readonly port: EtcdV3Port,
    private readonly keys: MemberKeys,
  ) {}

  /**
   * A read of the line sorted by create revision, at most `limit` keys (0: all),
   * oldest first ("ascend") or newest first ("descend").
   */
  end(order: "ascend" | "descend", limit: number, createRevisions?: { min?: number; max?: number }): RangeRequest {
    return {
      prefix: this.keys.prefix,
      sortByCreate: order,
      limit,
      minCreateRevision: createRevisions?.min,
      maxCreateRevision: createRevisions?.max,
    };
  }

  /**
   * The members older than ours, oldest first: all of them, or in a long line
   * its two ends (LINE_END_MEMBERS each), and whether our own key is still
   * there. No member can become older later (create revisions only grow), so
   * this serves the wait until an end runs out of members.
   *
   * The oldest come first, by one read that ends at our own key; a line that
   * read does not reach the end of takes a second read, from our own key
   * backwards. Each member listed costs its decoding and memory in every
   * follower: listing all of a line of a thousand, a hundred thousand members
   * in all, is most of the work a thousand members starting in one process do.
   * (etcd 3.4 still collects and sorts every key under the prefix for either
   * read, whatever the limit: reads, not a transaction, so that the sorting
   * holds up no write.)
   */
  async placeInLine(membership: V3Membership, signal: AbortSignal): Promise<PlaceInLine> {
    const oldest = await this.listLine(membership, "ascend", LINE_END_MEMBERS + 1, signal);
    let older = oldest.members;
    let ours = older.at(-1)?.key === membership.id;
    let gapAt: number | undefined;
    const revision = oldest.revision;
    if (ours) {
      older.pop();
    } else if (oldest.full) {
      // The line goes on past what was read: read its other end, ours included.
      const newest = await this.listLine(membership, "descend", LINE_END_MEMBERS + 1, signal);
      ours = newest.members[0]?.key === membership.id;
      const back = newest.members.slice(ours ? 1 : 0).reverse();
      if (older.length > 0 && back.length > 0) {
        const lastOfFront = older.at(-1)!.createRevision;
        const behindFront = back.filter((m) => m.createRevision > lastOfFront);
        // No member read twice: there may be others between the two ends.
        if (behindFront.length === back.length) gapAt = older.length;
        older = older.concat(behindFront);
      } else {
        // An end that held nothing but keys of no member (or whose members
        // all left between the reads): list the whole line instead.
        const all = await this.listLine(membership, "ascend", 0, signal);
        older = all.members;
        ours = older.at(-1)?.key === membership.id;
        if (ours) older.pop();
      }
    }
    if (older.length === 0) return { ours, ahead: undefined, revision };
    // Only the two ends are kept whole; the line keeps numbers (line.ts).
    const leader = fromLine(older[0]!, revision);
    const predecessor = older.length === 1 ? leader : fromLine(older.at(-1)!, revision);
    const line = new OlderMembers(this.keys.prefix, older, revision, gapAt);
    return { ours, ahead: { older: line, leader, predecessor }, revision };
  }

  /**
   * `older` with its oldest end read again: the members from the oldest one
   * known on, up to the newest end, by one read. Undefined when that end
   * cannot be told from the read (line.ts): list it all again.
   */
  async readOldestEnd(older: OlderMembers, signal: AbortSignal): Promise<OlderMembers | undefined> {
    const from = older.at("oldest");
    const to = older.newestEndStart;
    if (!from || to === undefined) return undefined;
    const request = this.end("ascend", LINE_END_MEMBERS + 1, { min: from.createRevision, max: to - 1 });
    const { members, full } = this.membersOf(await this.port.range(request, "read the line's oldest end", signal), LINE_END_MEMBERS + 1);
    return older.withOldestEnd(members, full);
  }

  /**
   * One read of the line up to our own key by create revision, from its start
   * or backwards from ours, at most `limit` keys (0: all). `full` when the
   * limit was reached. Keys of nested elections and foreign keys are left
   * out: etcd cannot leave them out itself, they come back too, names and all.
   */
  private async listLine(membership: V3Membership, order: "ascend" | "descend", limit: number, signal: AbortSignal): Promise<Listing> {
    const request = this.end(order, limit, { max: membership.token });
    return this.membersOf(await this.port.range(request, "read place in line", signal), limit);
  }

  /** The members a read of the line found, and whether it stopped at `limit` keys. */
  private membersOf(answer: RangeAnswer, limit: number): Listing {
    const members: ListedMember[] = [];
    for (const kv of answer.kvs) {
      const key = kv.key;
      if (this.keys.isMember(key)) members.push({ key, name: kv.value, createRevision: kv.createRevision });
    }
    return { members, revision: answer.revision, full: limit > 0 && answer.kvs.length === limit };
  }
}
