// `await using election = ...` needs Symbol.asyncDispose. Node has it from
// 20.4 on (and 18.18); on earlier releases Node's own resources use the
// registered symbol below, which is also what later releases alias it to.
export const asyncDispose: typeof Symbol.asyncDispose =
  (Symbol as { asyncDispose?: typeof Symbol.asyncDispose }).asyncDispose ??
  (Symbol.for("nodejs.asyncDispose") as typeof Symbol.asyncDispose);

/** Gives `target`'s prototype an async dispose method under whichever symbol this Node has. */
export function defineAsyncDispose<T extends object>(target: { prototype: T }, dispose: (this: T) => Promise<void>): void {
  Object.defineProperty(target.prototype, asyncDispose, { value: dispose, writable: true, configurable: true, enumerable: false });
}
