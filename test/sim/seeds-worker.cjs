// The entry of a simulation worker thread: TypeScript through tsx, then the worker itself.
require("tsx/cjs");
require("./seeds-worker.ts");
