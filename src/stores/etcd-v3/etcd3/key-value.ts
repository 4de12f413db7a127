// etcd3's keys as the port's KeyValue, decoded only when read: etcd3 hands
// over each key, value and revision as a Buffer or a decimal string, and most
// of what a follower receives it looks at only for the key (the value of a
// member's join that falls in a watched range, never). A field read twice is
// decoded twice, as the recipe did with etcd3's own objects.
import type { IKeyValue, IRangeResponse } from "etcd3";
import type { KeyValue, RangeAnswer } from "../port";

export class Etcd3KeyValue implements KeyValue {
  constructor(
    private readonly raw: IKeyValue,
    /**
     * How many characters to take off the front of the key: an etcd3
     * namespace's prefix, which etcd3 takes off the keys of a plain read but
     * not off those a transaction read.
     */
    private readonly namespaceLength = 0,
  ) {}

  get key(): string {
    const key = this.raw.key.toString();
    return this.namespaceLength > 0 ? key.slice(this.namespaceLength) : key;
  }

  get value(): string {
    return this.raw.value.toString();
  }

  get createRevision(): number {
    return Number(this.raw.create_revision);
  }

  get modRevision(): number {
    return Number(this.raw.mod_revision);
  }
}

/** A Range answer as the port gives it. */
export function rangeAnswer(response: IRangeResponse, namespaceLength = 0): RangeAnswer {
  return {
    kvs: response.kvs.map((kv) => new Etcd3KeyValue(kv, namespaceLength)),
    revision: Number(response.header.revision),
  };
}
