// The command's exit codes (sysexits.h where one fits) and the error that
// carries one. A CliError's message is shown as it is, without a stack trace:
// it says what was wrong and how to fix it.

export const EXIT = {
  ok: 0,
  /** `who`: nobody leads the election. */
  noLeader: 3,
  /** Bad flags or arguments (EX_USAGE). */
  usage: 64,
  /** The store cannot be reached or refused us, or its client is not installed (EX_UNAVAILABLE). */
  unavailable: 69,
  /** A bug or an unexpected error (EX_SOFTWARE). */
  internal: 70,
  /** The end hook still failed after its retries: this member may not have stopped its leader's work (EX_TEMPFAIL). */
  endHookFailed: 75,
  /** The command was found but cannot be executed (as shells report it). */
  notExecutable: 126,
  /** The command was not found (as shells report it). */
  notFound: 127,
} as const;

export class CliError extends Error {
  constructor(
    readonly exitCode: number,
    message: string,
  ) {
    super(message);
    this.name = "CliError";
  }
}
