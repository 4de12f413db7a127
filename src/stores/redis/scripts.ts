// The election's writes, each one Lua script so that Redis runs it as one
// step: nothing else runs between its GET and its SET, PEXPIRE or DEL, on a
// single server and on the one node of a Redis Cluster that holds the
// election's hash slot.
//
// The key holds `<token>:<name>`. Every script is handed both keys (the
// election key and its counter, in one slot through the `{<key>}` hash tag),
// so a cluster client routes it to that slot's node.
//
// The token. A counter beside the key is INCRed by every win; where that
// gives less than the server's clock in microseconds (TIME), the token is
// the clock instead, and the counter is set to it. A counter that Redis
// lost (a restart without persistence, a fail-over to a replica that had
// not seen it, an AOF that lost its last second) therefore starts again
// above every token it gave before, as long as two things hold: the
// server's clock did not step back across the loss, and the election gave
// out fewer than one token per microsecond on average since its counter was
// made (each win is a script run, which takes longer than that). In
// microseconds the tokens are safe integers until the year 2255.
//
// Scripts may read TIME before writing only where Redis replicates their
// effects rather than the script (the default from Redis 5; asked for
// explicitly where redis.replicate_commands exists).

/** ACQUIRE: KEYS = key, counter; ARGV = name, ttl in ms, channel. Answers {1, token} or {0, value, pttl}. */
export const ACQUIRE = `
if redis.replicate_commands then redis.replicate_commands() end
local held = redis.call('GET', KEYS[1])
if held then
  return {0, held, redis.call('PTTL', KEYS[1])}
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local token = redis.call('INCR', KEYS[2])
if token < now then
  token = now
  redis.call('SET', KEYS[2], string.format('%.0f', now))
end
local tokenText = string.format('%.0f', token)
redis.call('SET', KEYS[1], tokenText .. ':' .. ARGV[1], 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[3], 'acquired ' .. tokenText .. ' ' .. ARGV[2] .. ' ' .. ARGV[1])
return {1, tokenText}
`;

/**
 * RENEW: KEYS = key, counter; ARGV = token, ttl in ms, name, channel. Answers
 * 1 if the key held the token (and was renewed), else 0. A key found gone
 * (expired, or deleted from outside) is announced as our release: nothing
 * else tells followers of it (an expiry is silent on the channel), and they
 * race for it at once, while the member that found it backs off first.
 */
export const RENEW = `
local held = redis.call('GET', KEYS[1])
local prefix = ARGV[1] .. ':'
if held and string.sub(held, 1, string.len(prefix)) == prefix then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not held then
  redis.call('PUBLISH', ARGV[4], 'released ' .. ARGV[1] .. ' ' .. ARGV[3])
end
return 0
`;

/** RELEASE: KEYS = key, counter; ARGV = token, channel. Answers 1 if the key held the token (and was deleted), else 0. */
export const RELEASE = `
local held = redis.call('GET', KEYS[1])
local prefix = ARGV[1] .. ':'
if held and string.sub(held, 1, string.len(prefix)) == prefix then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], 'released ' .. ARGV[1] .. ' ' .. string.sub(held, string.len(prefix) + 1))
  return 1
end
return 0
`;

/** READ: KEYS = key, counter. Answers {value, pttl}, or nil when the key is absent. */
export const READ = `
local held = redis.call('GET', KEYS[1])
if not held then return false end
return {held, redis.call('PTTL', KEYS[1])}
`;

/** The keys and channel of the election on `key`: one hash slot for both keys. */
export function electionKeys(key: string): { key: string; counter: string; channel: string } {
  const tagged = `{${key}}`;
  return { key: tagged, counter: `${tagged}:token`, channel: `${tagged}:leader` };
}

/** A key's value as the acquire script wrote it, `<token>:<name>`; a value written otherwise is named whole, with token 0. */
export function parseHeld(value: string): { holder: string; token: number } {
  const match = /^(\d{1,16}):([\s\S]*)$/.exec(value);
  const token = match ? Number(match[1]) : NaN;
  if (!match || !Number.isSafeInteger(token)) return { holder: value, token: 0 };
  return { holder: match[2]!, token };
}

/** What the scripts publish on the election's channel, read back; undefined for a message they do not send. */
export type Announcement =
  | { readonly kind: "acquired"; readonly token: number; readonly ttlMs: number; readonly name: string }
  | { readonly kind: "released"; readonly token: number; readonly name: string };

export function parseAnnouncement(message: string): Announcement | undefined {
  const acquired = /^acquired (\d{1,16}) (\d{1,16}) ([\s\S]*)$/.exec(message);
  if (acquired) {
    const token = Number(acquired[1]);
    const ttlMs = Number(acquired[2]);
    return Number.isSafeInteger(token) && ttlMs > 0 ? { kind: "acquired", token, ttlMs, name: acquired[3]! } : undefined;
  }
  const released = /^released (\d{1,16}) ([\s\S]*)$/.exec(message);
  if (released) {
    const token = Number(released[1]);
    return Number.isSafeInteger(token) ? { kind: "released", token, name: released[2]! } : undefined;
  }
  return undefined;
}
