// The throwaway PostgreSQL and redis-server a run starts, from the test kit,
// each only when a subject of its store is selected. Both keep their
// defaults but one: autovacuum is off on PostgreSQL (with the settings file,
// no restart), so that its transactions never land in an idle window
// (bench/scenarios/store-idle.ts); the benchmark's tables are small and its
// server lives for one run.
import pg from "pg";
import { Redis } from "ioredis";
import { startPostgres, type PostgresServer } from "../test/kit/postgres-server";
import { startRedis, type RedisServer } from "../test/kit/redis-server";
import type { BenchContext } from "./context";
import { storeOf, type SubjectInfo } from "./subjects/types";

export interface StoreServers {
  postgres?: PostgresServer;
  redis?: RedisServer;
  /** Kills both and removes their dirs; safe to call twice. */
  close(): Promise<void>;
}

/** Starts what `subjects` need and puts their URLs in `ctx`. */
export async function startStoreServers(ctx: BenchContext, subjects: readonly SubjectInfo[]): Promise<StoreServers> {
  const servers: StoreServers = {
    async close() {
      await Promise.all([servers.postgres?.close().catch(() => undefined), servers.redis?.close().catch(() => undefined)]);
      servers.postgres = undefined;
      servers.redis = undefined;
    },
  };
  const needs = new Set(subjects.map(storeOf));
  try {
    if (needs.has("postgres")) {
      ctx.log("starting PostgreSQL");
      servers.postgres = await startPostgres();
      await withoutAutovacuum(servers.postgres.url);
      ctx.postgresUrl = servers.postgres.url;
    }
    if (needs.has("redis")) {
      ctx.log("starting redis-server");
      servers.redis = await startRedis();
      ctx.redisUrl = servers.redis.url;
    }
  } catch (err) {
    await servers.close();
    throw err;
  }
  return servers;
}

async function withoutAutovacuum(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query("ALTER SYSTEM SET autovacuum = off");
    await client.query("SELECT pg_reload_conf()");
  } finally {
    await client.end();
  }
}

/** The versions for the report's machine line: what the servers say of themselves. */
export async function storeVersions(servers: StoreServers): Promise<{ postgres?: string; redis?: string }> {
  const versions: { postgres?: string; redis?: string } = {};
  if (servers.postgres) {
    const client = new pg.Client({ connectionString: servers.postgres.url });
    await client.connect();
    try {
      versions.postgres = String((await client.query<{ server_version: string }>("SHOW server_version")).rows[0]?.server_version);
    } finally {
      await client.end();
    }
  }
  if (servers.redis) {
    const client = new Redis(servers.redis.url);
    try {
      versions.redis = /redis_version:(\S+)/.exec(await client.info("server"))?.[1];
    } finally {
      client.disconnect();
    }
  }
  return versions;
}
