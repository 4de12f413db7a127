import { test } from "node:test";
import assert from "node:assert/strict";
import { encodeCommand, encodeEvent, parseCommand, parseEvent } from "../../bench/member-protocol";

// The dialect is read line by line from pipes, so a line must survive its own
// round trip and a reader must pass over what is not a line of the dialect.

test("an event survives encoding, with or without the member's name", () => {
  const hosted = { type: "elected", at: 1_700_000_000_000.25, name: "m3", token: 12 };
  const single = { type: "leader", at: 1_700_000_000_001, leader: "m1" };
  for (const event of [hosted, single]) {
    const line = encodeEvent(event);
    assert.equal(line.indexOf("\n"), line.length - 1, "one line, newline-terminated");
    assert.deepEqual(parseEvent(line), event);
  }
});

test("a command survives encoding, with or without an id", () => {
  for (const command of [{ op: "exit" }, { op: "stop", id: 7, name: "m3" }]) {
    const line = encodeCommand(command);
    assert.equal(line.indexOf("\n"), line.length - 1, "one line, newline-terminated");
    assert.deepEqual(parseCommand(line), command);
  }
});

test("lines that are not events or commands are passed over", () => {
  for (const line of ["", "   ", "exit", "debug: renewing", "[1,2]", "null", "{not json", '{"type":"elected"}', '{"at":1}', '{"type":3,"at":1}']) {
    assert.equal(parseEvent(line), undefined, `event from ${JSON.stringify(line)}`);
  }
  for (const line of ["", "stop", "{}", '{"op":1}', '{"op":"stop","id":"7"}', '{"op":"stop"']) {
    assert.equal(parseCommand(line), undefined, `command from ${JSON.stringify(line)}`);
  }
});
