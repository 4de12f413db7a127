// A simulated server frozen as by SIGSTOP: while it is, what it is asked to
// do waits, in order, and runs when it thaws. Each simulated store keeps one
// and serves its requests through it.

export class FrozenWork {
  /** While frozen: what the server will do when it thaws, in order. */
  private work: Array<() => void> | undefined;

  get frozen(): boolean {
    return this.work !== undefined;
  }

  freeze(): void {
    this.work ??= [];
  }

  /** Thaws: what came meanwhile runs, in order. */
  thaw(): void {
    const work = this.work;
    this.work = undefined;
    for (const run of work ?? []) run();
  }

  /** Runs `operation` now, or once thawed if frozen (the answer is then a promise settled with it). */
  serve<T>(operation: () => T): T | Promise<T> {
    const work = this.work;
    if (!work) return operation();
    return new Promise<T>((resolve, reject) => {
      work.push(() => {
        try {
          resolve(operation());
        } catch (err) {
          reject(err);
        }
      });
    });
  }
}
